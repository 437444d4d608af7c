// Tucker embeddings: TensorSLM's Tucker baseline (METHODS.md 5, its Fig. 2b), with the
// same tensorisation as the per-token tensor train (tensor_train.hpp).
//
//   auto fit = embedlab::fit_tucker(table, {.shape = {8, 16}, .ranks = {4, 8}});
//   model.set_token_embedding(std::make_shared<embedlab::TuckerTokenEmbedding>(fit));
//
// Each row x (length d = prod I_k) is tensorised little-endian as for tt (eq. 6:
// X[i_1..i_N] = x[i_1 + i_2 I_1 + ...]), so the whole table is the order-(N+1) tensor
// V x I_1 x .. x I_N. HOSVD with the token mode kept whole: the factor U_k [I_k, r_k]
// holds the leading eigenvectors of the I_k x I_k Gram matrix of the table's mode-k
// unfolding (its left singular vectors), summed over all tokens in float64 block by
// block (never a V x V matrix); every token keeps its core
// G_v = X_v x_1 U_1^T .. x_N U_N^T (prod r_k values), and a lookup is
// X_v ~ G_v x_1 U_1 .. x_N U_N. Stored values: V prod r_k + sum I_k r_k
// (account_tucker in accounting.hpp counts them and the FLOPs).
// Thread safety: fit_tucker is reentrant; the embedding is immutable.
#pragma once

#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct TuckerOptions {
    std::vector<int64_t> shape; // I_1..I_N, product d
    std::vector<int64_t> ranks; // r_1..r_N, 1 <= r_k <= I_k
};

struct TuckerFit {
    std::vector<int64_t> shape, ranks;
    torch::Tensor core;                 // [V, r_1, .., r_N] float32: G[v, j_1..j_N]
    std::vector<torch::Tensor> factors; // U_k [I_k, r_k] float32, orthonormal columns
    // Per mode, the Gram matrix's eigenvalues in descending order (all I_k of them):
    // the squared singular values of the mode-k unfolding.
    std::vector<std::vector<double>> eigenvalues;
    double seconds = 0;
};

// table [V, d]. InputError for a bad shape or ranks (check_tucker_shape_and_ranks)
// or non-finite rows.
TuckerFit fit_tucker(const torch::Tensor& table, const TuckerOptions& options,
                     const ProgressFn& progress = {});

class TuckerTokenEmbedding final : public TokenEmbedding {
public:
    // core [V, r_1..r_N], factors U_k [I_k, r_k]; InputError naming the tensor that
    // disagrees with the shape or the others, or holds non-finite values.
    TuckerTokenEmbedding(std::vector<int64_t> shape, const torch::Tensor& core,
                         const std::vector<torch::Tensor>& factors);
    explicit TuckerTokenEmbedding(const TuckerFit& fit);

    int64_t vocab_size() const override { return vocab_; }
    int64_t dim() const override { return dim_; }
    // The looked-up tokens' cores times the factors, mode by mode.
    torch::Tensor lookup(const torch::Tensor& ids) const override;
    // Tied head in core space: hidden x_k U_k^T, then its product with every core
    // (exactly hidden E^T of the reconstructed rows; no V x d table is built).
    torch::Tensor project(const torch::Tensor& hidden) const override;
    std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const override; // onnx_export.hpp
    // The head as project() computes it, in core space (no rows rebuilt).
    std::string onnx_project(onnx::Graph& graph, const std::string& hidden) const override;
    int64_t parameter_count() const override;
    std::string kind() const override { return "tucker"; }
    std::vector<std::pair<std::string, torch::Tensor>> stored_tensors() const override; // tucker.core ...

    const std::vector<int64_t>& shape() const { return shape_; }
    const std::vector<int64_t>& ranks() const { return ranks_; }
    torch::Tensor core() const;                 // [V, r_1..r_N] (a copy)
    std::vector<torch::Tensor> factors() const; // U_k [I_k, r_k]

private:
    std::vector<int64_t> shape_, ranks_;
    // Held in the order a row-major view of a row has its modes, [V, r_N, .., r_1]
    // (little-endian: mode 1 varies fastest), flattened to [V, prod r_k].
    torch::Tensor core_;
    std::vector<torch::Tensor> factors_;
    int64_t vocab_ = 0, dim_ = 0;
};

} // namespace embedlab
