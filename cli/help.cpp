// embedlab-cli's help (help.hpp): the command table's one-line summaries, grouped by
// task, and each command's reference block.
#include "help.hpp"

#include <sstream>

#include "embedlab/error.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/trim_fields.hpp"
#include "method_flags.hpp"

namespace embedlab::cli {

namespace {

// The whole reference: the header, one block per command form (a block starts with a line
// indented by exactly two spaces and the command's name), and the MODEL footer.
const char* const kBeforeCompressMethods =
    R"(embedlab-cli — compress and evaluate token embeddings of small language models

usage: embedlab-cli COMMAND [options]

commands:
  inspect  [MODEL] [--json]                    architecture, sizes, parameter breakdown, sha256
  eval     [MODEL] (--text FILE | --ids FILE) [--ctx N] [--stride S] [--batch B] [--json]
           [--reference ORIGINAL [--per-token FILE.csv [--force]]]
                                               perplexity (METHODS.md section 0) and bits per
                                               byte; with --reference also llama-perplexity's KL
                                               divergence statistics against it and damage by
                                               token frequency; per vocabulary token (row cosine,
                                               KL) to --per-token
  eval     ENCODER --text FILE [--ctx N (128)] [--mask-rate R [--seed S]] [--reference ORIGINAL] [--json]
                                               a masked-LM encoder's pseudo-perplexity and masked-token
                                               accuracy: windows framed [CLS] .. [SEP], each token masked
                                               in turn (or R of them at once, drawn by seed); with
                                               --reference the KL to the original on the same inputs
  eval     [MODEL] --reference-logits FILE [--json]
                                               the same statistics against the base model's
                                               log-probabilities llama-perplexity
                                               --kl-divergence-base saved, on its tokens and chunks
  task     sst2|mc|stsb|cola|mrpc|qqp|mnli|mnli-mm|qnli|rte|wnli [MODEL] --data FILE [--limit N]
           [--reference ORIGINAL] [--out FILE.jsonl [--force]] [--json]
                                               zero-shot accuracy by log-likelihood (sst2: GLUE SST-2
                                               dev.tsv; mc: JSONL {context, choices, label}) or STS-B
                                               Spearman of pooled hidden states; per example to --out;
                                               stsb --reference: top-10 neighbour agreement of the pooled
                                               sentences (retrieval_agreement_top10); a sequence
                                               classifier answers sst2 and GLUE's other classification
                                               tasks (their own dev.tsv layouts) with its head: accuracy,
                                               cola's MCC, mrpc's and qqp's F1
  tokenize [MODEL] --text FILE [--json]        token ids of a text
  embed    [MODEL] --text FILE [--pooling cls|mean|max|model] [--normalize] [--batch B (32)] [--json]
                                               one pooled embedding per line of FILE: encoders read
                                               [CLS] line [SEP]; model (default): a sentence-transformers
                                               model's own pooling (and Normalize), CLS for classifiers,
                                               else mean (decoders: mean of final hidden states);
                                               --json: {"pooling", "dim", "embeddings": [[...], ...]}
  generate [MODEL] (--prompt TEXT | --prompt-file FILE) [--max-tokens N (64)] [--temperature T (0: greedy)]
           [--top-k K] [--top-p P] [--min-p P] [--sampler llamacpp|hf] [--seed S] [--stop STRING ..]
           [--ignore-eos] [--no-bos] [--top-n N (5)] [--weights half|f32] [--json]
           [--compare ORIGINAL]                the continuation, streamed (KV cache); BOS first when the
                                               tokenizer has its own; sampling (--sampler): llamacpp
                                               (default) top-k, top-p, min-p (default 0.05), temperature;
                                               hf: temperature, top-k, top-p, min-p (default 0);
                                               reproducible by seed; --ignore-eos: go on past the
                                               end-of-sequence token; --compare: the original's continuation
                                               from the same prompt and seed, and per generated token
                                               KL(P_original || P_model) and the token's rank under the
                                               original; --json: ids, text, log-probabilities, top-N, timings;
                                               --weights: an f16/bf16 model's matrices kept as stored
                                               (half, the default) or widened to float32 (f32)
  export   [MODEL] --out PATH [--format gguf|hf|onnx] [--type f32|f16|q8_0] [--force] [--json]
           [--embedding-type T] [--output-type T]  a GGUF file llama.cpp runs (compressed tables made
                                               dense; default f16), or a dense Hugging Face directory;
                                               the token table / untied head at a ggml type T
                                               (f32, f16 .. q2_k), as llama-quantize writes it
           --format onnx [--with-past] [--external-data] [--opset 17]
                                               the decoder as an ONNX graph (float32) with the token
                                               table as stored (factors, codes, cores) and the tied head
                                               through them; input_ids, attention_mask, position_ids ->
                                               logits; --with-past: past_key_values.L.key/value in,
                                               present.L.key/value out; --external-data: tensors in
                                               FILE.data
  bench eval [MODEL...] [--text FILE] [--ctx N] [--compare-llamacpp [--llamacpp PATH]] [--json]
                                               tokens per second, one window at a time vs batched;
                                               GFLOP/s and their share of the machine's GEMM peak
  bench generate [MODEL...] [--prompt-tokens P (128)] [--tokens N (128)] [--repeat R (3)]
           [--compare-llamacpp [--llamacpp PATH]] [--weights half|f32] [--json]
                                               prompt processing (pp) and generation (tg) tokens/s over
                                               the KV cache; with llama-bench on the f32 GGUF export
                                               (f16 when the model's f16/bf16 weights are kept half);
                                               tg's GB/s of weights read and pp's GFLOP/s, as shares
                                               of the machine's read bandwidth and GEMM peak
  bench machine [--json]                       this machine's limits: memory read and triad bandwidth
                                               (STREAM-style, 128 MiB arrays) and the float32 GEMM peak
  bench onnx [MODEL...] [--text FILE] [--ctx N (128)] [--repeat R (5)] [--onnxruntime DIR] [--arch x64|arm64]
           [--json]                            the ONNX export (f32, a temporary file) in ONNX Runtime
                                               (npm's onnxruntime-node; arm64: under qemu) on the first
                                               N tokens, beside EmbedLab: file bytes, ORT peak RSS, load
                                               time, tokens/s on both, both perplexities
    bench pca|tt|lookup|lle [--vocab V] [--dim d] [--seed S] [--repeat R] [--json]
           pca: [--method pca|svd] [--rank K]   tt: [--shape I1,I2,..] [--ranks 1,r,..,1 | --eps E [--uniform-ranks]]
           lookup: [--method M|dense (tt)] [--batch B] + the method's flags (else a typical setting)
           lle: [--common C (10000)] [--k K (5)] [--reg R] [--knn exact|ivf [--nlist N] [--nprobe P]]
                                               fit / lookup timings and peak RSS on a synthetic table
  account  --method M --vocab V [--dim d] + the method's flags, as compress takes them: pca|svd --rank K,
           tt --shape I1,I2,.. [--ranks 1,r,..,1], tucker --shape I1,I2,.. --ranks r1,..,rN, quant --type T
           (d: --dim, or the product of --shape); a number flag takes K1,K2,.. and a list flag A:B, one
           row per setting   [--stored-type f32|f16|bf16|q8_0|..]  bytes against the table so stored
           [--tokens L] [--nu X] [--tau Y | --device D] [--model-params N] [--untied] [--positions N] [--json]
                                               params, ratio, eta, FLOPs, energy; no model needed
  compress [MODEL] --method METHOD + its flags (below) --out DIR [--eval-text FILE [--ctx N] [--divergence]]
           [--dense] [--force] [--json] [--tokenizer DIR] [--seed S]
           [--task sst2|mc|cola|.. --task-data FILE [--task-limit N]]  task accuracy after the evaluation,
                                               beside the original's on the same examples (GLUE's tasks
                                               as `task` lists them; cola adds mcc, mrpc and qqp f1)
                                               write a compressed model directory (embedlab.json, factor
                                               tensors; --dense adds DIR/dense, a plain HF model); every
                                               method's table is evaluated as stored, bytes as written.
                                               Each method's block below is generated from its fields:
                                               the range check_request holds, the default, what it is
)";

// trim's usage and summary, after the methods' compress blocks; its flag rows follow,
// generated (trim_rows).
const char* const kTrimUsage =
    R"(  trim     MODEL --freq-text FILE (--keep N | --coverage C) --out DIR [--keep-tokens FILE]
           [--eval-text FILE [--ctx N]] [--force] [--json]
                                               vocabulary trimming: a plain model directory with the
                                               tokens FILE uses most plus the special tokens, the
                                               tokens that encode any text and --keep-tokens' lines (as
                                               the vocabulary spells them); table and head cut, tokenizer
                                               rewritten (byte-level BPE, WordPiece, SentencePiece BPE);
                                               texts of kept tokens encode as before; trim.json records
                                               it, and with --eval-text bits per byte, changed tokens and
                                               the original's probability on dropped ids
)";

