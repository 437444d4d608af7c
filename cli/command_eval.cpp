#include <malloc.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <utility>

#include "common.hpp"
#include "embedlab/divergence_report.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/masked_lm.hpp"
#include "embedlab/token_damage.hpp"
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

// llama.cpp's statistics block (llama-perplexity --kl-divergence), one line per group.
void print_divergence(const DivergenceResult& d, const std::string& against)
{
    const auto pc = [](double v) { return 100 * v; };
    std::printf("against %s (%lld positions, %s protocol; llama.cpp's statistics):\n", against.c_str(),
                (long long)d.tokens, d.protocol.c_str());
    std::printf("  PPL(Q) %.6f ± %.6f  PPL(base) %.6f ± %.6f  Cor(ln(PPL(Q)), ln(PPL(base))) %.2f%%\n", d.ppl,
                d.ppl_uncertainty, d.reference_ppl, d.reference_ppl_uncertainty, pc(d.ln_ppl_correlation));
    std::printf(
        "  ln(PPL(Q)/PPL(base)) %.6f ± %.6f  PPL(Q)/PPL(base) %.6f ± %.6f  PPL(Q)-PPL(base) %.6f ± %.6f\n",
        d.delta_ln_ppl, d.delta_ln_ppl_uncertainty, d.ppl_ratio, d.ppl_ratio_uncertainty, d.ppl_difference,
        d.ppl_difference_uncertainty);
    std::printf("  KLD mean %.6f ± %.6f  max %.6f  99.9%% %.6f  99%% %.6f  95%% %.6f  90%% %.6f\n", d.kl_mean,
                d.kl_mean_uncertainty, d.kl_max, d.kl_p999, d.kl_p99, d.kl_p95, d.kl_p90);
    std::printf("      median %.6f  10%% %.6f  5%% %.6f  1%% %.6f  0.1%% %.6f  min %.6f\n", d.kl_median,
                d.kl_p10, d.kl_p5, d.kl_p1, d.kl_p01, d.kl_min);
    std::printf(
        "  Δp mean %.3f ± %.3f %%  RMS %.3f ± %.3f %%  max %.3f%%  99.9%% %.3f%%  99%% %.3f%%  95%% %.3f%%\n",
        pc(d.delta_p_mean), pc(d.delta_p_mean_uncertainty), pc(d.delta_p_rms), pc(d.delta_p_rms_uncertainty),
        pc(d.delta_p_max), pc(d.delta_p_p999), pc(d.delta_p_p99), pc(d.delta_p_p95));
    std::printf(
        "      90%% %.3f%%  75%% %.3f%%  median %.3f%%  25%% %.3f%%  10%% %.3f%%  5%% %.3f%%  1%% %.3f%%  "
        "0.1%% %.3f%%  min %.3f%%\n",
        pc(d.delta_p_p90), pc(d.delta_p_p75), pc(d.delta_p_median), pc(d.delta_p_p25), pc(d.delta_p_p10),
        pc(d.delta_p_p5), pc(d.delta_p_p1), pc(d.delta_p_p01), pc(d.delta_p_min));
    std::printf("  same top p %.3f ± %.3f %%\n", pc(d.top1_agreement), pc(d.top1_agreement_uncertainty));
}

// The damage-by-frequency table of eval --reference.
void print_damage(const TokenDamage& damage)
{
    std::printf("damage by frequency (bucket: times a token is a scored target; KL as target / as input):\n");
    for (const auto& b : damage.buckets) {
        std::printf("  %-11s %6lld tokens %7lld positions  row cosine %.4f", b.label().c_str(),
                    (long long)b.tokens, (long long)b.positions, b.mean_cosine);
        if (b.positions > 0) // never predicted: only its rows are known
            std::printf("  KL %.6f / %.6f  top-1 %.4f", b.kl_as_target, b.kl_as_input, b.top1_as_target);
        std::printf("\n");
    }
}

