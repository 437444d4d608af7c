// The sampling chains of generate: which tokens survive, and the seeded draw among them.
//
//   "llamacpp" (the default): llama.cpp's default chain (common/sampling):
//       top-k, top-p, min-p, temperature, draw
//   "hf": Hugging Face's order: temperature, top-k, top-p, min-p, draw
//
// The stages, as llama.cpp's src/llama-sampler.cpp does them, each on the candidates left:
//   top-k: the k highest logits (k <= 0: all);
//   top-p: sorted by the softmax of the current logits, the smallest prefix whose
//          cumulative probability reaches p (at least one token; p >= 1: all);
//   min-p: the tokens whose probability is at least min_p times the largest (0: off);
//   temperature: the logits divided by it; 0 keeps only the argmax (greedy);
//   draw: a softmax over the survivors and a uniform from std::mt19937_64.
// Ties are broken by the lower token id, so a chain's result does not depend on the
// sort. Temperature 0 picks the argmax in both chains: every stage keeps it.
// With logits [2, 1, 0], temperature 0.5 and top-p 0.8, token 1 has probability 0.119
// under "llamacpp" (top-p sees the untempered logits) and 0 under "hf".
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace embedlab {

struct SamplingOptions {
    double temperature = 0; // 0: greedy
    int64_t top_k = 0;      // 0: no limit
    double top_p = 1;       // 1: no limit
    uint64_t seed = 0;
    std::string sampler = "llamacpp"; // the chain's order: "llamacpp" or "hf"
    // Unset: the chain's default, 0.05 for "llamacpp" (llama.cpp's), 0 (off) for "hf".
    std::optional<double> min_p;
};

// min_p as the chain applies it (the default when unset).
double effective_min_p(const SamplingOptions& s);

// InputError for a temperature outside [0, 100], top_k < 0, top_p outside (0, 1],
// min_p outside [0, 1] or a sampler other than "llamacpp" and "hf".
void check_sampling(const SamplingOptions& s);

// The distribution after one stage: [V], the softmax of the survivors' current logits
// (0 for the tokens removed so far).
struct SamplingStage {
    std::string name; // "top_k", "top_p", "min_p", "temperature"
    std::vector<double> probabilities;
};

// Every stage of the chain in its order (a stage that is off leaves the distribution
// as it was); the last is what the draw samples from. For tests and explanations.
std::vector<SamplingStage> sampling_stages(std::span<const float> logits, const SamplingOptions& s);

// The next token: greedy at temperature 0 (no random number used), else the chain and a
// draw from `rng` (one number per draw: the same seed gives the same tokens everywhere).
int32_t sample_token(std::span<const float> logits, const SamplingOptions& s, std::mt19937_64& rng);

} // namespace embedlab
