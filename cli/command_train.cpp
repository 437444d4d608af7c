// train: a small GPT-2-style model (or with --arch bert a masked-LM encoder) from
// scratch with a learned table or PETE's Fourier embedding (issue 20 item 12, issue
// 42; engine in train.hpp).
#include <cmath>
#include <limits>

#include "common.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/masked_lm.hpp"
#include "embedlab/train.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

namespace {

namespace fs = std::filesystem;

// Only an empty directory or one that EmbedLab wrote is replaced.
void prepare_train_output(const std::string& out, bool force, const std::vector<fs::path>& inputs)
{
    if (out.empty())
        throw InputError("train: --out names an empty directory");
    check_replaceable_directory(out, force, "use --force to replace it", inputs);
    create_parent_directories(out);
}

} // namespace

int command_train(const std::vector<std::string>& argv)
{
    Args args("train", argv,
              {"--config",       "--embedding",    "--train-text", "--minutes",   "--steps",
               "--out",          "--eval-text",    "--ctx",        "--seed",      "--lr",
               "--min-lr-ratio", "--warmup",       "--batch",      "--seqlen",    "--weight-decay",
               "--grad-clip",    "--hidden-ratio", "--norm-scale", "--tokenizer", "--arch",
               "--objective",    "--mask-rate"},
              {"--no-norm", "--force", "--json", "--quiet"});
    if (!args.positional().empty())
        throw InputError("train: unexpected argument '" + args.positional().front() +
                         "' (train takes only options; see embedlab-cli help)");
    const std::string config_name = args.required("--config", "tiny|small");
    const std::string embedding = args.required("--embedding", "table|fourier[:linear|geglu]");
    const std::string train_text = args.required("--train-text", "FILE");
    const std::string out = args.required("--out", "DIR");
    if (!args.has("--minutes") && !args.has("--steps"))
        throw InputError("train: --minutes M (training time) or --steps N is required");

    ScratchOptions o;
    const std::string arch = args.get("--arch").value_or("gpt2");
    o.config = scratch_config(config_name, 0, arch); // the vocabulary is the tokenizer's (below)
    o.objective = args.get("--objective").value_or("");
    const bool mlm = scratch_objective(o) == "mlm";
    if (args.has("--mask-rate") && !mlm)
        throw InputError("train: --mask-rate is for --objective mlm (--arch bert)");
    o.mask_rate = args.get_double("--mask-rate", o.mask_rate, -1e9, 1e9);
    if (arch == "bert" && !args.has("--tokenizer"))
        throw InputError("train: --arch bert needs --tokenizer DIR, a WordPiece tokenizer (vocab.txt or "
                         "tokenizer.json with [CLS], [SEP] and [MASK]); the default model's is GPT-2's");
    o.embedding = parse_scratch_embedding(embedding);
    if (args.has("--minutes")) {
        o.minutes = args.get_double("--minutes", 0, -1e12, 1e12);
        if (!(o.minutes > 0))
            throw InputError("train: --minutes must be a positive number, got " + *args.get("--minutes"));
    }
    if (args.has("--steps"))
        o.steps = args.get_int("--steps", 0, 1, 100'000'000);
    o.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    o.lr = args.get_double("--lr", o.lr, -1e9, 1e9);
    o.min_lr_ratio = args.get_double("--min-lr-ratio", o.min_lr_ratio, -1e9, 1e9);
    o.warmup = args.get_int("--warmup", o.warmup, -1, 100'000'000);
    o.batch = args.get_int("--batch", o.batch, 0, 1 << 16);
    o.seqlen = args.get_int("--seqlen", o.seqlen, 0, 1 << 20);
    o.weight_decay = args.get_double("--weight-decay", o.weight_decay, -1e9, 1e9);
    o.grad_clip = args.get_double("--grad-clip", o.grad_clip, -1e9, 1e9);
    o.hidden_ratio = args.get_double("--hidden-ratio", o.hidden_ratio, -1e9, 1e9);
    o.norm = !args.has("--no-norm");
    o.norm_scale = args.get_double("--norm-scale", o.norm_scale, -1e9, 1e9);
    const bool quiet = args.has("--quiet");
    const fs::path tokenizer_dir = args.get("--tokenizer").value_or(default_model_path().string());
    const auto eval_text = args.get("--eval-text");
    // Before any work: the output is checked (and never one of the inputs).
    prepare_train_output(out, args.has("--force"), {train_text, eval_text.value_or(""), tokenizer_dir});
    const auto tokenizer = load_tokenizer_from_directory(tokenizer_dir);
    o.config.vocab = tokenizer->vocab_size();
    auto id_or_none = [](std::optional<int32_t> id) { return id ? static_cast<int64_t>(*id) : int64_t{-1}; };
    o.special = {.cls = id_or_none(tokenizer->cls_id()),
                 .sep = id_or_none(tokenizer->sep_id()),
                 .mask = id_or_none(tokenizer->mask_id()),
                 .pad = id_or_none(tokenizer->pad_id())};

    check_scratch_memory(o); // before any work: refuse what cannot fit
    if (std::error_code e; !quiet && fs::file_size(train_text, e) > (8u << 20)) // tokenising takes seconds
        std::fprintf(stderr, "train: reading %s\n", train_text.c_str());
    const auto ids = tokenizer->encode(read_text_file(train_text));
    check_scratch_options(o, static_cast<int64_t>(ids.size()));
    std::vector<int32_t> eval_ids;
    PerplexityOptions eval_options;
    if (eval_text) {
        eval_ids = tokenizer->encode(read_text_file(*eval_text));
        eval_options.ctx = args.get_int("--ctx", std::min<int64_t>(128, o.config.positions), mlm ? 3 : 1,
                                        o.config.positions);
        if (eval_ids.size() < 2)
            throw InputError(*eval_text + ": has fewer than 2 tokens to evaluate");
    }
    ScratchResult r;
    {
        ProgressPrinter interrupt("train", "steps", /*quiet=*/true);
        auto check = interrupt.callback();
        const std::string what = config_name + " " + scratch_embedding_name(o.embedding);
        int64_t next_print = 1;
        r = train_from_scratch(o, ids, [&](const ScratchStep& s) {
            if (!check(s.step, std::max<int64_t>(s.planned_steps, s.step)))
                return false;
            if (s.partial) { // before the first step: say that training began
                if (!quiet && s.step == 0)
                    std::fprintf(stderr, "train %s: starting\n", what.c_str());
                return true;
            }
            if (!quiet && (s.step >= next_print || s.step == s.planned_steps)) {
                std::fprintf(stderr, "train %s: step %lld/%lld loss %.4f lr %.2e, %.0f tokens/s, %.0f s\n",
                             what.c_str(), (long long)s.step, (long long)s.planned_steps, s.loss, s.lr,
                             s.tokens_per_second, s.seconds);
                next_print = s.planned_steps > 0 ? s.step + std::max<int64_t>(1, s.planned_steps / 10) : 10;
            }
            return true;
        });
    }

    Json extra = {{"train_text",
                   {{"path", fs::absolute(train_text).lexically_normal().string()},
                    {"sha256", sha256_file(train_text)},
                    {"tokens", ids.size()}}},
                  {"tokenizer", fs::absolute(tokenizer_dir).lexically_normal().string()}};
    if (eval_text && mlm) { // the encoder's pseudo-perplexity, every token masked in turn
        MaskedLmOptions m{.ctx = eval_options.ctx};
        MaskedLmResult p;
        {
            ProgressPrinter printer("eval " + out, "inputs", quiet);
            p = evaluate_masked_lm(*r.model, *tokenizer, eval_ids, m, nullptr, printer.callback());
        }
        extra["evaluation"] = masked_lm_json(p, m);
        extra["evaluation"]["text"] = fs::absolute(*eval_text).lexically_normal().string();
        extra["evaluation"]["text_sha256"] = sha256_file(*eval_text);
    } else if (eval_text) {
        PerplexityResult p;
        {
            ProgressPrinter printer("eval " + out, "windows", quiet);
            p = evaluate_perplexity(*r.model, eval_ids, eval_options, printer.callback());
        }
        extra["evaluation"] = {{"text", fs::absolute(*eval_text).lexically_normal().string()},
                               {"text_sha256", sha256_file(*eval_text)},
                               {"ctx", p.ctx},
                               {"stride", p.stride},
                               {"tokens", p.tokens},
                               {"ppl", p.ppl},
                               {"nll_per_token", p.nll_per_token},
                               {"protocol", "METHODS.md section 0"}};
    }
    Json record;
    {
        ProgressPrinter p("write " + out, "bytes", quiet);
        record = save_trained_model(
            r, out, {.tokenizer_dir = tokenizer_dir, .overwrite = args.has("--force"), .extra = extra},
            p.callback());
    }
    if (args.has("--json")) {
        Json j = {{"out", out}};
        for (const auto& [key, value] : record.items())
            if (key != "loss_curve")
                j[key] = value;
        j["loss_curve"] = record["loss_curve"];
        print_json(j);
        return 0;
    }
    std::printf("%s: %s %s %s (d %lld, %lld layers, %lld heads), trained from scratch (%s), seed %llu\n",
                out.c_str(), arch.c_str(), config_name.c_str(), scratch_embedding_name(o.embedding).c_str(),
                (long long)o.config.dim, (long long)o.config.layers, (long long)o.config.heads,
                scratch_objective(o).c_str(), (unsigned long long)o.seed);
    std::printf("  parameters: embedding %lld, total %lld\n", (long long)r.embedding_parameters,
                (long long)r.total_parameters);
    std::printf(
        "  %lld steps of %lld x %lld tokens (planned %lld, stopped by %s), %.1f s, %.0f tokens/s, %lld "
        "threads\n",
        (long long)r.steps, (long long)o.batch, (long long)o.seqlen, (long long)r.planned_steps,
        r.stopped_by.c_str(), r.seconds, r.tokens_per_second, (long long)r.threads);
    std::printf("  loss %.4f -> %.4f\n", r.loss_curve.front(), r.loss_curve.back());
    if (eval_text && mlm)
        std::printf(
            "  held-out pseudo-perplexity %.4f over %lld masked positions, masked-token accuracy %.4f "
            "(%s, ctx %lld)\n",
            extra["evaluation"]["pseudo_ppl"].get<double>(),
            (long long)extra["evaluation"]["masked"].get<int64_t>(),
            extra["evaluation"]["masked_accuracy"].get<double>(), eval_text->c_str(),
            (long long)eval_options.ctx);
    else if (eval_text)
        std::printf("  held-out perplexity %.4f on %lld tokens (%s, ctx %lld)\n",
                    extra["evaluation"]["ppl"].get<double>(),
                    (long long)extra["evaluation"]["tokens"].get<int64_t>(), eval_text->c_str(),
                    (long long)eval_options.ctx);
    return 0;
}

} // namespace embedlab::cli
