// run_compression and export_run (experiment.hpp): the one implementation of
// "fit, recover, evaluate, record, export" that every front end calls. The steps are
// the same for every method; a method's own work is its part's CompressionUnit
// (compression_unit.hpp: run_table.cpp, run_flat.cpp).
#include "embedlab/experiment.hpp"
#include "embedlab/text_format.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/finetune.hpp"
#include "embedlab/masked_lm.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/tasks.hpp"
#include "embedlab/tokenizer.hpp"
#include "eval/classifier_task.hpp"
#include "job/compression_unit.hpp"
#include "job/run_steps.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;
using run_steps::EvalInput;
using run_steps::kNaN;
using run_steps::RunInputs;
using run_steps::StagedProgress;
using run_steps::Training;

namespace {

std::string host_name()
{
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0)
        return "localhost";
    return buf;
}

// What identifies the bytes of `path` (a file, or every file under a directory) for the
// process's caches: each file's name, size, device, inode and change time. The kernel
// sets the change time on every write, rename or link, and nothing sets it back (touch
// sets only the modification time), so a file rewritten in place, even to the same size
// and modification time, gets another key. A directory's own time is not enough: a
// file rewritten in place leaves it unchanged.
std::string file_identity(const fs::path& path)
{
    std::string key;
    const auto add = [&](const fs::path& p) {
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0)
            return;
        key += p.string() + ' ' + std::to_string(st.st_size) + ' ' + std::to_string(st.st_dev) + ' ' +
               std::to_string(st.st_ino) + ' ' + std::to_string(st.st_ctim.tv_sec) + '.' +
               std::to_string(st.st_ctim.tv_nsec) + ' ' + std::to_string(st.st_mtim.tv_sec) + '.' +
               std::to_string(st.st_mtim.tv_nsec) + '\n';
    };
    std::error_code ec;
    if (path.empty() || !fs::exists(path, ec))
        return key;
    add(path);
    if (!fs::is_directory(path, ec))
        return key;
    std::vector<fs::path> files; // sorted: the key does not depend on the listing's order
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec))
            files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
        add(f);
    return key;
}

// Original-model perplexities by model, ids and protocol, for the process.
std::mutex baseline_mutex;
std::map<std::string, PerplexityResult> baselines;

std::string baseline_key(const CompressionRequest& r, const std::vector<int32_t>& ids,
                         const PerplexityOptions& o)
{
    std::error_code ec;
    const auto model = fs::weakly_canonical(r.model, ec);
    const std::string_view bytes(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t));
    return model.string() + "\n" + file_identity(model) + "\n" + r.tokenizer + "\n" +
           file_identity(r.tokenizer) + "\n" + std::to_string(std::hash<std::string_view>{}(bytes)) + "\n" +
           std::to_string(ids.size()) + "\n" + std::to_string(o.ctx) + "/" + std::to_string(o.stride) + "/" +
           std::to_string(o.batch_windows);
}

PerplexityResult original_perplexity(const CompressionRequest& r, const LanguageModel& model,
                                     const std::vector<int32_t>& ids, const PerplexityOptions& o,
                                     const ProgressFn& progress)
{
    const std::string key = baseline_key(r, ids, o);
    {
        std::lock_guard lock(baseline_mutex);
        if (auto it = baselines.find(key); it != baselines.end()) {
            report_progress(progress, 1, 1);
            return it->second;
        }
    }
    const auto result = evaluate_perplexity(model, ids, o, progress); // unlocked: a cancel caches nothing
    std::lock_guard lock(baseline_mutex);
    baselines[key] = result;
    return result;
}

// Original-model pseudo-perplexities (an encoder's), keyed as the perplexities are.
std::map<std::string, MaskedLmResult> masked_baselines;

std::string masked_baseline_key(const CompressionRequest& r, const EvalInput& e)
{
    return "masked-lm\n" + baseline_key(r, e.ids, e.options) + "/" + std::to_string(e.masked.batch);
}