// After trim's flag rows: up to the first sweep block, which the methods' sweep blocks follow.
const char* const kBeforeSweepMethods =
    R"(  compress MODEL --method trim --freq-text FILE (--keep N | --coverage C) [--keep-tokens FILE] --out DIR
           [--then METHOD + its flags [--then-store TYPE]] [--eval-text FILE [--ctx N]] [--force] [--json]
                                               trim as a compress step (DIR: trim's directory and
                                               run.json), or a chain in one job: trim, then METHOD on the
                                               trimmed model, its factors stored at TYPE; DIR appears
                                               only when every step finished; embedlab.json's "pipeline"
                                               records every step and the whole chain's bytes against the
                                               original (a worker job: "pipeline": [steps]); lle after
                                               trim reads the same --freq-text. --method M --then-store
                                               TYPE alone is M's --store TYPE
  fourier-map [MODEL | FOURIER_DIR] --ids A:B [--dir FOURIER_DIR] [--json]
                                               features T, MLP(T), E, original rows and neighbour
                                               cosines for ids A..B-1 (at most 4096)
  neighbours [MODEL] --freq-text FILE --keep-ratio R --k K (--token STRING | --id N) [--json]
                                               a rare token's common neighbours, LLE weights, rebuild cosine
  sweep    [MODEL] --method METHOD + its list (below) --eval-text FILE [--ctx N] [--divergence] [--json]
           [--task sst2|mc|cola|.. --task-data FILE [--task-limit N]]  every row's task accuracy too;
                                               one row per setting: params, ratio, cosine, ppl, delta ln
                                               PPL, bytes (lle: rare-row cosine, coverage); the method's
                                               other flags as compress takes them
)";