// eval --reference-logits FILE: the file holds the tokens, chunks and context.
int eval_reference_logits(const Args& args, const std::filesystem::path& path, const std::string& file)
{
    for (const char* flag : {"--text", "--ids", "--reference", "--ctx", "--stride", "--batch", "--per-token"})
        if (args.has(flag))
            throw InputError(
                std::string("eval: --reference-logits takes its tokens, chunks and context from ") + file +
                "; drop " + flag);
    LoadOptions options = load_options(args);
    options.need_tokenizer = false;
    const auto lm = load_model(path, options);
    print_warnings(lm.files.warnings);
    DivergenceResult d;
    {
        ProgressPrinter progress("divergence", "chunks", args.has("--quiet"));
        d = evaluate_divergence_llamacpp(*lm.model, file, progress.callback());
    }
    Json j = {{"model", path.string()}, {"reference_logits", file},
              {"tokens", d.tokens},     {"windows", d.windows},
              {"ctx", d.ctx},           {"bos", d.bos},
              {"ppl", d.ppl},           {"reference_ppl", d.reference_ppl}};
    j.update(divergence_json(d));
    j["seconds"] = d.seconds;
    j["divergence_note"] = "llama-perplexity --kl-divergence against the base's saved log-probabilities: its "
                           "chunks, the second half of each scored, KL over the base's terms above e^-16";
    if (args.has("--json"))
        print_json(j);
    else
        print_divergence(d, file);
    return 0;
}
// An encoder with a masked-LM head: pseudo-perplexity (masked_lm.hpp), and the KL to
// --reference on the same masked inputs.
int eval_masked_lm(const Args& args, const LoadedModel& lm, const std::vector<int32_t>& ids,
                   const std::filesystem::path& path, const std::string& input, int64_t ctx, int64_t batch)
{
    if (args.has("--per-token") || args.has("--stride"))
        throw InputError("eval: --per-token and --stride are for decoders; " + path.string() +
                         " is an encoder");
    if (!lm.tokenizer)
        throw InputError("eval: masked-LM scoring of " + path.string() +
                         " needs its tokenizer's [CLS], [SEP] and [MASK]: give --text FILE");
    MaskedLmOptions o;
    o.ctx = ctx;
    o.mask_rate = args.get_double("--mask-rate", 0.0, 0.0, 0.99);
    o.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, INT64_MAX));
    if (batch > 0)
        o.batch = batch;
    std::optional<LoadedModel> reference;
    if (const auto ref = args.get("--reference")) {
        LoadOptions options = load_options(args);
        reference = load_model(*ref, options);
        if (reference->tokenizer && reference->tokenizer->encode(read_text_file(input)) != ids)
            throw InputError("eval: " + *ref + " tokenizes " + input + " differently; KL needs the same ids");
    }
    MaskedLmResult r;
    {
        ProgressPrinter progress("eval (masked LM)", "inputs", args.has("--quiet"));
        r = evaluate_masked_lm(*lm.model, *lm.tokenizer, ids, o, reference ? reference->model.get() : nullptr,
                               progress.callback());
    }
    Json j = {{"model", path.string()}, {"input", input}, {"tokens", ids.size()}};
    j.update(masked_lm_json(r, o));
    if (reference)
        j["reference"] = *args.get("--reference");
    j["embedding"] = lm.model->token_embedding().kind();
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("pseudo-perplexity %.6g over %lld masked positions (masked-token accuracy %.4f)\n",
                r.pseudo_ppl, static_cast<long long>(r.masked), r.accuracy);
    if (r.kl >= 0)
        std::printf("KL to the reference on the same masked positions: %.6g nats\n", r.kl);
    return 0;
}

} // namespace