MaskedLmResult original_pseudo_perplexity(const CompressionRequest& r, const LoadedModel& lm,
                                          const EvalInput& e, const ProgressFn& progress)
{
    const std::string key = masked_baseline_key(r, e);
    {
        std::lock_guard lock(baseline_mutex);
        if (auto it = masked_baselines.find(key); it != masked_baselines.end()) {
            report_progress(progress, 1, 1);
            return it->second;
        }
    }
    const auto result = evaluate_masked_lm(*lm.model, *lm.tokenizer, e.ids, e.masked, nullptr, progress);
    std::lock_guard lock(baseline_mutex);
    masked_baselines[key] = result;
    return result;
}

bool baseline_cached(const CompressionRequest& r, const EvalInput& e)
{
    const std::string key = e.masked_lm ? masked_baseline_key(r, e) : baseline_key(r, e.ids, e.options);
    std::lock_guard lock(baseline_mutex);
    return e.masked_lm ? masked_baselines.count(key) > 0 : baselines.count(key) > 0;
}

// The original model's zero-shot task results by model, task, file and limit, for the process.
std::mutex task_mutex;
std::map<std::string, TaskResult> original_tasks;

std::string task_key(const CompressionRequest& r)
{
    std::error_code ec;
    const auto model = fs::weakly_canonical(r.model, ec), data = fs::weakly_canonical(r.task_data, ec);
    return model.string() + "\n" + file_identity(model) + "\n" + r.tokenizer + "\n" +
           file_identity(r.tokenizer) + "\n" + r.task + "\n" + data.string() + "\n" + file_identity(data) +
           "\n" + std::to_string(r.task_limit);
}

bool task_cached(const CompressionRequest& r)
{
    std::lock_guard lock(task_mutex);
    return original_tasks.count(task_key(r)) > 0;
}

TaskResult original_task(const CompressionRequest& r, const LanguageModel& model, const Tokenizer& tokenizer,
                         const TaskData& data, const ProgressFn& progress)
{
    const std::string key = task_key(r);
    {
        std::lock_guard lock(task_mutex);
        if (auto it = original_tasks.find(key); it != original_tasks.end()) {
            report_progress(progress, 1, 1);
            return it->second;
        }
    }
    auto result = evaluate_task(model, tokenizer, data, progress); // unlocked: a cancel caches nothing
    std::lock_guard lock(task_mutex);
    original_tasks[key] = result;
    return result;
}

// The manifest's evaluation.task block: the compressed model's accuracy and the original's,
// with GLUE's own metric where the task has one (cola mcc, mrpc and qqp f1).
Json task_record(const CompressionRequest& r, const TaskResult& compressed, const TaskResult& original)
{
    Json j = {{"name", r.task},
              {"data", fs::absolute(r.task_data).lexically_normal().string()},
              {"limit", r.task_limit},
              {"n", compressed.n},
              {"accuracy", compressed.accuracy},
              {"accuracy_norm", compressed.accuracy_norm},
              {"original", {{"accuracy", original.accuracy}, {"accuracy_norm", original.accuracy_norm}}},
              {"choice_agreement", choice_agreement(compressed, original)},
              {"metric", detail::headline_metric(compressed)},
              {"metric_value", detail::headline_value(compressed)},
              {"seconds", compressed.seconds}};
    for (const auto& [name, a, b] :
         {std::tuple{"mcc", compressed.mcc, original.mcc}, std::tuple{"f1", compressed.f1, original.f1}})
        if (!std::isnan(a)) {
            j[name] = a;
            j["original"][name] = b;
        }
    j["original"]["metric_value"] = detail::headline_value(original);
    return j;
}

// Tokens the task reads (every choice is scored on its own): about 4 characters a token.
double task_tokens(const TaskData& data)
{
    double chars = 0;
    for (const auto& e : data.examples)
        for (const auto& c : e.continuations)
            chars += double(e.context.size() + c.size());
    return chars / 4;
}

bool same_file(const std::string& a, const std::string& b)
{
    std::error_code ea, eb;
    const auto ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
    return !ea && !eb && ca == cb;
}