// The methods' sweep blocks go here; then the rest of the reference.
const char* const kAfterSweepMethods =
    R"(           (a number list takes K1,K2,.. or a range A:B:S, B included when a step lands on it:
                                               --ranks 8:128:8, --eps 0.1:0.4:0.1, --keep-ratios 0.3,0.5:0.9:0.2)
  sweep    ... --slurm [--sweep-dir DIR] [--partition P] [--time HH:MM:SS] [--cpus-per-task N] [--mem M]
           [--array-limit K] [--sbatch-arg ARG]... [--slurm-cli PATH] [--no-wait]
                                               the sweep's points as one Slurm job array (pca, svd, tt,
                                               lle family); the same rows + slurm_job_id, task, node
  sweep-status DIR [--json] [--cancel]         a Slurm sweep's tasks: pending/running/done/failed
  sweep-collect DIR [--resubmit-failed] [--no-wait] [--json]
                                               wait for a Slurm sweep and print its rows; failed tasks again
  importance [MODEL] --calib-text FILE [--samples N (128)] [--seqlen T (256 or ctx)] [--seed S] [--json]
                                               FLAT-LLM decoder importance scores, value spectra
  allocate --scores FILE.json --ratios R1,R2,.. [--d-head D] [--allocation iprs|uniform] [--json]
                                               IPRS remaining-rank ratios and ranks; no model needed
  sweep    [MODEL] --method flat --remainings R1,R2,.. [--allocation iprs,uniform] [--mlp]
           --calib-text FILE --eval-text FILE [--divergence] [--task ...] [--json]
  sweep    [MODEL] --method flat --target-ratios T1,T2,.. [--no-mlp] ...
                                               rows by decoder target (MLPs too, as compress)
  finetune DIR --train-text FILE --steps N [--lr X (1e-3)] [--batch B (8)] [--seqlen T (128)] [--seed S]
           [--rank R (32)] [--alpha A (64)] [--targets q,k,v,o,mlp,embedding] [--weight-decay W] [--warmup N]
           --out DIR2 [--eval-text FILE [--ctx N]] [--merge] [--from-scratch] [--force] [--json]
                                               LoRA recovery of a compressed model (METHODS.md 1); --merge
                                               folds the adapters into the weights; --from-scratch: the lrf
                                               baseline (random pca/svd factors of the same k, trained in full);
                                               a fourier table trains its own MLP (no per-token parameters;
                                               --targets embedding: the MLP alone), --fourier-row-lora instead
                                               adds a V x r per-token row adapter
  finetune ENCODER --head classification --task sst2|cola|mrpc|qqp|mnli|qnli|rte|wnli|stsb --train FILE --out DIR
           [--eval FILE] [--steps N (300) | --epochs E] [--schedule constant|linear [--warmup N]]
           [--batch B (16)] [--lr X (1e-3)] [--body-lr X (0: body frozen)] [--seed S] [--limit N] [--force] [--json]
           [--full]                            the LLE paper's protocol: every weight at --lr (2e-5), 3
                                               shuffled epochs, linear decay to 0 (AdamW, no warm-up)
                                               a sequence classifier from an encoder (bert, distilbert): a
                                               fresh head trained on the task's labelled sentences (or pairs), written
                                               as a Hugging Face …ForSequenceClassification directory;
                                               --eval: its accuracy on the task's dev set; stsb: a
                                               regression head (one output, MSE), scored by Spearman
           [--trials N (1)] [--compress lle,lle-unk,lle-pca [--keep-ratios R1,.. (1.0)] [--k K[,K2..]|auto]
           [--freq-text FILE]]                 the paper's Table 1 protocol (needs --eval, the test set):
                                               N fine-tunings, seeds S..S+N-1; each scored, then its table
                                               compressed per method and r(V_C) (V_C from the training
                                               sentences, or --freq-text) and scored again; one record
                                               (--json "protocol") and table: every trial's score, mean and
                                               sample std; --k auto (lle 1..5, lle-pca 1..10) or a k list:
                                               trains on 90% of --train and keeps the k with the best mean
                                               score on the other 10% (seed 42); --out gets trial 1's model
  train    --config tiny|small --embedding table|fourier[:linear|geglu] --train-text FILE (--minutes M | --steps N)
           --out DIR [--eval-text FILE [--ctx N]] [--seed S] [--lr X (1e-3)] [--batch B (8)] [--seqlen T (128)]
           [--warmup N (50)] [--hidden-ratio R (0.25)] [--no-norm] [--norm-scale S (0.02)] [--tokenizer DIR]
           [--arch gpt2|bert] [--objective clm|mlm] [--mask-rate R (0.15)] [--force] [--json]
                                               a GPT-2-style model trained from scratch (tiny: d 128, 4 layers,
                                               4 heads; small: d 256, 6 layers, 8 heads; 256 positions; tied
                                               head) with a learned table or PETE's Fourier features + MLP
                                               (METHODS.md 4, no per-token parameters); GPT-2's tokenizer.
                                               --arch bert: a BERT encoder trained by masked-LM (--objective
                                               mlm, BERT's 80/10/10 masking of --mask-rate of the positions),
                                               saved as BertForMaskedLM; needs --tokenizer DIR (WordPiece);
                                               --eval-text gives its pseudo-perplexity
  bench train [--model M] [--steps N (20)] [--k K (32)] [--rank R] [--batch B] [--seqlen T] [--text FILE]
                                               LoRA training throughput (tokens per second)
  bench scale --like NAME [--layers N] [--dtype f32|f16|bf16] [--keep DIR] [--json]
                                               synth's model (or the one kept in DIR), then inspect, eval
                                               (256 tokens), compress pca/lle/flat/tt, each in a child
                                               process: seconds, peak RSS, eval tokens/s
  worker   [--job FILE] [--identify] [--keep-on-eof]
                                               run one JSON job (compress|eval|measure; stdin: one line)
                                               and print JSON-line events and the result on stdout
  remote doctor HOST [--ssh-config FILE] [--remote-cli PATH] [--remote-dir DIR] [--json]
                                               reachability, remote version, CPU, memory, device, power sampling
  remote run HOST[,HOST..] JOB.json [JOB2.json..] [--ssh-config FILE] [--remote-cli PATH]
           [--remote-dir DIR] [--no-fetch] [--cleanup] [--quiet]
                                               jobs on other hosts over ssh (one job per host at a time)
  remote run --slurm JOB.json [JOB2.json..] [the sweep --slurm options]
                                               job files as one Slurm job array
  figure   spectrum|iprs|neighbours|fourier|tt|pareto [MODEL | RESULTS.json] --out FILE.png|.pdf|.svg [--force]
           [--width single|double|slide] [--aspect A (0.62)] [--dpi N (300)]
           spectrum: [--rank K] [--compare MODEL,..] [--value-heads [--text FILE]]   iprs: [--text FILE] [--ratio R (0.5)] [--overlay] [--samples N] [--seqlen T]
           neighbours: [--text FILE] [--keep-ratio R (0.5)] [--k K (5)] [--token STRING | --id N]
           fourier: [--ids A:B (0:256)] [--dir FOURIER_DIR] [--dimension I]   tt: [--eps E1,E2,..] [--shapes N]
           pareto: [--x params|bytes]  the x axis: the values ratio, or the bytes as stored (default
                                               where the rows have bytes; quant drawn as the baseline)
                                               a workbench view rendered headless (pareto: the results
                                               JSON or CSV of File > Export results or demo)
  demo     [--out DIR (build/demo)] [--quick] [--force]
                                               pca, svd, tt, lle, fourier, flat and pca + LoRA at a few
                                               settings on the bundled model:
                                               results.csv/json, every figure (PNG, PDF), report.md/html
                                               (figure and demo need the GUI build: embedlab-figure)
  synth    --like NAME --out DIR [--dtype f32|f16|bf16] [--seed S] [--layers N] [--force] [--json]
                                               random weights with a real model's config.json and tensor
                                               names (gpt2-small, qwen2.5-0.5b, ...: scale fixtures)
  version                                      print the version

MODEL is a Hugging Face directory (config.json + safetensors; an EmbedLab compressed
directory runs through its factorised embedding), a .gguf file, or a llama2.c .bin
(tokenizer.bin beside it, or --tokenizer FILE). Without MODEL the bundled default model
(tinygpt2-f16) is used. Progress goes to stderr; --quiet hides it. A compressed directory's
tensors are checked against the sha256 in its embedlab.json (eval/inspect/importance:
--no-verify skips the check).
)";