int command_eval(const std::vector<std::string>& argv)
{
    Args args("eval", argv,
              {"--text", "--ids", "--ctx", "--stride", "--batch", "--tokenizer", "--reference",
               "--reference-logits", "--per-token", "--mask-rate", "--seed"},
              {"--json", "--quiet", "--no-verify", "--force"});
    if (const auto file = args.get("--reference-logits"))
        return eval_reference_logits(args, model_argument(args), *file);
    if (args.has("--per-token") && !args.has("--reference"))
        throw InputError("eval: --per-token needs --reference ORIGINAL: it compares the two tables");
    if (args.has("--text") == args.has("--ids"))
        throw InputError("eval: give exactly one of --text FILE or --ids FILE");
    const auto path = model_argument(args);
    const int64_t ctx = args.get_int("--ctx", 128, 1, 1 << 20);
    const int64_t stride = args.get_int("--stride", ctx, 1, ctx);
    const int64_t batch = args.get_int("--batch", 0, 0, 1 << 16);

    // Before any work: the per-token file is new (or --force) and none of the inputs.
    if (const auto out = args.get("--per-token"))
        check_output_file(*out, args.has("--force"), input_paths(args, {path}));
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

    if (lm.model->config().is_encoder())
        return eval_masked_lm(args, lm, ids, path, input, ctx, batch);
    if (args.has("--mask-rate") || args.has("--seed"))
        throw InputError("eval: --mask-rate and --seed are for masked-LM encoders; " + path.string() +
                         " is a decoder");
    if (ids.size() < 2) // named here: the engine does not know the file (issue 24 item 15)
        throw InputError(input + ": has " + std::to_string(ids.size()) +
                         " token(s); perplexity needs at least 2");
    PerplexityResult r;
    {
        ProgressPrinter progress("eval", "tokens", args.has("--quiet"));
        r = evaluate_perplexity(*lm.model, ids, {.ctx = ctx, .stride = stride, .batch_windows = batch},
                                progress.callback());
        if (lm.tokenizer) // bits per byte compares texts tokenized differently (issue 60)
            add_bits_per_byte(r, ids, *lm.tokenizer);
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
    std::optional<DivergenceResult> divergence;
    std::optional<TokenDamage> damage;
    if (const auto reference_path = args.get("--reference")) {
        const auto ref = load_model(*reference_path, options);
        print_warnings(ref.files.warnings);
        // The same text must give the same ids under both tokenizers.
        if (args.has("--text")) {
            const bool same_ids = ref.tokenizer->encode(read_text_file(input)) == ids;
            // The heap keeps freed blocks resident (init_runtime): the second copies of the
            // text and its ids go back before the divergence's arrays (issue 57).
            malloc_trim(0);
            if (!same_ids)
                throw InputError("eval: " + path.string() + " and the reference " + *reference_path +
                                 " tokenize " + input + " differently; divergence needs one tokenizer");
        }
        ProgressPrinter progress("divergence", "windows", args.has("--quiet"));
        // The statistics and the damage in one pass, 16 bytes per scored position (issue 57).
        auto report = evaluate_divergence_report(*lm.model, *ref.model, ids, {.ctx = ctx, .stride = stride},
                                                 progress.callback());
        const auto& d = report.divergence;
        j["reference"] = *reference_path;
        j["reference_ppl"] = d.reference_ppl;
        j.update(divergence_json(d));
        j["delta_ln_ppl"] = d.delta_ln_ppl;
        j["baseline_ppl"] = d.reference_ppl;
        j["baseline_source"] = "--reference, evaluated on the same ids";
        j["divergence_note"] =
            "KL(P_reference || P_model) in nats per scored token, float64; top-1: argmax agreement";
        damage = std::move(report.damage);
        j["damage_by_frequency"] = token_damage_buckets_json(*damage);
        j["damage_note"] =
            "buckets of how often a token is a scored target: 0 | 1 | 2-3 | 4-7 | ...; mean_cosine: "
            "compressed row against original; kl_as_target / kl_as_input: mean KL where a "
            "bucket's token is predicted / was read last";
        if (const auto out = args.get("--per-token")) {
            create_parent_directories(*out);
            write_file_atomic(*out, token_damage_csv(*damage, ref.tokenizer.get()));
            j["per_token"] = *out;
        }
        divergence = d;
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
    if (divergence) {
        print_divergence(*divergence, j["reference"].get<std::string>());
        print_damage(*damage);
    }
    std::printf("perplexity %.6f  (NLL/token %.8f over %lld tokens, ctx %lld, stride %lld)\n", r.ppl,
                r.nll_per_token, (long long)r.tokens, (long long)r.ctx, (long long)r.stride);
    if (r.scored_bytes > 0)
        std::printf("bits per byte %.6f  (over the %lld bytes the scored tokens decode to)\n",
                    r.bits_per_byte, (long long)r.scored_bytes);
    std::printf("%.0f tokens/s  (%.2f s forward, %lld windows, batches of %lld, %d threads; "
                "load %.2f s, tokenize %.2f s)\n",
                r.tokens_per_second, r.seconds, (long long)r.windows, (long long)r.batch_windows,
                at::get_num_threads(), load_seconds, tokenize_seconds);
    return 0;
}

} // namespace embedlab::cli
