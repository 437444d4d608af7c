// Perplexity exactly as METHODS.md section 0 defines it.
//
//   auto lm = embedlab::load_model("models/tinygpt2-f16");
//   auto ids = lm.tokenizer->encode(embedlab::read_text_file("heldout.txt"));
//   embedlab::PerplexityResult r = embedlab::evaluate_perplexity(*lm.model, ids, {.ctx = 128});
//   // r.ppl, r.nll_per_token, r.tokens, r.tokens_per_second
//
// Protocol: the whole text is tokenized once, no BOS; ids are cut into windows of
// ctx+1 tokens overlapping by one; each window predicts its last ctx tokens;
// ppl = exp(total NLL / predicted tokens). With stride < ctx, windows start every
// `stride` tokens and each scores only targets no earlier window scored.
// Windows of equal length are batched through the model together.
// Thread safety: reentrant; the progress callback runs on the calling thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct PerplexityOptions {
    int64_t ctx = 128;
    int64_t stride = 0;        // 0: equal to ctx (the default protocol)
    int64_t batch_windows = 0; // 0: about 2048 positions per batch
};

struct PerplexityResult {
    int64_t ids = 0;    // ids in the text
    int64_t tokens = 0; // predicted (scored) tokens
    int64_t windows = 0;
    double nll_per_token = 0;
    double ppl = 0;
    int64_t ctx = 0;
    int64_t stride = 0;
    int64_t batch_windows = 0;
    double seconds = 0;
    double tokens_per_second = 0; // predicted tokens per second of forward + loss
    // add_bits_per_byte's (issue 60): the bytes the scored tokens decode to, and their
    // NLL in bits per byte; 0 and NaN until it runs (ids without a tokenizer).
    int64_t scored_bytes = 0;
    double bits_per_byte = std::numeric_limits<double>::quiet_NaN();
};

class Tokenizer; // tokenizer.hpp
// Bits per byte of a result `evaluate_perplexity` computed on `ids` (issue 60): the
// scored tokens' total NLL in bits over the bytes they add to the text (the protocol
// scores ids[1..]: what decoding ids[0..] adds after ids[0]). Unlike perplexity it
// compares texts tokenized differently (another or a trimmed vocabulary). Leaves `r`
// alone for a text whose scored tokens decode to no bytes.
void add_bits_per_byte(PerplexityResult& r, std::span<const int32_t> ids, const Tokenizer& tokenizer);

// One window: ids [start, start + length) predicting targets from `first_scored`
// (index into the window's targets 0..length-2) to its end.
struct EvalWindow {
    int64_t start = 0;
    int64_t length = 0;
    int64_t first_scored = 0;
};
// The protocol's windows for n ids; throws InputError for ctx < 1, stride outside
// [1, ctx] or fewer than 2 ids.
std::vector<EvalWindow> perplexity_windows(int64_t n, int64_t ctx, int64_t stride);

PerplexityResult evaluate_perplexity(const LanguageModel& model, std::span<const int32_t> ids,
                                     const PerplexityOptions& options, const ProgressFn& progress = {});
// {tokens, nll_per_token, ppl, ctx, stride, seconds, tokens_per_second, ids, windows,
// batch_windows, protocol}: what `eval --json` and the Python module's perplexity() say.
nlohmann::ordered_json perplexity_json(const PerplexityResult& r);

// How far a (compressed) model's next-token distributions are from a reference
// model's (the original), over the same scored tokens as evaluate_perplexity:
// KL(P_reference || P_model) per token in nats (float64 accumulation), and
// whether the two argmaxes agree. Logits are computed window by window and
// never held for the whole text.
//
// The statistics are llama.cpp's (`llama-perplexity --kl-divergence`,
// tools/perplexity/perplexity.cpp kl_divergence()), with its definitions: an
// uncertainty is the standard error of a mean, sqrt((E[x^2] - E[x]^2) / (n - 1)),
// 0 for n <= 10; percentiles interpolate linearly between sorted values at
// fraction * (n - 1); the median averages the two middle values; Delta-p is
// p_model(target) - p_reference(target); docs/evaluation.md lists them all.

// Per scored position, in scoring order: what the statistics and the per-token
// damage (token_damage.hpp) are computed from.
struct ScoredPositions {
    std::vector<int32_t> input, target; // the last id read, and the id predicted
    std::vector<double> kl, nll, reference_nll;
    std::vector<uint8_t> same_top; // 1 when the two argmaxes agree
    size_t size() const { return target.size(); }
};