constexpr size_t kDescriptionColumn = 47; // where the reference's descriptions start

constexpr size_t kLineWidth = 112;

// `text` broken at spaces into lines of at most `width`, the later ones indented by `indent`.
std::string wrapped(const std::string& text, size_t width, size_t indent)
{
    std::string out, line;
    std::istringstream words(text);
    for (std::string word; words >> word;) {
        if (!line.empty() && line.size() + 1 + word.size() > width) {
            out += line + "\n" + std::string(indent, ' ');
            line.clear();
        }
        line += (line.empty() ? "" : " ") + word;
    }
    return out + line;
}

// "flag text" padded to the description column (on a line of its own when longer),
// the description wrapped within the reference's width.
std::string row(const std::string& left, const std::string& description)
{
    std::string line = left;
    if (line.size() + 2 > kDescriptionColumn)
        line += "\n";
    line.resize(line.rfind('\n') == std::string::npos ? kDescriptionColumn
                                                      : line.rfind('\n') + 1 + kDescriptionColumn,
                ' ');
    return line + wrapped(description, kLineWidth - kDescriptionColumn, kDescriptionColumn) + "\n";
}

// A field's value as its flag takes it: "8,8,12", "0.001", "q8_0".
std::string flag_value_text(const nlohmann::ordered_json& v)
{
    if (v.is_string())
        return v.get<std::string>();
    if (!v.is_array())
        return v.dump();
    std::string text; // appended piece by piece: GCC 12's -Wrestrict misfires on "," + string
    for (const auto& x : v) {
        if (!text.empty())
            text += ',';
        text += x.dump();
    }
    return text;
}

