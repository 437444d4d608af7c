// KL divergence and top-1 agreement of a model against a reference model, over
// the perplexity protocol's windows (METHODS.md 0).
#include <chrono>
#include <cmath>
#include <utility>

#include "embedlab/divergence_report.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/json_members.hpp"
#include "embedlab/non_finite.hpp"
#include "eval/divergence_statistics.hpp"
#include "eval/token_damage_passes.hpp"
#include "eval/token_windows.hpp"

namespace embedlab {

namespace {

// A contiguous 1-d tensor's values at the end of `to`.
template <class T> void append(std::vector<T>& to, const torch::Tensor& t)
{
    const T* p = t.data_ptr<T>();
    to.insert(to.end(), p, p + t.numel());
}

} // namespace

void detail::for_each_scored_window(const LanguageModel& model, const LanguageModel& reference,
                                    std::span<const int32_t> ids, int64_t ctx, int64_t stride,
                                    const ProgressFn& progress, const ScoredWindowFn& each)
{
    const auto windows = perplexity_windows(static_cast<int64_t>(ids.size()), ctx, stride);
    const auto ids32 = int32_ids(ids); // widened per window (token_windows.hpp)
    report_progress(progress, 0, static_cast<int64_t>(windows.size()));
    for (size_t i = 0; i < windows.size(); ++i) {
        const auto& w = windows[i];
        const int64_t T = w.length - 1, first = w.first_scored, n = T - first;
        const auto input = window_ids(ids32, w.start, T).unsqueeze(0);
        // Scored positions only, in float64: KL sums V terms per token.
        const auto logp =
            torch::log_softmax(model.logits(input)[0].narrow(0, first, n).to(torch::kDouble), -1);
        const auto logq =
            torch::log_softmax(reference.logits(input)[0].narrow(0, first, n).to(torch::kDouble), -1);
        const std::string where = "non-finite logits in window " + std::to_string(i + 1);
        require_finite(logp, "the model", where, "no divergence is reported");
        require_finite(logq, "the reference model", where, "no divergence is reported");
        each(w, logp, logq, kl_rows(logq, logp).contiguous(), window_ids(ids32, w.start + 1 + first, n));
        report_progress(progress, static_cast<int64_t>(i + 1), static_cast<int64_t>(windows.size()));
    }
}

namespace {

// The protocol's context and stride for the two models; InputError when the
// vocabularies differ or ctx exceeds either model's context.
std::pair<int64_t, int64_t> checked_ctx_stride(const LanguageModel& model, const LanguageModel& reference,
                                               const PerplexityOptions& options)
{
    const int64_t V = model.config().vocab_size;
    if (reference.config().vocab_size != V)
        throw InputError("the reference model has a vocabulary of " +
                         std::to_string(reference.config().vocab_size) + " tokens and the model " +
                         std::to_string(V) + "; divergence needs the same tokenizer and vocabulary");
    const int64_t ctx = options.ctx, stride = options.stride > 0 ? options.stride : ctx;
    for (const LanguageModel* m : {&model, &reference})
        if (ctx > m->max_context())
            throw InputError("--ctx " + std::to_string(ctx) + " exceeds the " +
                             std::to_string(m->max_context()) + "-token context it was trained for");
    return {ctx, stride};
}

// Target ids' negative log-probabilities [n] from log-probabilities [n, V].
torch::Tensor target_nll(const torch::Tensor& logp, const torch::Tensor& targets)
{
    return -logp.gather(1, targets.unsqueeze(1)).squeeze(1).contiguous();
}

} // namespace

DivergenceResult evaluate_divergence(const LanguageModel& model, const LanguageModel& reference,
                                     std::span<const int32_t> ids, const PerplexityOptions& options,
                                     const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    const auto [ctx, stride] = checked_ctx_stride(model, reference, options);
    DivergenceResult r;
    auto& s = r.positions;
    detail::for_each_scored_window(
        model, reference, ids, ctx, stride, progress,
        [&](const EvalWindow& w, const torch::Tensor& logp, const torch::Tensor& logq,
            const torch::Tensor& kl, const torch::Tensor& targets) {
            const int64_t n = targets.size(0);
            const auto same = logp.argmax(-1).eq(logq.argmax(-1)).to(torch::kUInt8).contiguous();
            append(s.kl, kl);
            append(s.nll, target_nll(logp, targets));
            append(s.reference_nll, target_nll(logq, targets));
            append(s.same_top, same);
            const auto* t = ids.data() + w.start + w.first_scored;
            s.input.insert(s.input.end(), t, t + n);
            s.target.insert(s.target.end(), t + 1, t + 1 + n);
            r.window_kl_mean.push_back(kl.mean().item<double>());
            r.window_top1.push_back(same.to(torch::kDouble).mean().item<double>());
            ++r.windows;
        });
    detail::fill_divergence_statistics(r);
    r.ctx = ctx;
    r.stride = stride;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

DivergenceReport evaluate_divergence_report(const LanguageModel& model, const LanguageModel& reference,
                                            std::span<const int32_t> ids, const PerplexityOptions& options,
                                            const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    const auto [ctx, stride] = checked_ctx_stride(model, reference, options);
    const int64_t V = model.config().vocab_size;
    // Position p of a window reads ids[w.start + w.first_scored + p] and predicts the next id.
    const auto windows = perplexity_windows(static_cast<int64_t>(ids.size()), ctx, stride);
    size_t positions = 0;
    for (const auto& w : windows)
        positions += static_cast<size_t>(w.length - 1 - w.first_scored);
    DivergenceReport report;
    DivergenceResult& r = report.divergence;
    detail::DivergenceSums sums;
    std::vector<double> kl_values, delta_p;
    kl_values.reserve(positions); // exact: no outgrown blocks left in the heap
    delta_p.reserve(positions);
    std::vector<int64_t> same_as_target(static_cast<size_t>(V), 0);
    detail::for_each_scored_window(
        model, reference, ids, ctx, stride, progress,
        [&](const EvalWindow& w, const torch::Tensor& logp, const torch::Tensor& logq,
            const torch::Tensor& kl, const torch::Tensor& targets) {
            const int64_t n = targets.size(0);
            const auto same = logp.argmax(-1).eq(logq.argmax(-1)).to(torch::kUInt8).contiguous();
            const auto nll = target_nll(logp, targets), reference_nll = target_nll(logq, targets);
            const double *k = kl.data_ptr<double>(), *p = nll.data_ptr<double>(),
                         *q = reference_nll.data_ptr<double>();
            const uint8_t* agree = same.data_ptr<uint8_t>();
            const int32_t* target = ids.data() + w.start + w.first_scored + 1;
            for (int64_t j = 0; j < n; ++j) {
                kl_values.push_back(k[j]);
                delta_p.push_back(sums.add(p[j], q[j], k[j], agree[j] != 0));
                if (agree[j] && target[j] >= 0 && target[j] < V)
                    ++same_as_target[static_cast<size_t>(target[j])];
            }
            r.window_kl_mean.push_back(kl.mean().item<double>());
            r.window_top1.push_back(same.to(torch::kDouble).mean().item<double>());
            ++r.windows;
        });
    report.damage = detail::token_damage_over(
        model, reference, positions,
        [&](const detail::DamagePositionFn& each) {
            size_t i = 0;
            for (const auto& w : windows) {
                const int32_t* input = ids.data() + w.start + w.first_scored;
                for (int64_t j = 0, n = w.length - 1 - w.first_scored; j < n; ++j)
                    each(input[j], input[j + 1], kl_values[i++]);
            }
        },
        same_as_target);
    detail::fill_divergence_statistics(r, sums, kl_values, delta_p); // sorts both
    r.ctx = ctx;
    r.stride = stride;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return report;
}

nlohmann::ordered_json divergence_json(const DivergenceResult& d)
{
    nlohmann::ordered_json j;
    EMBEDLAB_JSON_MEMBERS(
        j, d, kl_mean, kl_mean_uncertainty, kl_max, kl_p999, kl_p99, kl_p95, kl_p90, kl_median, kl_p10, kl_p5,
        kl_p1, kl_p01, kl_min, top1_agreement, top1_agreement_uncertainty, delta_p_mean,
        delta_p_mean_uncertainty, delta_p_rms, delta_p_rms_uncertainty, delta_p_max, delta_p_p999,
        delta_p_p99, delta_p_p95, delta_p_p90, delta_p_p75, delta_p_median, delta_p_p25, delta_p_p10,
        delta_p_p5, delta_p_p1, delta_p_p01, delta_p_min, ppl_uncertainty, reference_ppl_uncertainty,
        ln_ppl_correlation, delta_ln_ppl, delta_ln_ppl_uncertainty, ppl_ratio, ppl_ratio_uncertainty,
        ppl_difference, ppl_difference_uncertainty, window_kl_mean, window_top1);
    j["divergence_protocol"] = d.protocol;
    return j;
}

} // namespace embedlab
