// llama.cpp's divergence statistics (eval.hpp) from a DivergenceResult's scored
// positions; shared by evaluate_divergence and evaluate_divergence_llamacpp. And the
// one pass of two models over the protocol's windows that evaluate_divergence and
// text_divergence both read.
// Thread safety: reentrant.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "embedlab/eval.hpp"

namespace embedlab::detail {

// KL(P_q || P_p) per row of float64 log-probabilities [.., V], clamped at 0 (rounding).
inline torch::Tensor kl_rows(const torch::Tensor& logq, const torch::Tensor& logp)
{
    return (logq.exp() * (logq - logp)).sum(-1).clamp_min(0.0);
}

// A window's scored positions: both models' float64 log-probabilities [n, V], their KL
// [n], and the ids they predict [n] (int64).
using ScoredWindowFn =
    std::function<void(const EvalWindow& window, const torch::Tensor& logp, const torch::Tensor& logq,
                       const torch::Tensor& kl, const torch::Tensor& targets)>;

// Every window of perplexity_windows(ids, ctx, stride), in order, with progress per window.
void for_each_scored_window(const LanguageModel& model, const LanguageModel& reference,
                            std::span<const int32_t> ids, int64_t ctx, int64_t stride,
                            const ProgressFn& progress, const ScoredWindowFn& each);

// The running float64 sums of llama.cpp's statistics, a position at a time in scoring
// order: the same additions in the same order wherever the positions come from, so the
// same bits.
class DivergenceSums {
public:
    // Adds one scored position; returns its Delta-p, p_model(target) - p_reference(target).
    double add(double nll, double reference_nll, double kl, bool same_top);
    size_t count() const { return count_; }

private:
    friend void fill_divergence_statistics(DivergenceResult&, const DivergenceSums&, std::vector<double>&,
                                           std::vector<double>&);
    double nll_ = 0, nll2_ = 0, base_ = 0, base2_ = 0, nll_base_ = 0, kld_ = 0, kld2_ = 0, dp_ = 0, dp2_ = 0,
           dp4_ = 0;
    size_t same_ = 0, count_ = 0;
};

// Fills every statistic of `r` (tokens included) from the sums and every position's KL
// and Delta-p, in any order (sorted here, in place, for the percentiles); InputError
// when there are no positions.
void fill_divergence_statistics(DivergenceResult& r, const DivergenceSums& sums, std::vector<double>& kl,
                                std::vector<double>& delta_p);
// The same from r.positions, which it leaves as they are.
void fill_divergence_statistics(DivergenceResult& r);

} // namespace embedlab::detail