// An encoder's evaluation: pseudo-perplexity, with `embedlab-cli eval`'s defaults (every
// token masked in turn, ctx as a decoder's, batch 64 unless the request gives one).
void masked_lm_protocol(const CompressionRequest& r, const LoadedModel& lm, EvalInput& e)
{
    const auto& config = lm.model->config();
    if (config.encoder_head != EncoderHead::MaskedLM)
        throw InputError(r.model + ": " + config.type_name() +
                         " is an encoder without a masked-LM head: it has neither a perplexity nor a "
                         "pseudo-perplexity. Run it without an evaluation (eval_text, eval_ids): its run "
                         "records the mean cosine of the rebuilt table rows");
    if (!lm.tokenizer)
        throw InputError(r.model + ": its pseudo-perplexity needs the tokenizer's [CLS], [SEP] and [MASK]; "
                                   "give the model's tokenizer");
    if (r.stride > 0 && r.stride != e.options.ctx)
        throw InputError("stride " + std::to_string(r.stride) + ": " + r.model +
                         " is an encoder, scored by pseudo-perplexity on windows that do not overlap; "
                         "give no stride");
    if (e.options.ctx < 3)
        throw InputError(
            "ctx " + std::to_string(e.options.ctx) + ": " + r.model +
            " is an encoder: its windows hold [CLS] and [SEP] around at least one id (ctx 3 or more)");
    e.masked_lm = true;
    e.masked.ctx = e.options.ctx;
    if (r.batch > 0)
        e.masked.batch = r.batch;
}

EvalInput eval_input(const CompressionRequest& r, const LoadedModel& lm)
{
    EvalInput e;
    const auto& model = *lm.model;
    if (!r.eval_text.empty()) {
        e.ids = lm.tokenizer->encode(read_text_file(r.eval_text));
    } else {
        e.ids = r.eval_ids;
        const int64_t V = model.config().vocab_size;
        for (int32_t id : e.ids)
            if (id >= V)
                throw InputError(r.model + ": eval_ids holds id " + std::to_string(id) +
                                 ", beyond the vocabulary (V = " + std::to_string(V) + ")");
    }
    e.text_ids = static_cast<int64_t>(e.ids.size());
    if (r.eval_tokens > 0 && e.text_ids > r.eval_tokens)
        e.ids.resize(static_cast<size_t>(r.eval_tokens));
    const std::string source = r.eval_text.empty() ? "eval_ids" : r.eval_text;
    if (e.ids.size() < 2)
        throw InputError(source + ": the evaluation has " + std::to_string(e.ids.size()) +
                         " token(s); perplexity needs at least 2");
    const int64_t context = model.max_context();
    e.options.ctx = r.ctx > 0 ? r.ctx : std::min<int64_t>(128, context);
    if (e.options.ctx > context)
        throw InputError(r.model + ": ctx " + std::to_string(e.options.ctx) +
                         " is beyond the model's context (" + std::to_string(context) + ")");
    e.options.stride = r.stride > 0 ? r.stride : e.options.ctx;
    if (e.options.stride > e.options.ctx)
        throw InputError("stride " + std::to_string(e.options.stride) + " is larger than ctx " +
                         std::to_string(e.options.ctx));
    e.options.batch_windows = r.batch;
    if (model.config().is_encoder())
        masked_lm_protocol(r, lm, e);
    return e;
}

// The manifest's per-model figures (a subset of perplexity_json, as always written).
Json evaluated_json(const PerplexityResult& r)
{
    Json j = {{"ppl", r.ppl},
              {"nll_per_token", r.nll_per_token},
              {"seconds", r.seconds},
              {"tokens_per_second", r.tokens_per_second}};
    if (r.scored_bytes > 0)
        j["bits_per_byte"] = r.bits_per_byte;
    return j;
}

// What an evaluation block says of its input: the text (path, sha256) or the request's ids,
// and how many of them were evaluated when eval_tokens cut the text.
void add_evaluated_input(Json& j, const CompressionRequest& r, const EvalInput& e)
{
    if (!r.eval_text.empty()) {
        j["text"] = fs::absolute(r.eval_text).lexically_normal().string();
        j["text_sha256"] = sha256_file(r.eval_text);
    } else {
        j["ids"] = "eval_ids of the request";
    }
    if (static_cast<int64_t>(e.ids.size()) < e.text_ids)
        j["first_ids"] = e.ids.size(); // eval_tokens cut the text
}