// " (0.001)", " (0: automatic)", or "" for a default not worth printing.
std::string default_text(const FieldDoc& doc, const nlohmann::ordered_json& v)
{
    if (v.is_number() && v.get<double>() == 0)
        return doc.zero.empty() ? "" : " (0: " + doc.zero + ")";
    if (v.is_boolean() || (v.is_string() && v.get<std::string>().empty()) || (v.is_array() && v.empty()))
        return "";
    return " (" + flag_value_text(v) + ")";
}

// "--keep-ratio R", or "--norm" for a switch.
std::string flag_word(const MethodDescriptor& m, const std::string& field, const FieldDoc& doc)
{
    const std::string flag = method_flag(m, field);
    if (request_field_type(field) == RequestFieldType::Bool)
        return flag;
    return flag + " " + (doc.value_name.empty() ? "X" : doc.value_name);
}

// "(0, 1]: the share of tokens kept as common rows (with --mlp geglu)".
std::string field_description(const MethodDescriptor& m, const FieldDoc& doc)
{
    std::string range = field_range_text(doc);
    std::string text = range.empty() ? doc.help : range + ": " + doc.help;
    if (!doc.applies_with.empty()) {
        std::string with;
        const auto others = nlohmann::ordered_json::parse(doc.applies_with);
        for (const auto& [k, v] : others.items())
            if (!(v.is_number() && v.get<double>() == 0) && !(v.is_array() && v.empty())) {
                if (!with.empty())
                    with += ' ';
                with += method_flag(m, k);
                if (v.is_string()) {
                    with += ' ';
                    with += v.get<std::string>();
                }
            }
        if (!with.empty())
            text += " (with " + with + ")";
    }
    return text;
}

