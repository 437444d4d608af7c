// llama.cpp's divergence statistics (eval.hpp) from a DivergenceResult's scored
// positions; shared by evaluate_divergence and evaluate_divergence_llamacpp. And the
// one pass of two models over the protocol's windows that evaluate_divergence and
// text_divergence both read.
// Thread safety: reentrant.
#pragma once

#include <functional>
#include <span>

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

// Fills every statistic of `r` from r.positions (tokens included); InputError
// when there are no positions.
void fill_divergence_statistics(DivergenceResult& r);

} // namespace embedlab::detail
