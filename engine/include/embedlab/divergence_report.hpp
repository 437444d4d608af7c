// eval --reference's report: llama.cpp's divergence statistics (evaluate_divergence)
// and the per-token damage (token_damage) in one pass, holding 16 bytes per scored
// position (its KL and Delta-p, float64, which the percentiles need exactly) instead
// of every position's ids, NLLs and agreement (issue 57: 75 bytes per input byte).
// The numbers are those of evaluate_divergence then token_damage, bit for bit.
//
//   auto report = embedlab::evaluate_divergence_report(*compressed.model, *original.model, ids, {.ctx =
//   128});
//   // report.divergence.kl_p99, ...: its positions are left empty
//   // report.damage.buckets: damage by frequency
//
// Thread safety: reentrant; the progress callback runs on the calling thread.
#pragma once

#include <cstdint>
#include <span>

#include "embedlab/eval.hpp"
#include "embedlab/token_damage.hpp"

namespace embedlab {

struct DivergenceReport {
    DivergenceResult divergence; // every statistic; positions empty
    TokenDamage damage;
};

// InputError as evaluate_divergence and token_damage.
DivergenceReport evaluate_divergence_report(const LanguageModel& model, const LanguageModel& reference,
                                            std::span<const int32_t> ids, const PerplexityOptions& options,
                                            const ProgressFn& progress = {});

} // namespace embedlab
