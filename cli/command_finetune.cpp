// finetune: LoRA recovery training of a compressed model (METHODS.md 1), or with
// --from-scratch the paper's lrf baseline, or for a fourier table its MLP by LM loss
// (METHODS.md 4; --fourier-row-lora: a row adapter instead); and `bench train`.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "common.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/finetune.hpp"
#include "embedlab/json_members.hpp"
#include "progress_printer.hpp"
#include "text_eval.hpp"

namespace embedlab::cli {

namespace {

namespace fs = std::filesystem;

TrainOptions train_options(const Args& args, const std::string& command)
{
    if (!args.has("--steps"))
        throw InputError(command + ": --steps N (training steps) is required");
    TrainOptions o;
    o.steps = args.get_int("--steps", 0, std::numeric_limits<int64_t>::min(), 100'000'000);
    o.lr = args.get_double("--lr", 1e-3, -1e9, 1e9);
    o.batch = args.get_int("--batch", 8, 0, 1 << 16);
    o.seqlen = args.get_int("--seqlen", 128, 0, 1 << 20);
    o.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    o.weight_decay = args.get_double("--weight-decay", 0, -1e9, 1e9);
    o.warmup = args.get_int("--warmup", 0, -1, 100'000'000);
    return o;
}

LoraOptions lora_options(const Args& args)
{
    LoraOptions o;
    o.rank = args.get_int("--rank", 32, 1, 1 << 16);
    o.alpha = args.get_double("--alpha", 64, 0, 1e9);
    if (!(o.alpha > 0))
        throw InputError("finetune: --alpha must be positive, got " + *args.get("--alpha"));
    o.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    if (const auto t = args.get("--targets")) {
        o.targets.clear();
        size_t start = 0;
        while (start <= t->size()) {
            const size_t comma = std::min(t->find(',', start), t->size());
            o.targets.insert(t->substr(start, comma - start));
            start = comma + 1;
        }
    }
    return o;
}

// Progress on stderr about ten times a run (step, loss, tokens/s); Ctrl-C cancels.
TrainProgressFn train_printer(ProgressPrinter& interrupt, bool quiet, const std::string& what)
{
    auto check = interrupt.callback();
    return [check, quiet, what](const TrainStep& s) {
        if (!check(s.step, s.steps))
            return false;
        if (s.partial) { // before the first step: say that training began
            if (!quiet && s.step == 0)
                std::fprintf(stderr, "%s: starting %lld steps\n", what.c_str(), (long long)s.steps);
            return true;
        }
        if (!quiet && (s.step == 1 || s.step == s.steps || s.step % std::max<int64_t>(1, s.steps / 10) == 0))
            std::fprintf(stderr, "%s: step %lld/%lld loss %.4f, %.0f tokens/s\n", what.c_str(),
                         (long long)s.step, (long long)s.steps, s.loss, s.tokens_per_second);
        return true;
    };
}

Json result_json(const PerplexityResult& r)
{
    return {{"ppl", r.ppl}, {"nll_per_token", r.nll_per_token}, {"tokens", r.tokens}};
}

} // namespace

int command_finetune(const std::vector<std::string>& argv)
{
    if (!peek_option(argv, "--head").empty())
        return command_finetune_classifier(argv);
    Args args(
        "finetune", argv,
        {"--train-text", "--steps", "--lr", "--batch", "--seqlen", "--seed", "--rank", "--alpha",
         "--weight-decay", "--warmup", "--targets", "--out", "--eval-text", "--ctx", "--stride"},
        {"--merge", "--from-scratch", "--fourier-row-lora", "--force", "--json", "--quiet", "--no-verify"});
    const auto dir = args.single_positional("DIR");
    if (!dir)
        throw InputError(
            "finetune: DIR (a compressed model directory from embedlab-cli compress) is required");
    const std::string train_text = args.required("--train-text", "FILE");
    const std::string out = args.required("--out", "DIR2");
    TrainOptions train = train_options(args, "finetune");
    const LoraOptions lora = lora_options(args);
    const bool quiet = args.has("--quiet"), from_scratch = args.has("--from-scratch");
    if (!fs::is_directory(*dir) || !fs::exists(fs::path(*dir) / "embedlab.json"))
        throw InputError(*dir +
                         ": is not an EmbedLab compressed model directory (no embedlab.json); make one "
                         "with embedlab-cli compress MODEL --method pca --rank K --out DIR");
    prepare_output_directory(out, args.has("--force"), input_paths(args, {*dir}));

    auto lm = load_model(*dir, load_options(args));
    print_warnings(lm.files.warnings);
    auto& model = *lm.model;
    if (model.lora())
        throw InputError(*dir + ": already has unmerged LoRA adapters; fine-tune its --merge export instead");
    if (dense_table(&model.token_embedding()))
        throw InputError(*dir + ": has a dense token table (" +
                         Json::parse(lm.files.embedlab_manifest).value("method", std::string("?")) +
                         "); finetune recovers compressed embeddings (pca, svd, tt, lle, fourier)");
    check_finetune_memory(model, train); // before any work: refuse what cannot fit
    if (std::error_code e; !quiet && fs::file_size(train_text, e) > (8u << 20)) // tokenising takes seconds
        std::fprintf(stderr, "finetune: reading %s\n", train_text.c_str());
    const auto ids = lm.tokenizer->encode(read_text_file(train_text));
    check_train_options(train, static_cast<int64_t>(ids.size()), model.max_context(), train_text);

    // The evaluation text, read now so that a bad file fails before training.
    TextEval eval;
    eval.quiet = quiet;
    if (const auto text = args.get("--eval-text")) {
        eval.text = *text;
        eval.ids = lm.tokenizer->encode(read_text_file(eval.text));
        eval.sha256 = sha256_file(eval.text);
        eval.options.ctx =
            args.get_int("--ctx", std::min<int64_t>(128, model.max_context()), 1, model.max_context());
        eval.options.stride = args.get_int("--stride", eval.options.ctx, 1, eval.options.ctx);
    }
    const std::string method = model.token_embedding().kind();
    const int64_t params_before = model.parameter_breakdown().total();
    std::optional<PerplexityResult> before;
    if (eval.enabled())
        before = eval.run(model, "eval " + method);

    // A table with weights shared by every row trains them (fourier: its MLP; PETE keeps
    // no per-token parameters); --fourier-row-lora keeps the V x r row adapter every
    // other table gets.
    const bool row_lora = args.has("--fourier-row-lora");
    const bool fourier = model.token_embedding().trainable_shared_weights().has_value();
    if (row_lora && !fourier)
        throw InputError("finetune: --fourier-row-lora applies to fourier tables, not " + method);
    const bool fourier_mlp = fourier && !row_lora && !from_scratch;
    const int64_t embedding_before = model.token_embedding().parameter_count();
    Trainable trainable =
        fourier_mlp ? prepare_fourier_mlp_recovery(model, lora) : prepare_recovery(model, lora, from_scratch);
    const std::string trained = from_scratch  ? "lrf"
                                : fourier_mlp ? method + " MLP" + (model.lora() ? " + lora" : "")
                                              : method + " + lora";
    TrainResult result;
    {
        ProgressPrinter interrupt("finetune", "steps", /*quiet=*/true);
        result =
            train_next_token(model, trainable.params, ids, train,
                             train_printer(interrupt, quiet, from_scratch ? "lrf" : "finetune"), train_text);
    }
    std::optional<PerplexityResult> after;
    if (eval.enabled())
        after = eval.run(model, "eval " + trained);
    const bool merge = args.has("--merge");
    const Json lora_json = trainable.description["lora"];
    if (merge)
        merge_lora(model);

    Json record = {{"mode", trainable.description["mode"]},
                   {"method", method},
                   {"trains", trainable.description["trains"]},
                   {"frozen", trainable.description["frozen"]},
                   {"training", training_json(result, train_text, sha256_file(train_text), ids.size())}};
    if (eval.enabled()) {
        record["evaluation"] = {{"text", fs::absolute(eval.text).lexically_normal().string()},
                                {"text_sha256", eval.sha256},
                                {"ctx", after->ctx},
                                {"stride", after->stride},
                                {"before", result_json(*before)},
                                {"after", result_json(*after)},
                                {"delta_ln_ppl", std::log(after->ppl) - std::log(before->ppl)},
                                {"protocol", "METHODS.md section 0"}};
    }
    Json manifest;
    {
        ProgressPrinter p("write " + out, "bytes", quiet);
        manifest = save_finetuned_model(
            lm, model, out, {.overwrite = args.has("--force"), .lora = lora_json, .finetune = record},
            p.callback());
    }
    Json j = {{"out", out},
              {"source", *dir},
              {"merged", merge},
              {"lora", manifest.contains("lora") ? manifest["lora"] : Json()},
              {"params", {{"before", params_before}, {"after", model.parameter_breakdown().total()}}},
              {"embedding_params",
               {{"before", embedding_before}, {"after", model.token_embedding().parameter_count()}}}};
    j.update(record);
    j["tokens_per_second"] = result.tokens_per_second;
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("%s: %s from %s, %lld steps of %lld x %lld tokens, %lld trainable parameters\n", out.c_str(),
                from_scratch ? "lrf (random factors)" : trained.c_str(), dir->c_str(), (long long)train.steps,
                (long long)train.batch, (long long)train.seqlen, (long long)result.trainable_parameters);
    std::printf("  loss %.4f -> %.4f, %.0f tokens/s (%.1f s)\n", result.loss_curve.front(),
                result.loss_curve.back(), result.tokens_per_second, result.seconds);
    if (eval.enabled())
        std::printf("  perplexity %.6f -> %.6f (delta ln PPL %+.6f) on %lld tokens, ctx %lld\n", before->ppl,
                    after->ppl, record["evaluation"]["delta_ln_ppl"].get<double>(), (long long)after->tokens,
                    (long long)after->ctx);
    std::printf("  params %lld -> %lld%s; embedding %lld -> %lld\n", (long long)params_before,
                (long long)model.parameter_breakdown().total(),
                !model.lora() && !merge ? ""
                : merge                 ? " (adapters merged)"
                                        : " (adapters stored)",
                (long long)embedding_before, (long long)model.token_embedding().parameter_count());
    return 0;
}

// bench train: tokens per second of LoRA training steps on a compressed model (a
// dense MODEL gets an in-memory pca table of rank --k first).
int bench_train(const std::vector<std::string>& argv)
{
    Args args(
        "bench train", argv,
        {"--model", "--steps", "--k", "--rank", "--alpha", "--batch", "--seqlen", "--lr", "--seed", "--text"},
        {"--json", "--quiet"});
    fs::path model_path = default_model_path();
    if (const auto m = args.get("--model")) {
        // A path, or a model name: resources/models/NAME, ../shared/models/NAME, NAME-f16 (bundled).
        std::vector<fs::path> tries{*m, resource_dir() / "models" / *m};
        if (auto shared = find_shared_data(fs::path("models") / *m); !shared.empty())
            tries.push_back(std::move(shared));
        tries.push_back(resource_dir() / "models" / (*m + "-f16"));
        model_path.clear();
        for (const auto& p : tries)
            if (fs::exists(p)) {
                model_path = p.lexically_normal();
                break;
            }
        if (model_path.empty())
            throw InputError("bench train: --model " + *m + ": no such file, and no model of that name in " +
                             (resource_dir() / "models").string() + " or ../shared/models");
    }
    TrainOptions train;
    train.steps = args.get_int("--steps", 20, 1, 100'000'000);
    train.batch = args.get_int("--batch", 8, 1, 1 << 16);
    train.seqlen = args.get_int("--seqlen", 128, 1, 1 << 20);
    train.lr = args.get_double("--lr", 1e-3, 1e-12, 1e3);
    train.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    LoraOptions lora;
    lora.rank = args.get_int("--rank", 32, 1, 1 << 16);
    lora.alpha = args.get_double("--alpha", 64, 1e-12, 1e9);
    const fs::path text = args.get("--text").value_or(default_sample_text_path().string());

    auto lm = load_model(model_path, LoadOptions{});
    auto& model = *lm.model;
    int64_t k = 0;
    if (const auto* dense = dense_table(&model.token_embedding())) {
        k = args.get_int("--k", 32, 1, model.config().hidden_size);
        CompressionSpec spec{.method = "pca", .rank = k};
        model.set_token_embedding(compress_table(*dense, spec).embedding);
    }
    const auto ids = lm.tokenizer->encode(read_text_file(text));
    const auto trainable = prepare_recovery(model, lora, false);
    TrainResult r;
    {
        ProgressPrinter interrupt("bench train", "steps", true);
        r = train_next_token(model, trainable.params, ids, train,
                             train_printer(interrupt, args.has("--quiet"), "bench train"), text.string());
    }
    Json j = {
        {"bench", "train"},     {"model", model_path.string()}, {"embedding", model.token_embedding().kind()},
        {"pca_rank", k},        {"lora_rank", lora.rank},       {"steps", train.steps},
        {"batch", train.batch}, {"seqlen", train.seqlen}};
    EMBEDLAB_JSON_MEMBERS(j, r, tokens, seconds, tokens_per_second, trainable_parameters);
    j["final_loss"] = r.loss_curve.back();
    j["threads"] = at::get_num_threads();
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("bench train: %s (%s%s), LoRA rank %lld, %lld steps of %lld x %lld tokens, %d threads\n",
                model_path.c_str(), model.token_embedding().kind().c_str(),
                k ? (" k=" + std::to_string(k)).c_str() : "", (long long)lora.rank, (long long)train.steps,
                (long long)train.batch, (long long)train.seqlen, at::get_num_threads());
    std::printf("  %.0f tokens/s (%lld tokens in %.2f s), final loss %.4f\n", r.tokens_per_second,
                (long long)r.tokens, r.seconds, r.loss_curve.back());
    return 0;
}

} // namespace embedlab::cli
