// Text generation with a KV cache, greedy or sampled, optionally beside a
// reference model (the original) that reads the same tokens.
//
//   auto lm = embedlab::load_model("models/tinyllama");
//   auto prompt = lm.tokenizer->encode("Once upon a time");
//   embedlab::Generation g = embedlab::generate(*lm.model, lm.tokenizer.get(), prompt,
//                                               {.max_tokens = 32}, [](const auto& t) {
//                                                   std::fputs(t.text.c_str(), stdout);
//                                                   return true; // false cancels
//                                               });
//
// Greedy decoding (temperature 0) takes the argmax; sampling runs SamplingOptions'
// chain (sampler.hpp: llama.cpp's top-k, top-p, min-p, temperature by default, or
// Hugging Face's temperature first) and draws with a std::mt19937_64 seeded by `seed`:
// the same seed gives the same tokens on every machine.
// With a reference model, each step also reads the same prefix through the reference
// (its own KV cache): KL(P_reference || P_model) of the next-token distributions,
// and the rank of the chosen token under the reference.
// Thread safety: reentrant; the callback runs on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/model.hpp"
#include "embedlab/sampler.hpp"

namespace embedlab {

struct GenerationOptions {
    int64_t max_tokens = 64;
    SamplingOptions sampling;
    std::vector<std::string> stop; // stop when the continuation contains one (cut before it)
    bool stop_at_eos = true;       // the tokenizer's end-of-sequence token ends the text (off: --ignore-eos)
    int64_t top_n = 5;             // alternatives recorded per step (both models)
};

// A candidate token and its probability (untempered softmax).
struct TokenProbability {
    int32_t id = 0;
    double probability = 0;
};

struct GeneratedToken {
    int32_t id = 0;
    std::string piece;  // the vocabulary's text of `id` (tokenizer.token_text)
    std::string text;   // the continuation's new characters (may be empty mid-UTF-8)
    double logprob = 0; // ln P_model(id | prefix), untempered
    std::vector<TokenProbability> top;
    // With a reference model (NaN / -1 / empty without):
    double kl = std::numeric_limits<double>::quiet_NaN(); // KL(P_reference || P_model), nats
    int64_t reference_rank = -1; // how many tokens the reference prefers to `id` (0: its top)
    std::vector<TokenProbability> reference_top;
};

struct Generation {
    std::vector<int32_t> prompt;
    std::vector<GeneratedToken> tokens;
    std::string text;        // the continuation, decoded (empty without a tokenizer)
    std::string stop_reason; // "max_tokens", "eos", "stop", "context"
    double prompt_seconds = 0, generate_seconds = 0;
    double prompt_tokens_per_second = 0, tokens_per_second = 0;
};

// Called after each generated token; returning false cancels (generate then throws Cancelled).
using TokenFn = std::function<bool(const GeneratedToken&)>;

// InputError for an empty prompt, ids outside the vocabulary, a prompt longer than
// the model's context, options out of range, or a reference of another vocabulary.
// `tokenizer` may be null (no text, no stop strings, no end-of-sequence stop).
Generation generate(const LanguageModel& model, const Tokenizer* tokenizer, std::span<const int32_t> prompt,
                    const GenerationOptions& options, const TokenFn& on_token = {},
                    const LanguageModel* reference = nullptr);

// A prompt's ids as generation reads them: BOS first when `bos` is asked and the
// tokenizer has a BOS of its own (llama's <s>; not GPT-2's <|endoftext|>, which is also
// its end of text), as Hugging Face tokenizers add it; then the text, tokenized.
std::vector<int32_t> prompt_ids(const Tokenizer& tokenizer, std::string_view text, bool bos = true);

// {id, piece, text, logprob, top: [{id, p}], and with a reference kl, reference_rank, reference_top}.
nlohmann::ordered_json generated_token_json(const GeneratedToken& t);

// {prompt_ids, ids, text, stop_reason, tokens: [{id, text, logprob, top, kl, reference_rank, ...}],
// timings}: what `generate --json` and the Python module say.
nlohmann::ordered_json generation_json(const Generation& g);

} // namespace embedlab
