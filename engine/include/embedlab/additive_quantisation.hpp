// Additive quantisation of the token table (issue 38 part 3; the LLE paper's third
// baseline): each row is the sum of M codewords, one from each of M codebooks of K
// vectors, e_v ~ sum_m A_m[c_v^m]. Codes are learned as Shu and Nakayama (2017),
// "Compressing word embeddings via deep compositional code learning": an encoder
// h = tanh(e W1 + b1) (M K / 2 wide), a = softplus(h W2 + b2) read as M rows of K,
// Gumbel-softmax one-hots y_m = softmax((log a_m + g) / tau) decoded by the codebooks,
// loss 0.5 ||sum_m y_m A_m - e||^2 averaged over a batch, Adam; then each code is the
// argmax of log a_m (no noise). The paper's setting: M = 32, K = 16 (128 bits a row).
// Trained as the official code (github.com/zomux/neuralcompressor): Adam at 1e-4, batches
// of 64, gradients clipped to global norm 0.001, and the checkpoint with the lowest loss
// on held-out rows kept (docs/methods/aq.md says where we still differ).
//
//   auto fit = embedlab::fit_additive_quantisation(table, {.codebooks = 32, .codewords = 16});
//   AdditiveQuantisedTokenEmbedding e(fit.codes, fit.codebooks);
//
// Thread safety: the fit is a pure function; an embedding is immutable after construction.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct AqOptions {
    int64_t codebooks = 32; // M
    int64_t codewords = 16; // K: a power of two, 2..256
    int64_t steps = 0;      // Adam steps; 0: the official 200 epochs, ceil(200 V / batch)
    double lr = 1e-4;       // the official code's
    int64_t batch = 64;     // rows per step, the official code's
    double clip = 0.001;    // bound on the gradients' global norm (0: none), the official code's
    int64_t holdout = 640;  // rows scored to pick the checkpoint (0: the last step's); official: 10 batches
    int64_t eval_every = 0; // steps between held-out scorings; 0: once an epoch, ceil(V / batch)
    double tau = 1.0;       // Gumbel-softmax temperature
    uint64_t seed = 0;      // initialisation, batches and noise
};

struct AqFit {
    AqOptions options;
    torch::Tensor codes;            // uint8 [V, M], each < K
    torch::Tensor codebooks;        // float32 [M, K, d]
    std::vector<double> loss_curve; // every step's batch loss
    std::vector<double> grad_norms; // every step's global gradient norm, before clipping
    int64_t steps = 0;              // as run (options.steps, or the 200 epochs it stood for)
    int64_t clipped_steps = 0;      // steps whose gradients were scaled down to options.clip
    // The held-out rows (a fixed sample, still trained on, as the official code's) and the
    // loss of their codes, 0.5 ||sum_m A_m[c_v^m] - e_v||^2 averaged, at each scored step.
    torch::Tensor holdout_ids; // int64 [holdout rows]
    std::vector<int64_t> heldout_steps;
    std::vector<double> heldout_loss_curve;
    int64_t best_step = 0; // the checkpoint returned: the curve's first minimum (steps without holdout)
    double best_heldout_loss = 0;
    double estimated_bytes = 0; // aq_training_bytes
    double seconds = 0;
};

// The training's peak memory in bytes, roughly: the encoder (d H + H M K, H = M K / 2) and
// codebooks (M K d) with gradients, Adam's two moments and the best checkpoint, the table,
// and one call's activations.
double aq_training_bytes(int64_t vocab, int64_t dim, const AqOptions& options);

// table [V, d] float32. InputError for codebooks outside 1..1024, codewords not a power
// of two in 2..256, steps, clip, holdout or eval_every negative, lr not positive, batch < 1,
// non-finite rows, or aq_training_bytes above 0.8 of the machine's memory.
// progress(step, steps) after each step and at least every 0.2 s within one (init, long
// steps, scoring, encoding); returning false throws Cancelled.
AqFit fit_additive_quantisation(const torch::Tensor& table, const AqOptions& options,
                                const ProgressFn& progress = {});

// Codes [V, M] (each < K) as stored: log2 K bits each, packed little-endian into
// ceil(M log2 K / 8) bytes a row; and back.
torch::Tensor pack_aq_codes(const torch::Tensor& codes, int64_t codewords);
torch::Tensor unpack_aq_codes(const torch::Tensor& packed, int64_t codebooks, int64_t codewords);

class AdditiveQuantisedTokenEmbedding final : public TokenEmbedding {
public:
    // codes uint8 [V, M] with every code < K, codebooks float32 [M, K, d], finite;
    // InputError naming the tensor otherwise.
    AdditiveQuantisedTokenEmbedding(torch::Tensor codes, torch::Tensor codebooks);
    int64_t vocab_size() const override { return codes_.size(0); }
    int64_t dim() const override { return codebooks_.size(2); }
    torch::Tensor lookup(const torch::Tensor& ids) const override; // the sum of each id's codewords
    // Tied head: every row rebuilt (V M d additions), then one product.
    torch::Tensor project(const torch::Tensor& hidden) const override;
    torch::Tensor rebuilt_rows() const override;
    std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const override; // onnx_export.hpp
    // The head from hidden x codewords ([m, M K]), summed per token: no rows rebuilt.
    std::string onnx_project(onnx::Graph& graph, const std::string& hidden) const override;
    int64_t parameter_count() const override; // M K d codebook values + V M codes
    std::string kind() const override { return "aq"; }
    std::vector<std::pair<std::string, torch::Tensor>>
    stored_tensors() const override; // aq.codes (packed) ...
    const torch::Tensor& codes() const { return codes_; }
    const torch::Tensor& codebooks() const { return codebooks_; }

private:
    torch::Tensor codes_, codebooks_;
};

} // namespace embedlab
