#include "embedlab/low_rank.hpp"

#include <chrono>
#include <cmath>

#include <armadillo>

#include "methods/table_checks.hpp"
#include "model/row_products.hpp"

namespace embedlab {

LowRankFit fit_low_rank(const torch::Tensor& table, LowRankKind kind, int64_t rank,
                        const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    if (table.dim() != 2)
        throw InputError("the embedding table must be a matrix, got " + std::to_string(table.dim()) +
                         " dimensions");
    const int64_t V = table.size(0), d = table.size(1);
    if (kind == LowRankKind::LRF)
        throw InputError("lrf tables are trained from random initialisation, not fitted (see lora.hpp)");
    if (rank < 1 || rank > d)
        throw InputError("rank must be between 1 and d = " + std::to_string(d) + ", got " +
                         std::to_string(rank));
    const auto E = table.to(torch::kFloat32).contiguous();
    methods::check_finite_rows(E);
    report_progress(progress, 0, 3);

    LowRankFit fit;
    fit.kind = kind;
    fit.rank = rank;
    // Row blocks in float64: memory stays at the table plus one block, never a
    // float64 or centred copy of the whole table.
    const int64_t block = 2048;
    arma::vec mu(static_cast<arma::uword>(d), arma::fill::zeros);
    if (kind == LowRankKind::PCA) {
        for (int64_t v0 = 0; v0 < V; v0 += block) {
            const int64_t n = std::min(block, V - v0);
            // Row-major [n, d] is column-major [d, n]: one column per token.
            const arma::fmat rows(E.data_ptr<float>() + v0 * d, d, n, /*copy_aux_mem=*/false,
                                  /*strict=*/true);
            mu += arma::sum(arma::conv_to<arma::mat>::from(rows), 1);
        }
        mu /= static_cast<double>(V);
    }
    // C = Et^T Et / V as a sum of symmetric rank-n updates (BLAS syrk).
    arma::mat Ca(static_cast<arma::uword>(d), static_cast<arma::uword>(d), arma::fill::zeros);
    for (int64_t v0 = 0; v0 < V; v0 += block) {
        const int64_t n = std::min(block, V - v0);
        const arma::fmat rows(E.data_ptr<float>() + v0 * d, d, n, false, true);
        arma::mat X = arma::conv_to<arma::mat>::from(rows);
        if (kind == LowRankKind::PCA)
            X.each_col() -= mu;
        Ca += X * X.t();
        report_progress(progress, 0, 3); // cancellation point between blocks
    }
    Ca /= static_cast<double>(V);
    report_progress(progress, 1, 3);

    arma::vec values;
    arma::mat vectors;
    if (!arma::eig_sym(values, vectors, Ca))
        throw InputError("the covariance eigendecomposition did not converge");
    report_progress(progress, 2, 3);

    // LAPACK returns ascending order; METHODS 1 wants descending.
    fit.eigenvalues.resize(static_cast<size_t>(d));
    double total = 0;
    for (int64_t i = 0; i < d; ++i) {
        fit.eigenvalues[static_cast<size_t>(i)] = std::max(0.0, values(static_cast<arma::uword>(d - 1 - i)));
        total += fit.eigenvalues[static_cast<size_t>(i)];
    }
    double running = 0;
    for (double v : fit.eigenvalues) {
        running += v;
        fit.explained_variance.push_back(total > 0 ? running / total : 1.0);
    }
    // Top-k eigenvectors as P [k, d] (column j of `vectors` is contiguous).
    auto P = torch::empty({rank, d}, torch::kDouble);
    for (int64_t j = 0; j < rank; ++j)
        std::copy_n(vectors.colptr(static_cast<arma::uword>(d - 1 - j)), d, P[j].data_ptr<double>());
    auto mu_t = torch::from_blob(mu.memptr(), {d}, torch::kDouble).clone();
    // Z = (E - 1 mu^T) P^T = E P^T - 1 (P mu)^T: one float32 GEMM, no centred copy.
    const auto Pf = P.to(torch::kFloat32);
    fit.Z = torch::matmul(E, Pf.t());
    if (kind == LowRankKind::PCA)
        fit.Z -= torch::matmul(P, mu_t).to(torch::kFloat32);
    fit.Z = fit.Z.contiguous();
    fit.P = Pf.contiguous();
    fit.mu = mu_t.to(torch::kFloat32).contiguous();
    fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report_progress(progress, 3, 3);
    return fit;
}

LowRankTokenEmbedding::LowRankTokenEmbedding(const LowRankFit& fit)
    : kind_(fit.kind), mu_(fit.mu), Z_(fit.Z), P_(fit.P)
{
}

torch::Tensor LowRankTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    auto rows = torch::matmul(torch::embedding(Z_, ids), P_);
    return kind_ == LowRankKind::PCA ? rows + mu_ : rows;
}

torch::Tensor LowRankTokenEmbedding::project(const torch::Tensor& hidden) const
{
    // logits = h (1 mu^T + Z P)^T = (h . mu) 1^T + (h P^T) Z^T, never forming Z P.
    auto logits = detail::times_transposed(torch::matmul(hidden, P_.t()), Z_);
    if (kind_ == LowRankKind::PCA)
        logits += torch::matmul(hidden, mu_).unsqueeze(-1);
    return logits;
}

std::optional<LowRankFactors> LowRankTokenEmbedding::low_rank_factors() const
{
    return LowRankFactors{.mu = mu_, .Z = Z_, .P = P_, .fitted = kind_ != LowRankKind::LRF};
}

std::shared_ptr<const TokenEmbedding>
LowRankTokenEmbedding::with_low_rank_factors(const LowRankFactors& f) const
{
    LowRankFit fit;
    fit.kind = kind_;
    fit.rank = f.Z.size(1);
    fit.mu = f.mu;
    fit.Z = f.Z;
    fit.P = f.P;
    return std::make_shared<LowRankTokenEmbedding>(fit);
}

int64_t LowRankTokenEmbedding::parameter_count() const
{
    return Z_.numel() + P_.numel() + (kind_ == LowRankKind::PCA ? mu_.numel() : 0);
}

} // namespace embedlab