struct DivergenceResult {
    int64_t tokens = 0;
    int64_t windows = 0;
    double kl_mean = 0, kl_median = 0, kl_p99 = 0, kl_max = 0;
    double top1_agreement = 0; // share of scored positions whose argmax agrees ("same top p")
    double ppl = 0, reference_ppl = 0;
    double delta_ln_ppl = 0;                         // ln ppl - ln reference_ppl: mean ln(PPL(Q)/PPL(base))
    std::vector<double> window_kl_mean, window_top1; // per window, for plots
    int64_t ctx = 0, stride = 0;
    double seconds = 0;

    // llama.cpp's KL divergence statistics (kl_median, kl_p99 above are its median and 99.0%).
    double kl_mean_uncertainty = 0, kl_p999 = 0, kl_p95 = 0, kl_p90 = 0, kl_p10 = 0, kl_p5 = 0, kl_p1 = 0,
           kl_p01 = 0, kl_min = 0;
    // Token probability statistics: Delta-p = p_model(target) - p_reference(target), as a fraction.
    double delta_p_mean = 0, delta_p_mean_uncertainty = 0, delta_p_rms = 0, delta_p_rms_uncertainty = 0;
    double delta_p_max = 0, delta_p_p999 = 0, delta_p_p99 = 0, delta_p_p95 = 0, delta_p_p90 = 0,
           delta_p_p75 = 0, delta_p_median = 0, delta_p_p25 = 0, delta_p_p10 = 0, delta_p_p5 = 0,
           delta_p_p1 = 0, delta_p_p01 = 0, delta_p_min = 0;
    double top1_agreement_uncertainty = 0;
    // Perplexity statistics: PPL(Q) is `ppl`, PPL(base) `reference_ppl`.
    double ppl_uncertainty = 0, reference_ppl_uncertainty = 0;
    double ln_ppl_correlation = 0; // Cor(ln PPL(Q), ln PPL(base)); NaN below 11 positions
    double delta_ln_ppl_uncertainty = 0;
    double ppl_ratio = 0, ppl_ratio_uncertainty = 0;           // PPL(Q) / PPL(base)
    double ppl_difference = 0, ppl_difference_uncertainty = 0; // PPL(Q) - PPL(base)
    std::string protocol = "embedlab"; // or "llama.cpp" (evaluate_divergence_llamacpp)
    bool bos = false;                  // llama.cpp protocol: each chunk starts with BOS

    ScoredPositions positions;
};

// {kl_mean, kl_median, kl_p99, kl_max, top1_agreement, ..., window_kl_mean, window_top1}:
// what eval --reference and an experiment's record say about a divergence; every
// statistic above under its member's name, plus divergence_protocol.
nlohmann::ordered_json divergence_json(const DivergenceResult& d);

// InputError when the two models' vocabularies differ (naming both sizes).
DivergenceResult evaluate_divergence(const LanguageModel& model, const LanguageModel& reference,
                                     std::span<const int32_t> ids, const PerplexityOptions& options,
                                     const ProgressFn& progress = {});

// `model` against a base model's log-probabilities that `llama-perplexity
// --kl-divergence-base FILE` saved, with llama.cpp's protocol: the file's tokens
// in its chunks of n_ctx, the first token of each chunk replaced by BOS when the
// file's first token is the model's BOS (llama.cpp added one), positions n_ctx/2
// .. n_ctx-2 scored, KL over the base's log-probabilities above -16 as llama.cpp
// sums it. InputError naming the file when it is not such a file (truncated, bad
// magic, ids outside its vocabulary, not a regular file), its vocabulary differs
// from the model's or n_ctx exceeds the model's context.
DivergenceResult evaluate_divergence_llamacpp(const LanguageModel& model, const std::filesystem::path& file,
                                              const ProgressFn& progress = {});

// A text file's bytes; InputError if it cannot be read or is empty.
std::string read_text_file(const std::filesystem::path& file);
// Token ids: whitespace-separated integers, a JSON array, or a JSON object with
// an "ids" array (../shared/reference/tokens-*.json). InputError on anything else.
std::vector<int32_t> read_ids_file(const std::filesystem::path& file);

} // namespace embedlab