// The manifest's evaluation block (METHODS 0), as `compress --eval-text` has always written it.
Json evaluation_json(const CompressionRequest& r, const EvalInput& e, const PerplexityResult& baseline,
                     const PerplexityResult& compressed)
{
    Json j;
    add_evaluated_input(j, r, e);
    j["tokens"] = compressed.tokens;
    if (compressed.scored_bytes > 0)
        j["scored_bytes"] = compressed.scored_bytes;
    j["ctx"] = compressed.ctx;
    j["stride"] = compressed.stride;
    j["baseline"] = evaluated_json(baseline);
    j["compressed"] = evaluated_json(compressed);
    j["delta_ln_ppl"] = std::log(compressed.ppl) - std::log(baseline.ppl); // TensorSLM eq. 12
    j["protocol"] = "METHODS.md section 0";
    return j;
}

// The manifest's evaluation block of an encoder: the same keys as evaluation_json where they
// mean the same (ppl is the pseudo-perplexity, tokens the masked positions), and kind.
Json masked_lm_evaluation_json(const CompressionRequest& r, const EvalInput& e,
                               const MaskedLmResult& baseline, const MaskedLmResult& compressed)
{
    Json j = {{"kind", "pseudo-perplexity"}};
    add_evaluated_input(j, r, e);
    j["tokens"] = compressed.masked;
    j["ctx"] = e.masked.ctx;
    const auto figures = [&](const MaskedLmResult& m) {
        return Json{{"ppl", m.pseudo_ppl},
                    {"nll_per_token", m.nll_per_token},
                    {"masked_accuracy", m.accuracy},
                    {"seconds", m.seconds}};
    };
    j["baseline"] = figures(baseline);
    j["compressed"] = figures(compressed);
    j["delta_ln_ppl"] = std::log(compressed.pseudo_ppl) - std::log(baseline.pseudo_ppl);
    j["protocol"] = masked_lm_json(compressed, e.masked)["protocol"];
    if (r.divergence)
        j["divergence"] = {{"kl_mean", compressed.kl},
                           {"tokens", compressed.masked},
                           {"note", "mean KL(original || compressed) over the masked positions of the same "
                                    "inputs (eval --reference); no top-1 agreement or per-window figures"}};
    return j;
}

// LoRA recovery's training ids (METHODS 1), never one the run is evaluated on.
Training recovery_training(const CompressionRequest& r, const LoadedModel& lm, int64_t evaluated_ids)
{
    Training t;
    t.ids = lm.tokenizer->encode(read_text_file(r.train_text));
    t.options = {.steps = r.lora_steps,
                 .lr = 1e-3,
                 .batch = 8,
                 .seqlen = std::min<int64_t>(128, lm.model->max_context()),
                 .seed = r.seed};
    const int64_t need = t.options.batch * t.options.seqlen + 1;
    if (!r.eval_text.empty() && same_file(r.train_text, r.eval_text)) {
        const int64_t total = static_cast<int64_t>(t.ids.size());
        t.first_id = std::min(evaluated_ids, total);
        if (total - t.first_id < need)
            throw InputError(r.train_text + ": is also the evaluation text, and after its " +
                             std::to_string(t.first_id) + " evaluated ids only " +
                             std::to_string(total - t.first_id) + " of its " + std::to_string(total) +
                             " ids are left for LoRA training (one batch needs " + std::to_string(need) +
                             "); lower eval_tokens or choose another training text");
        t.ids.erase(t.ids.begin(), t.ids.begin() + t.first_id);
    }
    check_train_options(t.options, static_cast<int64_t>(t.ids.size()), lm.model->max_context(), r.train_text);
    return t;
}

} // namespace

std::vector<int64_t> special_token_ids(const Tokenizer& tokenizer)
{
    std::vector<int64_t> out;
    for (int64_t id = 0; id < tokenizer.vocab_size(); ++id)
        if (tokenizer.is_special(static_cast<int32_t>(id)))
            out.push_back(id);
    return out;
}

