// Additive quantisation of the token table (issue 38 part 3; the LLE paper's third
// baseline): each row is the sum of M codewords, one from each of M codebooks of K
// vectors, e_v ~ sum_m A_m[c_v^m]. Codes are learned as Shu and Nakayama (2017),
// "Compressing word embeddings via deep compositional code learning": an encoder
// h = tanh(e W1 + b1) (M K / 2 wide), a = softplus(h W2 + b2) read as M rows of K,
// Gumbel-softmax one-hots y_m = softmax((log a_m + g) / tau) decoded by the codebooks,
// loss 0.5 ||sum_m y_m A_m - e||^2 averaged over a batch, Adam; then each code is the
// argmax of log a_m (no noise). The paper's setting: M = 32, K = 16 (128 bits a row).
//
//   auto fit = embedlab::fit_additive_quantisation(table, {.codebooks = 32, .codewords = 16,
//                                                          .steps = 2000});
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
    int64_t steps = 0;      // Adam steps (required)
    double lr = 1e-3;       // the paper's 1e-4 wants many more steps
    int64_t batch = 4096;   // rows per step
    double tau = 1.0;       // Gumbel-softmax temperature
    uint64_t seed = 0;      // initialisation, batches and noise
};

struct AqFit {
    AqOptions options;
    torch::Tensor codes;            // uint8 [V, M], each < K
    torch::Tensor codebooks;        // float32 [M, K, d]
    std::vector<double> loss_curve; // every step's batch loss
    double seconds = 0;
};

// table [V, d] float32. InputError for codebooks outside 1..1024, codewords not a power
// of two in 2..256, steps < 1, lr not positive, batch < 1, or non-finite rows.
// progress(step, steps) after each step; returning false throws Cancelled.
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
    const torch::Tensor& codes() const { return codes_; }
    const torch::Tensor& codebooks() const { return codebooks_; }

private:
    torch::Tensor codes_, codebooks_;
};

} // namespace embedlab
