#include "text_eval.hpp"

#include <cmath>
#include <limits>

#include "progress_printer.hpp"

namespace embedlab::cli {

TextEval TextEval::from_args(const Args& args, const Tokenizer* tokenizer, int64_t max_context)
{
    TextEval e;
    e.quiet = args.has("--quiet");
    const auto text = args.get("--eval-text");
    if (!text)
        return e;
    if (!tokenizer)
        throw InputError("--eval-text needs the model's tokenizer");
    e.text = *text;
    e.ids = tokenizer->encode(read_text_file(e.text));
    e.tokenizer = tokenizer;
    e.sha256 = sha256_file(e.text);
    e.options.ctx = args.get_int("--ctx", std::min<int64_t>(128, max_context), 1, max_context);
    e.options.stride = args.get_int("--stride", e.options.ctx, 1, e.options.ctx);
    e.options.batch_windows = args.get_int("--batch", 0, 0, 1 << 16);
    return e;
}

void eval_flags_into(const Args& args, int64_t max_context, CompressionRequest& request)
{
    request.divergence = args.has("--divergence"); // the request check wants an evaluation with it
    // A zero-shot task after the evaluation (tasks.hpp); the request check names a missing half.
    request.task = args.get("--task").value_or("");
    request.task_data = args.get("--task-data").value_or("");
    request.task_limit = args.get_int("--task-limit", 0, 0, std::numeric_limits<int32_t>::max());
    const auto text = args.get("--eval-text");
    if (!text) {
        if (args.has("--eval-tokens"))
            throw InputError(args.command() + ": --eval-tokens needs --eval-text (the text it cuts)");
        return;
    }
    request.eval_text = *text;
    // Only the text's first N ids (issue 61 item 5: the workbench evaluates its first 4096).
    request.eval_tokens = args.get_int("--eval-tokens", 0, 0, int64_t{1} << 40);
    request.ctx = args.get_int("--ctx", std::min<int64_t>(128, max_context), 1, max_context);
    request.stride = args.get_int("--stride", request.ctx, 1, request.ctx);
    request.batch = args.get_int("--batch", 0, 0, 1 << 16);
}

PerplexityResult TextEval::run(const LanguageModel& model, const std::string& what) const
{
    if (ids.size() < 2)
        throw InputError(text.string() + ": has " + std::to_string(ids.size()) +
                         " token(s); perplexity needs at least 2");
    ProgressPrinter progress(what, "tokens", quiet);
    auto r = evaluate_perplexity(model, ids, options, progress.callback());
    if (tokenizer)
        add_bits_per_byte(r, ids, *tokenizer);
    return r;
}

Json TextEval::json(const PerplexityResult& baseline, const PerplexityResult& compressed) const
{
    auto result = [](const PerplexityResult& r) {
        Json j{{"ppl", r.ppl},
               {"nll_per_token", r.nll_per_token},
               {"seconds", r.seconds},
               {"tokens_per_second", r.tokens_per_second}};
        if (r.scored_bytes > 0)
            j["bits_per_byte"] = r.bits_per_byte;
        return j;
    };
    return {{"text", std::filesystem::absolute(text).lexically_normal().string()},
            {"text_sha256", sha256},
            {"tokens", compressed.tokens},
            {"ctx", compressed.ctx},
            {"stride", compressed.stride},
            {"baseline", result(baseline)},
            {"compressed", result(compressed)},
            // TensorSLM eq. 12: ln of the perplexity ratio.
            {"delta_ln_ppl", std::log(compressed.ppl) - std::log(baseline.ppl)},
            {"protocol", "METHODS.md section 0"}};
}

void TextEval::print(const Json& e)
{
    if (e.contains("task")) {
        const auto& t = e["task"];
        std::printf("  %s accuracy %.4f on %lld examples (the original's %.4f; the same choice on %.4f)\n",
                    t["name"].get<std::string>().c_str(), t["accuracy"].get<double>(),
                    (long long)t["n"].get<int64_t>(), t["original"]["accuracy"].get<double>(),
                    t["choice_agreement"].get<double>());
        if (t.contains("metric") && t["metric"] != "accuracy") // cola's mcc, mrpc's and qqp's f1
            std::printf("  %s %s %.4f (the original's %.4f)\n", t["name"].get<std::string>().c_str(),
                        t["metric"].get<std::string>().c_str(), t["metric_value"].get<double>(),
                        t["original"]["metric_value"].get<double>());
        if (!e.contains("compressed"))
            return; // a task without a perplexity evaluation
    }
    const bool masked = e.value("kind", "") == "pseudo-perplexity"; // an encoder's
    std::printf("  %s %.6f -> %.6f (delta ln PPL %+.6f) on %lld %s, ctx %lld\n",
                masked ? "pseudo-perplexity" : "perplexity", e["baseline"]["ppl"].get<double>(),
                e["compressed"]["ppl"].get<double>(), e["delta_ln_ppl"].get<double>(),
                (long long)e["tokens"].get<int64_t>(), masked ? "masked positions" : "tokens",
                (long long)e["ctx"].get<int64_t>());
    if (e["compressed"].contains("bits_per_byte") && e["baseline"].contains("bits_per_byte"))
        std::printf("  bits per byte %.6f -> %.6f\n", e["baseline"]["bits_per_byte"].get<double>(),
                    e["compressed"]["bits_per_byte"].get<double>());
    if (e.contains("divergence") && masked)
        std::printf("  against the original: KL mean %.6f nats over the masked positions\n",
                    e["divergence"]["kl_mean"].get<double>());
    else if (e.contains("divergence"))
        std::printf("  against the original: KL mean %.6f nats/token (median %.6f, p99 %.6f), top-1 "
                    "agreement %.4f\n",
                    e["divergence"]["kl_mean"].get<double>(), e["divergence"]["kl_median"].get<double>(),
                    e["divergence"]["kl_p99"].get<double>(), e["divergence"]["top1_agreement"].get<double>());
}

} // namespace embedlab::cli