FrequencyText read_frequency_text(const fs::path& file, const Tokenizer& tokenizer, int64_t vocab_size,
                                  double keep_ratio)
{
    FrequencyText f;
    f.path = file;
    const auto ids = tokenizer.encode(read_text_file(file));
    if (ids.empty())
        throw InputError(file.string() + ": the frequency text has no tokens");
    f.sha256 = sha256_file(file);
    // A text in another script than the vocabulary tokenizes to unknown tokens.
    if (const auto unk = tokenizer.unk_id()) {
        const auto unknown = std::count(ids.begin(), ids.end(), *unk);
        if (2 * unknown > static_cast<int64_t>(ids.size()))
            throw InputError(file.string() + ": " + std::to_string(unknown) + " of its " +
                             std::to_string(ids.size()) +
                             " tokens are the unknown token; is the text in the vocabulary's script?");
    }
    try {
        f.split = std::make_shared<FrequencySplit>(
            split_by_frequency(ids, vocab_size, keep_ratio, special_token_ids(tokenizer)));
    } catch (const InputError& e) {
        throw InputError(file.string() + ": " + e.what());
    }
    return f;
}

Json FrequencyText::json() const
{
    return {{"path", fs::absolute(path).lexically_normal().string()},
            {"sha256", sha256},
            {"tokens", split->total_tokens},
            {"distinct_seen", split->distinct_seen},
            {"keep_ratio", split->keep_ratio},
            {"common", split->common.size()},
            {"rare", split->rare.size()}};
}

const CompressionUnit& compression_unit(const MethodDescriptor& method)
{
    switch (method.part) {
    case CompressedPart::TokenEmbedding:
        return table_compression_unit();
    case CompressedPart::AttentionValues:
        return attention_values_compression_unit();
    }
    throw InputError(std::string(method.name) + ": compresses a part this build cannot run");
}

const LanguageModel& CompressionRun::compressed_model() const
{
    return compression_unit(method_descriptor(request.method)).compressed_model(*this);
}

LoadOptions request_load_options(const CompressionRequest& request)
{
    const MethodDescriptor& m = method_descriptor(request.method);
    LoadOptions load;
    if (!request.tokenizer.empty())
        load.tokenizer = request.tokenizer;
    load.need_tokenizer = !request.eval_text.empty() || m.needs_frequency_text || m.needs_calibration_text ||
                          request.lora_rank > 0 || !request.task.empty();
    return load;
}

CompressionRun run_compression(const CompressionRequest& request, const ExperimentProgressFn& progress)
{
    check_request(request);
    if (progress && !progress({"load", 0, 1, 0}))
        throw Cancelled();
    return run_compression(request, load_model(request.model, request_load_options(request)), progress);
}

