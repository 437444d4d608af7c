// PCA (centred) and SVD (uncentred) low-rank token embeddings, METHODS.md 1.
//
//   auto fit = embedlab::fit_low_rank(table, embedlab::LowRankKind::PCA, 128);
//   fit.explained_variance[127];                  // share of variance kept
//   model.set_token_embedding(std::make_shared<embedlab::LowRankTokenEmbedding>(fit));
//
// The covariance is formed in float64 through BLAS and decomposed by LAPACK
// (Armadillo eig_sym). The embedding never expands to a dense V x d table: a
// lookup builds only the requested rows, the tied head runs through the factors.
// Thread safety: fit_low_rank is reentrant; the embedding is immutable.
#pragma once

#include <vector>

#include "embedlab/accounting.hpp"
#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct LowRankFit {
    LowRankKind kind = LowRankKind::PCA;
    int64_t rank = 0;
    torch::Tensor mu; // [d] (PCA; zeros for SVD, not stored)
    torch::Tensor Z;  // [V, k] float32
    torch::Tensor P;  // [k, d] float32
    // Eigenvalues of C (PCA: centred covariance / V; SVD: E^T E / V), descending, length d.
    std::vector<double> eigenvalues;
    std::vector<double> explained_variance; // cumulative share at k = 1..d
    double seconds = 0;
};

// table [V, d]; rank 1..d; kind PCA or SVD. Throws InputError for a bad rank or
// kind, or non-finite rows.
LowRankFit fit_low_rank(const torch::Tensor& table, LowRankKind kind, int64_t rank,
                        const ProgressFn& progress = {});

class LowRankTokenEmbedding final : public TokenEmbedding {
public:
    explicit LowRankTokenEmbedding(const LowRankFit& fit);
    int64_t vocab_size() const override { return Z_.size(0); }
    int64_t dim() const override { return P_.size(1); }
    torch::Tensor lookup(const torch::Tensor& ids) const override;     // mu + Z[ids] P
    torch::Tensor project(const torch::Tensor& hidden) const override; // h mu^T + (h P^T) Z^T
    std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const override; // onnx_export.hpp
    std::string onnx_project(onnx::Graph& graph, const std::string& hidden) const override;
    int64_t parameter_count() const override;
    std::string kind() const override
    {
        return kind_ == LowRankKind::PCA ? "pca" : kind_ == LowRankKind::SVD ? "svd" : "lrf";
    }
    std::vector<std::pair<std::string, torch::Tensor>>
    stored_tensors() const override;                                 // <kind>.Z, .P (pca: .mu)
    std::optional<LowRankFactors> low_rank_factors() const override; // fitted unless lrf
    // The same kind (pca, svd, lrf) over `factors`.
    std::shared_ptr<const TokenEmbedding> with_low_rank_factors(const LowRankFactors& factors) const override;

    LowRankKind low_rank_kind() const { return kind_; }
    const torch::Tensor& mu() const { return mu_; } // [d]; zeros for SVD
    const torch::Tensor& Z() const { return Z_; }   // [V, k]
    const torch::Tensor& P() const { return P_; }   // [k, d]

private:
    LowRankKind kind_;
    torch::Tensor mu_, Z_, P_;
};

} // namespace embedlab