// One method's compress block, generated from its registry row and field docs (issue 59).
std::string compress_block(const MethodDescriptor& m)
{
    const CompressionRequest defaults;
    std::string usage = "  compress [MODEL] --method " + std::string(m.name);
    std::string rows;
    std::vector<std::string> fields = m.fields;
    if (m.positions)
        fields.push_back("positions");
    for (const auto& f : fields) {
        const FieldDoc& doc = method_field_doc(m, f);
        const std::string word = flag_word(m, f, doc);
        if (doc.required)
            usage += " " + word;
        const std::string left =
            doc.required ? word : "[" + word + default_text(doc, request_field_value(defaults, f)) + "]";
        rows += row("           " + left, field_description(m, doc));
    }
    std::string example = "e.g. --method " + std::string(m.name);
    if (!m.example.empty()) {
        const auto fields_json = nlohmann::ordered_json::parse(m.example);
        for (const auto& [k, v] : fields_json.items()) {
            example += ' ';
            example += method_flag(m, k);
            if (!v.is_boolean()) {
                example += ' ';
                example += flag_value_text(v);
            }
        }
    }
    return row(usage + " --out DIR [...]", m.summary) + rows + "           " + example + "\n";
}

// Trim's flag rows, generated from its declarations (trim_fields.hpp) as a method's are;
// its usage lines and summary are kTrimUsage.
std::string trim_rows()
{
    std::string rows;
    for (const MethodField& f : trim_fields()) {
        FieldDoc doc = f.doc;
        doc.zero.clear(); // a form's "0: off"; a flag left out is off, --keep 0 is refused
        const std::string range = field_range_text(doc);
        rows += row("           " + trim_flag(f) + " " + f.doc.value_name,
                    range.empty() ? f.doc.help : range + ": " + f.doc.help);
    }
    return rows;
}

// One method's sweep block: its list flags from the registry's sweep grammar.
std::string sweep_block(const MethodDescriptor& m)
{
    const std::string usage = "[MODEL] --method " + std::string(m.name) + " " + m.sweep.usage;
    return "  sweep    " + wrapped(usage, kLineWidth - 11, 11) + "\n";
}

// The whole reference: the hand-written blocks with each registered method's compress
// and sweep blocks generated in between (a method registered at run time included).
std::string reference_text()
{
    std::string text = kBeforeCompressMethods;
    for (const auto& m : method_registry())
        text += compress_block(m);
    text += kTrimUsage;
    text += trim_rows();
    text += kBeforeSweepMethods;
    for (const auto& m : method_registry())
        if (m.sweep.settings)
            text += sweep_block(m);
    return text + kAfterSweepMethods;
}

// The reference's lines up to the first command block, its command blocks, and the
// footer after the last one (from the first line that is not indented).
struct ReferenceParts {
    std::string header, footer;
    std::vector<std::pair<std::string, std::string>> blocks; // command, its lines
};