namespace {

// The run's stages weighted by their estimated floating-point work, so one progress
// bar tracks the work (a cached baseline weighs nothing; LoRA training dwarfs a pca
// fit). Estimates, not measurements: the bar's pace, never a reported number.
run_steps::Stages stage_costs(const CompressionRequest& r, const MethodFit& fit, const ModelConfig& c,
                              const RunInputs& in)
{
    const double v = double(c.vocab_size), d = double(c.hidden_size);
    const double per_token = run_steps::decoder_work_per_position(c) + 2 * v * d; // + the head
    const double tokens = in.eval ? double(in.eval->ids.size()) : 0;
    const double task = in.task ? task_tokens(*in.task) : 0;
    run_steps::Stages stages{{"load", 0}};
    for (auto& stage : fit.stages_before(per_token))
        stages.push_back(std::move(stage));
    // Pseudo-perplexity reads a whole window per token (masked in turn), the reference's too.
    const double per_scored =
        in.eval && in.eval->masked_lm ? double(in.eval->masked.ctx) * per_token : per_token;
    if (in.eval)
        stages.emplace_back("eval original", baseline_cached(r, *in.eval) ? 0 : tokens * per_scored);
    if (!r.task.empty())
        stages.emplace_back("task original", task_cached(r) ? 0 : task * per_token);
    stages.emplace_back("compress", fit.fit_work(r, c));
    if (r.positions)
        stages.emplace_back("compress positions", 2 * double(c.max_positions) * d * d);
    if (const auto& t = in.training)
        stages.emplace_back("train", 3 * double(t->options.steps) * double(t->options.batch) *
                                         double(t->options.seqlen) * per_token);
    if (in.eval)
        stages.emplace_back("eval compressed",
                            (r.divergence && in.eval->masked_lm ? 2 : 1) * tokens * per_scored);
    if (r.divergence && !(in.eval && in.eval->masked_lm))
        stages.emplace_back("divergence", 2 * tokens * per_token); // both models again, window by window
    if (!r.task.empty())
        stages.emplace_back("task", task * per_token);
    double total = 0;
    for (const auto& st : stages)
        total += st.second;
    for (auto& st : stages) // a stage that runs is never invisible
        if (st.first != "load" &&
            !((st.first == "eval original" || st.first == "task original") && st.second == 0))
            st.second = std::max(st.second, 0.01 * total);
    return stages;
}

// The request against the loaded model: what its files and architecture allow.
void check_against_model(const CompressionRequest& request, const CompressionUnit& unit,
                         const LoadedModel& lm)
{
    if (request_load_options(request).need_tokenizer && !lm.tokenizer)
        throw InputError(request.model + ": " + request.method +
                         " with these inputs needs the model's tokenizer");
    const auto& config = lm.model->config();
    if (!lm.files.embedlab_manifest.empty())
        throw InputError(request.model +
                         ": is already an EmbedLab compressed model; compress the original model");
    check_request(request, config.embedding_dim(), request.model);
    if (request.positions && config.arch != Architecture::GPT2)
        throw InputError(request.model + ": positions: " + architecture_name(config.arch) +
                         " models have no learned position table");
    unit.check_model(request, lm);
}

// What every run reads before its long steps (the method's own: MethodFit), so a bad
// text fails in a second.
RunInputs read_run_inputs(const CompressionRequest& request, const LoadedModel& lm)
{
    RunInputs in;
    if (request.evaluates())
        in.eval = eval_input(request, lm);
    if (!request.task.empty())
        in.task = read_task_data(request.task, request.task_data, {.limit = request.task_limit});
    if (request.lora_rank > 0)
        in.training = recovery_training(request, lm, in.eval ? static_cast<int64_t>(in.eval->ids.size()) : 0);
    return in;
}

// The original model's figures the compressed one is read against, measured before the
// compressed part replaces the original's.
struct OriginalFigures {
    std::optional<PerplexityResult> perplexity;
    std::optional<MaskedLmResult> pseudo_perplexity; // an encoder's
    std::optional<TaskResult> task;
};

OriginalFigures measure_original(const CompressionRun& run, const RunInputs& in, const StagedProgress& bar)
{
    const auto& model = *run.model.model;
    OriginalFigures original;
    if (in.eval && in.eval->masked_lm)
        original.pseudo_perplexity =
            original_pseudo_perplexity(run.request, run.model, *in.eval, bar.stage("eval original"));
    else if (in.eval)
        original.perplexity = original_perplexity(run.request, model, in.eval->ids, in.eval->options,
                                                  bar.stage("eval original"));
    if (in.task)
        original.task =
            original_task(run.request, model, *run.model.tokenizer, *in.task, bar.stage("task original"));
    return original;
}

// The summary's fields every run has, before its figures.
void begin_summary(CompressionRun& run, const MethodDescriptor& m)
{
    const CompressionRequest& request = run.request;
    RunSummary& s = run.summary;
    s.method = m.name;
    s.host = host_name();
    s.model = request.model;
    s.eval_text = !request.eval_text.empty() ? request.eval_text : request.has_eval_ids ? "eval_ids" : "";
    s.ppl_original = s.ppl = s.delta_ln_ppl = kNaN;
}

// The whole model as stored (issue 38): a Hugging Face input of one dtype, its
// compressed part's bytes replaced as the method's export writes them.
void record_model_bytes(CompressionRun& run, const MethodFit& fit, int64_t model_params_before)
{
    RunSummary& s = run.summary;
    const double bits = run.model.files.format == ModelFormat::HuggingFace
                            ? stored_bits_per_value(run.model.files.stored_dtype)
                            : 0.0;
    if (!(bits > 0 && std::isfinite(s.bytes_before) && std::isfinite(s.bytes_after)))
        return;
    s.model_bytes_before = static_cast<double>(model_params_before) * bits / 8;
    s.model_bytes_after = fit.model_bytes_after(run, s.model_bytes_before, bits);
}

// The compressed model's divergence from the reference, window by window.
void record_divergence(CompressionRun& run, const EvalInput& eval, const LanguageModel& reference,
                       const StagedProgress& bar)
{
    const auto d = evaluate_divergence(run.compressed_model(), reference, eval.ids, eval.options,
                                       bar.stage("divergence"));
    run.evaluation["divergence"] = divergence_json(d);
    run.evaluation["divergence"]["tokens"] = d.tokens;
    RunSummary& s = run.summary;
    s.kl_mean = d.kl_mean;
    s.top1_agreement = d.top1_agreement;
    s.window_kl = d.window_kl_mean;
    s.window_top1 = d.window_top1;
}

// The compressed model's perplexity (and bits per byte, divergence) against the original's.
void evaluate_run(CompressionRun& run, const MethodFit& fit, const EvalInput& eval, PerplexityResult baseline,
                  const StagedProgress& bar)
{
    const CompressionRequest& request = run.request;
    auto compressed =
        evaluate_perplexity(run.compressed_model(), eval.ids, eval.options, bar.stage("eval compressed"));
    if (run.model.tokenizer) { // bits per byte: comparable across tokenizations (issue 60)
        add_bits_per_byte(baseline, eval.ids, *run.model.tokenizer);
        add_bits_per_byte(compressed, eval.ids, *run.model.tokenizer);
    }
    run.evaluation = evaluation_json(request, eval, baseline, compressed);
    RunSummary& s = run.summary;
    s.ppl_original = baseline.ppl;
    s.ppl = compressed.ppl;
    s.delta_ln_ppl = std::log(compressed.ppl) - std::log(baseline.ppl);
    fit.record_evaluation(run);
    s.eval_tokens = compressed.tokens;
    s.bits_per_byte = compressed.bits_per_byte;
    s.bits_per_byte_original = baseline.bits_per_byte;
    if (request.divergence)
        record_divergence(run, eval, fit.reference(run), bar);
}

// An encoder's pseudo-perplexity against the original's, and the KL on the same masked
// positions when divergence is asked (no top-1 agreement or per-window figures: NaN, empty).
void evaluate_masked_run(CompressionRun& run, const MethodFit& fit, const EvalInput& eval,
                         const MaskedLmResult& baseline, const StagedProgress& bar)
{
    const CompressionRequest& request = run.request;
    const LanguageModel* reference = request.divergence ? &fit.reference(run) : nullptr;
    const auto compressed = evaluate_masked_lm(run.compressed_model(), *run.model.tokenizer, eval.ids,
                                               eval.masked, reference, bar.stage("eval compressed"));
    run.evaluation = masked_lm_evaluation_json(request, eval, baseline, compressed);
    RunSummary& s = run.summary;
    s.ppl_original = baseline.pseudo_ppl;
    s.ppl = compressed.pseudo_ppl;
    s.delta_ln_ppl = std::log(compressed.pseudo_ppl) - std::log(baseline.pseudo_ppl);
    s.eval_tokens = compressed.masked;
    fit.record_evaluation(run);
    if (request.divergence)
        s.kl_mean = compressed.kl;
}

// The zero-shot task on the compressed model, beside the original's on the same examples.
void run_task(CompressionRun& run, const TaskData& task, const TaskResult& original,
              const StagedProgress& bar)
{
    const auto result = evaluate_task(run.compressed_model(), *run.model.tokenizer, task, bar.stage("task"));
    if (run.evaluation.is_null())
        run.evaluation = Json::object();
    run.evaluation["task"] = task_record(run.request, result, original);
    RunSummary& s = run.summary;
    s.task = run.request.task;
    s.task_accuracy = result.accuracy;
    s.task_accuracy_original = original.accuracy;
    s.task_n = result.n;
}

// Fit (the method's own steps), then the figures every run records of it.
void fit_and_record(CompressionRun& run, MethodFit& fit, const RunInputs& in, const StagedProgress& bar)
{
    const int64_t model_params_before = run.model.model->parameter_breakdown().total();
    fit.fit(run, in, bar);
    RunSummary& s = run.summary;
    s.ratio = static_cast<double>(s.params_after) / static_cast<double>(s.params_before);
    record_model_bytes(run, fit, model_params_before);
}

} // namespace

