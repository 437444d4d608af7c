// Masked-LM scoring of an encoder on a text: pseudo-perplexity and masked-token
// accuracy, and the KL to the original model on the same masked positions.
//
//   auto lm = embedlab::load_model("distilbert-mlm");
//   auto ids = lm.tokenizer->encode(text);
//   embedlab::MaskedLmOptions o;                 // every token masked in turn
//   auto r = embedlab::evaluate_masked_lm(*lm.model, *lm.tokenizer, ids, o);
//   r.pseudo_ppl, r.accuracy
//
// Protocol: the ids are cut into windows of ctx - 2 (no overlap), each framed
// [CLS] window [SEP]. mask_rate 0 (default): every position of a window is
// masked in turn, one input per position (Salazar et al.'s pseudo-log-likelihood);
// mask_rate r: round(r x n) positions of each window, drawn with the seed, all
// replaced by [MASK] in one input. Scored: -log p(original id) at each masked
// position (log-softmax in float64); pseudo_ppl = exp(mean); accuracy = share
// whose argmax is the original id.
//
// Thread safety: reentrant; progress runs on the calling thread.
#pragma once

#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct MaskedLmOptions {
    int64_t ctx = 128;    // window with [CLS] and [SEP]
    double mask_rate = 0; // 0: every token in turn; else the share masked at once
    uint64_t seed = 0;    // which positions, when mask_rate > 0
    int64_t batch = 64;   // inputs per forward pass
};

struct MaskedLmResult {
    int64_t masked = 0; // positions scored
    double pseudo_ppl = 0;
    double nll_per_token = 0;
    double accuracy = 0;
    double kl = -1; // mean KL(original || model) over the masked positions; -1 without a reference
    double seconds = 0;
};

// InputError for a model without a masked-LM head, no [MASK]/[CLS]/[SEP] in the
// tokenizer, ctx < 3 or beyond the model's positions, an empty text, mask_rate
// outside [0, 1). `reference` (the original model, same tokenizer): KL on the
// same inputs.
MaskedLmResult evaluate_masked_lm(const LanguageModel& model, const Tokenizer& tokenizer,
                                  std::span<const int32_t> ids, const MaskedLmOptions& options,
                                  const LanguageModel* reference = nullptr, const ProgressFn& progress = {});

nlohmann::ordered_json masked_lm_json(const MaskedLmResult& r, const MaskedLmOptions& options);

} // namespace embedlab