ReferenceParts reference_parts()
{
    ReferenceParts p;
    std::istringstream in(reference_text());
    std::string line;
    bool in_commands = false, after = false;
    while (std::getline(in, line)) {
        const bool starts_block = line.size() > 2 && line.compare(0, 2, "  ") == 0 && line[2] != ' ';
        if (!after && starts_block) {
            in_commands = true;
            p.blocks.emplace_back(line.substr(2, line.find(' ', 2) - 2), "");
        } else if (in_commands && !line.empty() && line[0] != ' ') {
            after = true;
        }
        if (after)
            p.footer += line + "\n";
        else if (in_commands)
            p.blocks.back().second += line + "\n";
        else if (line != "commands:")
            p.header += line + "\n";
    }
    return p;
}

} // namespace

const std::vector<CommandGroup>& command_groups()
{
    static const std::vector<CommandGroup> groups{
        {"Look at a model",
         {{"inspect", "architecture, sizes, parameter breakdown, sha256"},
          {"tokenize", "token ids of a text"},
          {"embed", "one pooled embedding per line of a text (sentence embeddings)"},
          {"generate", "a continuation of a prompt (KV cache); --compare against the original"},
          {"eval", "perplexity; with --reference, llama.cpp's KL divergence statistics"},
          {"task", "zero-shot SST-2 / multiple-choice accuracy, STS-B Spearman"},
          {"neighbours", "a rare token's common neighbours and LLE weights"},
          {"fourier-map", "Fourier features, MLP output and rows for a range of ids"},
          {"importance", "FLAT-LLM decoder importance scores, value spectra"}}},
        {"Compress",
         {{"compress",
           "write a compressed model directory (pca, svd, tt, tucker, lle, fourier, quant, aq, flat)"},
          {"trim", "cut the vocabulary to the tokens a domain text uses (a plain model directory)"},
          {"sweep", "one row per setting: params, ratio, ppl, delta ln PPL (also on Slurm)"},
          {"sweep-status", "a Slurm sweep's tasks"},
          {"sweep-collect", "wait for a Slurm sweep and print its rows"},
          {"finetune", "LoRA recovery of a compressed model"},
          {"train", "a small GPT-2-style model or BERT encoder from scratch, table or PETE embedding"},
          {"allocate", "IPRS remaining-rank ratios from importance scores"},
          {"account", "params, ratio, FLOPs, energy of a factorisation; no model needed"}}},
        {"Export and show",
         {{"export", "a GGUF file llama.cpp runs, an ONNX graph, or a dense Hugging Face directory"},
          {"figure", "a workbench view rendered headless (PNG, PDF, SVG)"},
          {"demo", "every method, every figure and a report on the bundled model"}}},
        {"Run elsewhere",
         {{"remote", "doctor / run jobs on other hosts over ssh, or on Slurm"},
          {"worker", "run one JSON job and print events (what remote starts)"}}},
        {"Measure and make fixtures",
         {{"bench", "speed and memory: eval, generate, onnx, pca, tt, lookup, lle, train, scale, machine"},
          {"synth", "random weights with a real model's config and tensor names"},
          {"version", "print the version"}}},
    };
    return groups;
}

std::string command_list()
{
    const auto parts = reference_parts();
    std::string out = parts.header;
    while (out.ends_with("\n\n")) // each group opens with its own blank line
        out.pop_back();
    for (const auto& group : command_groups()) {
        out += "\n" + group.title + ":\n";
        for (const auto& c : group.commands) {
            std::string name = "  " + c.name;
            name.resize(17, ' ');
            out += name + c.summary + "\n";
        }
    }
    out += "\nembedlab-cli help COMMAND (or COMMAND --help) shows a command's options;\n"
           "embedlab-cli help --all the whole reference; help --commands the command names.\n";
    return out;
}

std::string command_help(const std::string& command)
{
    const auto parts = reference_parts();
    if (command == "--all") {
        std::string out = parts.header + "commands:\n";
        for (const auto& [name, lines] : parts.blocks)
            out += lines;
        return out + parts.footer;
    }
    std::string blocks;
    for (const auto& [name, lines] : parts.blocks)
        if (name == command)
            blocks += lines;
    if (blocks.empty())
        throw InputError("help: unknown command '" + command + "' (embedlab-cli help lists them)");
    return "usage:\n" + blocks + parts.footer;
}

} // namespace embedlab::cli