// Check, read the inputs, measure the original, fit, evaluate, record: the same steps
// for every method, its own behind its CompressionUnit (compression_unit.hpp).
CompressionRun run_compression(const CompressionRequest& request, LoadedModel loaded,
                               const ExperimentProgressFn& progress)
{
    const auto start = std::chrono::steady_clock::now();
    check_request(request);
    const MethodDescriptor& m = method_descriptor(request.method);
    const CompressionUnit& unit = compression_unit(m);
    // Loaded: the stages' weights (below) need the inputs, read first.
    if (progress && !progress({"load", 1, 1, 0.0}))
        throw Cancelled();
    CompressionRun run;
    run.request = request;
    run.model = std::move(loaded);
    check_against_model(request, unit, run.model);
    const RunInputs in = read_run_inputs(request, run.model);
    const auto fit = unit.begin(request, run.model, in);
    const StagedProgress bar(progress, stage_costs(request, *fit, run.model.model->config(), in));
    begin_summary(run, m);
    fit->prepare(run, bar);
    const OriginalFigures original = measure_original(run, in, bar);
    fit_and_record(run, *fit, in, bar);
    if (original.perplexity)
        evaluate_run(run, *fit, *in.eval, *original.perplexity, bar);
    if (original.pseudo_perplexity)
        evaluate_masked_run(run, *fit, *in.eval, *original.pseudo_perplexity, bar);
    if (in.task)
        run_task(run, *in.task, *original.task, bar);
    run.summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return run;
}

