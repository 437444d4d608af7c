#include "embedlab/low_rank.hpp"

#include <chrono>

#include <armadillo>

namespace embedlab {

LowRankFit fit_low_rank(const torch::Tensor& table, LowRankKind kind, int64_t rank, const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    if (table.dim() != 2)
        throw InputError("the embedding table must be a matrix, got " + std::to_string(table.dim()) + " dimensions");
    const int64_t V = table.size(0), d = table.size(1);
    if (rank < 1 || rank > d)
        throw InputError("rank must be between 1 and d = " + std::to_string(d) + ", got " + std::to_string(rank));
    if (!torch::isfinite(table).all().item<bool>()) {
        const auto bad = (~torch::isfinite(table)).any(1).nonzero();
        throw InputError("the embedding table has non-finite values (NaN or Inf) in " +
                         std::to_string(bad.size(0)) + " row(s), first row " +
                         std::to_string(bad[0][0].item<int64_t>()));
    }
    report_progress(progress, 0, 3);

    LowRankFit fit;
    fit.kind = kind;
    fit.rank = rank;
    auto E = table.to(torch::kDouble);
    auto mu = kind == LowRankKind::PCA ? E.mean(0) : torch::zeros({d}, torch::kDouble);
    auto centred = kind == LowRankKind::PCA ? E - mu : E;
    // C = Et^T Et / V through BLAS (dgemm), d x d.
    auto C = torch::matmul(centred.t(), centred).div_(static_cast<double>(V)).contiguous();
    report_progress(progress, 1, 3);

    // C is symmetric, so its row-major buffer is also its column-major one.
    arma::mat Ca(C.data_ptr<double>(), d, d, /*copy_aux_mem=*/false, /*strict=*/true);
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
    auto U = torch::from_blob(vectors.memptr(), {d, d}, torch::kDouble).t(); // column j -> row j: U[:, j]
    std::vector<int64_t> top;
    for (int64_t j = 0; j < rank; ++j)
        top.push_back(d - 1 - j);
    auto Uk = U.index_select(1, torch::tensor(top, torch::kLong)).contiguous(); // [d, k]
    fit.Z = torch::matmul(centred, Uk).to(torch::kFloat32).contiguous();
    fit.P = Uk.t().to(torch::kFloat32).contiguous();
    fit.mu = mu.to(torch::kFloat32).contiguous();
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
    auto logits = torch::matmul(torch::matmul(hidden, P_.t()), Z_.t());
    if (kind_ == LowRankKind::PCA)
        logits += torch::matmul(hidden, mu_).unsqueeze(-1);
    return logits;
}

int64_t LowRankTokenEmbedding::parameter_count() const
{
    return Z_.numel() + P_.numel() + (kind_ == LowRankKind::PCA ? mu_.numel() : 0);
}

} // namespace embedlab
