#include <chrono>
#include <cmath>

#include "common.hpp"
#include "embedlab/eval.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A compressed model records the uncompressed perplexity it was evaluated
// against; on the same text and protocol, report delta ln PPL against it.
void add_recorded_baseline(Json& j, const std::string& manifest_text, const std::string& text)
{
    if (manifest_text.empty() || text.empty())
        return;
    const auto m = nlohmann::json::parse(manifest_text, nullptr, /*allow_exceptions=*/false);
    if (!m.is_object() || !m.contains("evaluation"))
        return;
    const auto& e = m["evaluation"];
    try {
        if (e.at("text_sha256") != sha256_file(text) || e.at("ctx") != j["ctx"] ||
            e.at("stride") != j["stride"])
            return;
        const double base = e.at("baseline").at("ppl").get<double>();
        j["baseline_ppl"] = base;
        j["delta_ln_ppl"] = std::log(j["ppl"].get<double>()) - std::log(base);
        j["baseline_source"] = "embedlab.json evaluation (same text sha256, ctx and stride)";
    } catch (const nlohmann::json::exception&) {
        // A manifest without a usable record simply has no baseline to show.
    }
}
} // namespace

int command_eval(const std::vector<std::string>& argv)
{
    Args args("eval", argv, {"--text", "--ids", "--ctx", "--stride", "--batch", "--tokenizer", "--reference"},
              {"--json", "--quiet", "--no-verify"});
    if (args.has("--text") == args.has("--ids"))
        throw InputError("eval: give exactly one of --text FILE or --ids FILE");
    const auto path = model_argument(args);
    const int64_t ctx = args.get_int("--ctx", 128, 1, 1 << 20);
    const int64_t stride = args.get_int("--stride", ctx, 1, ctx);
    const int64_t batch = args.get_int("--batch", 0, 0, 1 << 16);

    auto t0 = std::chrono::steady_clock::now();
    LoadOptions options = load_options(args);
    options.need_tokenizer = args.has("--text");
    auto lm = load_model(path, options);
    const double load_seconds = seconds_since(t0);
    print_warnings(lm.files.warnings);

    t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> ids;
    std::string input;
    if (auto text = args.get("--text")) {
        input = *text;
        ids = lm.tokenizer->encode(read_text_file(*text));
    } else {
        input = *args.get("--ids");
        ids = read_ids_file(input);
    }
    const double tokenize_seconds = seconds_since(t0);
    for (int32_t id : ids)
        if (id >= lm.files.config.vocab_size)
            throw InputError(input + ": token id " + std::to_string(id) +
                             " is outside the model's vocabulary of " +
                             std::to_string(lm.files.config.vocab_size));

    if (ids.size() < 2) // named here: the engine does not know the file (issue 24 item 15)
        throw InputError(input + ": has " + std::to_string(ids.size()) +
                         " token(s); perplexity needs at least 2");
    PerplexityResult r;
    {
        ProgressPrinter progress("eval", "tokens", args.has("--quiet"));
        r = evaluate_perplexity(*lm.model, ids, {.ctx = ctx, .stride = stride, .batch_windows = batch},
                                progress.callback());
    }
    Json j = {
        {"model", path.string()}, {"input", input}, {"input_kind", args.has("--text") ? "text" : "ids"}};
    j.update(perplexity_json(r));
    j["load_seconds"] = load_seconds;
    j["tokenize_seconds"] = tokenize_seconds;
    j["threads"] = at::get_num_threads();
    j["embedding"] = lm.model->token_embedding().kind();
    const auto& config = lm.model->config();
    if (!config.value_head_dims.empty()) { // FLAT-LLM: narrowed value heads (and MLPs)
        j["value_head_dims"] = config.value_head_dims;
        if (!config.mlp_widths.empty())
            j["mlp_widths"] = config.mlp_widths;
    }
    add_recorded_baseline(j, lm.files.embedlab_manifest, args.has("--text") ? input : std::string());
    if (const auto reference_path = args.get("--reference")) {
        const auto ref = load_model(*reference_path, options);
        print_warnings(ref.files.warnings);
        // The same text must give the same ids under both tokenizers.
        if (args.has("--text") && ref.tokenizer->encode(read_text_file(input)) != ids)
            throw InputError("eval: " + path.string() + " and the reference " + *reference_path +
                             " tokenize " + input + " differently; divergence needs one tokenizer");
        ProgressPrinter progress("divergence", "windows", args.has("--quiet"));
        const auto d = evaluate_divergence(*lm.model, *ref.model, ids, {.ctx = ctx, .stride = stride},
                                           progress.callback());
        j["reference"] = *reference_path;
        j["reference_ppl"] = d.reference_ppl;
        j.update(divergence_json(d));
        j["delta_ln_ppl"] = d.delta_ln_ppl;
        j["baseline_ppl"] = d.reference_ppl;
        j["baseline_source"] = "--reference, evaluated on the same ids";
        j["divergence_note"] =
            "KL(P_reference || P_model) in nats per scored token, float64; top-1: argmax agreement";
    }
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::string what = "embedding " + j["embedding"].get<std::string>();
    if (j.contains("value_head_dims"))
        what += ", flat value dims " + j["value_head_dims"].dump() +
                (j.contains("mlp_widths") ? ", mlp widths " + j["mlp_widths"].dump() : "");
    if (j.contains("delta_ln_ppl"))
        std::printf("%s: delta ln PPL %+.6f against the recorded baseline %.6f\n", what.c_str(),
                    j["delta_ln_ppl"].get<double>(), j["baseline_ppl"].get<double>());
    if (j.contains("kl_mean"))
        std::printf("against %s: KL mean %.6f nats/token (median %.6f, p99 %.6f), top-1 agreement %.4f, "
                    "delta ln PPL %+.6f\n",
                    j["reference"].get<std::string>().c_str(), j["kl_mean"].get<double>(),
                    j["kl_median"].get<double>(), j["kl_p99"].get<double>(),
                    j["top1_agreement"].get<double>(), j["delta_ln_ppl"].get<double>());
    std::printf("perplexity %.6f  (NLL/token %.8f over %lld tokens, ctx %lld, stride %lld)\n", r.ppl,
                r.nll_per_token, (long long)r.tokens, (long long)r.ctx, (long long)r.stride);
    std::printf("%.0f tokens/s  (%.2f s forward, %lld windows, batches of %lld, %d threads; "
                "load %.2f s, tokenize %.2f s)\n",
                r.tokens_per_second, r.seconds, (long long)r.windows, (long long)r.batch_windows,
                at::get_num_threads(), load_seconds, tokenize_seconds);
    return 0;
}

} // namespace embedlab::cli