Json run_json(const CompressionRun& run)
{
    Json j = {{"format", "embedlab-run"}, {"request", request_json(run.request)}};
    j["request"].erase("eval_ids"); // the ids can be long; the evaluation block names them
    compression_unit(method_descriptor(run.request.method)).record(run, j);
    for (const auto& [key, value] : run.extra.items())
        j[key] = value;
    if (!run.recovery.is_null())
        j["finetune"] = run.recovery;
    if (!run.evaluation.is_null())
        j["evaluation"] = run.evaluation;
    j["summary"] = summary_json(run.summary);
    return j;
}

void check_export_target(const fs::path& dir, bool overwrite, const std::vector<fs::path>& inputs)
{
    if (dir.empty())
        throw InputError("the output directory name is empty");
    // Replacing removes the old directory: only an empty one or what we wrote.
    check_replaceable_directory(dir, overwrite, "replace it, or choose another directory", inputs);
}

std::vector<fs::path> request_inputs(const CompressionRequest& r)
{
    std::vector<fs::path> inputs;
    for (const std::string* p : {&r.model, &r.tokenizer, &r.freq_text, &r.coverage_data, &r.calib_text,
                                 &r.train_text, &r.eval_text, &r.task_data})
        if (!p->empty())
            inputs.emplace_back(*p);
    return inputs;
}

Json export_run(const CompressionRun& run, const fs::path& dir, const ExportOptions& options,
                const ProgressFn& progress)
{
    auto inputs = request_inputs(run.request);
    inputs.push_back(run.model.files.path);
    check_export_target(dir, options.overwrite, inputs);
    create_parent_directories(dir);
    const CompressionUnit& unit = compression_unit(method_descriptor(run.request.method));
    unit.check_export(run, dir, options);
    // Written inside our own temporary directory: a cancel stays possible until the commit.
    AtomicDirectory out(dir, options.overwrite);
    Json manifest = unit.save(run, out.path(), options, progress);
    report_progress(progress, 1, 1);
    out.commit();
    return manifest;
}

} // namespace embedlab
