// Which tokens of a text a (compressed) model predicts worst: per token,
// KL(P_reference || P_model) of the prediction that reads it, and both models'
// top-N there. The workbench's Compare tab colours a text by it.
//
//   auto ids = original.tokenizer->encode(text);
//   auto d = embedlab::text_divergence(*compressed.model, *original.model, original.tokenizer.get(), ids);
//   // d.kl[i]: position i's prediction (NaN for the first id: nothing predicts it)
//   // d.worst: positions by KL, largest first
//
// Windows are evaluate_perplexity's (ctx tokens predicted per window, no overlap
// beyond one id), so the KLs are the ones evaluate_divergence averages.
// Thread safety: reentrant; the progress callback runs on the calling thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/generate.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct TextDivergenceOptions {
    int64_t ctx = 128;
    int64_t top_n = 5;  // alternatives per position, both models
    int64_t worst = 20; // positions listed in `worst`
};

struct TextDivergence {
    std::vector<int32_t> ids;
    // The text each id adds (decoded after its predecessor, so a leading space stays;
    // empty without a tokenizer).
    std::vector<std::string> text;
    std::vector<double> kl;                                        // per id, nats; NaN for ids[0]
    std::vector<std::vector<TokenProbability>> top, reference_top; // per id; empty for ids[0]
    std::vector<int64_t> worst;                                    // positions, largest KL first
};

// InputError when the vocabularies differ, ctx exceeds a model's context or there
// are fewer than 2 ids; Cancelled when progress returns false.
TextDivergence text_divergence(const LanguageModel& model, const LanguageModel& reference,
                               const Tokenizer* tokenizer, std::span<const int32_t> ids,
                               const TextDivergenceOptions& options = {}, const ProgressFn& progress = {});

} // namespace embedlab
