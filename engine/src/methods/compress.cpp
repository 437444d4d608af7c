#include "embedlab/compress.hpp"

#include <chrono>
#include <cmath>

#include "embedlab/low_rank.hpp"
#include "embedlab/tensor_train.hpp"

namespace embedlab {

const std::vector<std::string>& compression_methods()
{
    static const std::vector<std::string> methods{"pca", "svd", "tt"};
    return methods;
}

ReconstructionMetrics measure_reconstruction(const torch::Tensor& original, const TokenEmbedding& compressed,
                                             const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const int64_t V = original.size(0), block = 4096;
    double err2 = 0, norm2 = 0, cos_sum = 0;
    ReconstructionMetrics m;
    m.worst_cosine = 2;
    for (int64_t v0 = 0; v0 < V; v0 += block) {
        const int64_t n = std::min(block, V - v0);
        const auto ids = torch::arange(v0, v0 + n, torch::kLong);
        const auto a = original.narrow(0, v0, n).to(torch::kDouble);
        const auto b = compressed.lookup(ids).to(torch::kDouble);
        err2 += (a - b).pow(2).sum().item<double>();
        norm2 += a.pow(2).sum().item<double>();
        const auto na = a.norm(2, 1), nb = b.norm(2, 1);
        auto cos = (a * b).sum(1) / (na * nb);
        // Zero rows: identical zeros are perfect, a zero against a non-zero is not.
        cos = torch::where((na == 0) & (nb == 0), torch::ones_like(cos), cos);
        cos = torch::where((na == 0) ^ (nb == 0), torch::zeros_like(cos), cos);
        cos_sum += cos.sum().item<double>();
        const auto worst = cos.argmin().item<int64_t>();
        if (const double w = cos[worst].item<double>(); w < m.worst_cosine) {
            m.worst_cosine = w;
            m.worst_row = v0 + worst;
        }
        report_progress(progress, v0 + n, V);
    }
    m.relative_frobenius = norm2 > 0 ? std::sqrt(err2 / norm2) : std::sqrt(err2);
    m.mean_cosine = V > 0 ? cos_sum / static_cast<double>(V) : 1.0;
    return m;
}

namespace {

// Fit progress takes the first 80% of the bar, reconstruction metrics the rest.
ProgressFn sub_progress(const ProgressFn& progress, int64_t from, int64_t to)
{
    if (!progress)
        return {};
    return [=](int64_t done, int64_t total) {
        return progress(from + (total > 0 ? (to - from) * done / total : 0), 100);
    };
}

} // namespace

CompressedEmbedding compress_table(const torch::Tensor& table, const CompressionSpec& spec,
                                   int64_t model_params, const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    if (table.dim() != 2)
        throw InputError("the embedding table must be a matrix");
    const int64_t V = table.size(0), d = table.size(1);
    CompressedEmbedding out;
    out.spec = spec;
    if (spec.method == "pca" || spec.method == "svd") {
        const auto kind = spec.method == "pca" ? LowRankKind::PCA : LowRankKind::SVD;
        auto fit = fit_low_rank(table, kind, spec.rank, sub_progress(progress, 0, 80));
        out.fit_seconds = fit.seconds;
        out.fit = {
            {"eigenvalues", fit.eigenvalues},
            {"explained_variance", fit.explained_variance},
            {"explained_variance_at_rank", fit.explained_variance[static_cast<size_t>(spec.rank - 1)]}};
        out.embedding = std::make_shared<LowRankTokenEmbedding>(fit);
        out.accounting = account_low_rank(kind, V, d, spec.rank, {}, model_params);
    } else if (spec.method == "tt") {
        auto fit = fit_tensor_train(table, {.shape = spec.shape, .ranks = spec.ranks, .eps = spec.eps},
                                    sub_progress(progress, 0, 80));
        out.fit_seconds = fit.seconds;
        out.spec.ranks = fit.ranks;
        out.fit = {{"ranks", fit.ranks}};
        if (fit.eps > 0)
            out.fit["mean_needed_ranks"] = fit.mean_needed_ranks;
        out.embedding = std::make_shared<TensorTrainTokenEmbedding>(fit);
        out.accounting = account_tensor_train(V, fit.shape, fit.ranks, {}, model_params);
    } else {
        std::string known;
        for (const auto& m : compression_methods())
            known += (known.empty() ? "" : ", ") + m;
        throw InputError("unknown method '" + spec.method + "' (known: " + known + ")");
    }
    out.reconstruction = measure_reconstruction(table, *out.embedding, sub_progress(progress, 80, 100));
    out.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

nlohmann::ordered_json spec_json(const CompressionSpec& spec)
{
    nlohmann::ordered_json j = {{"method", spec.method}};
    if (spec.method == "tt") {
        j["shape"] = spec.shape;
        j["ranks"] = spec.ranks;
        if (spec.eps > 0)
            j["eps"] = spec.eps;
    } else {
        j["rank"] = spec.rank;
    }
    return j;
}

namespace {
nlohmann::ordered_json energy_json(const EnergyEstimate& e)
{
    return {{"original_nu", e.original_nu},
            {"original_tau", e.original_tau},
            {"compressed_nu", e.compressed_nu},
            {"compressed_tau", e.compressed_tau},
            {"omega", e.omega}};
}
} // namespace

nlohmann::ordered_json accounting_json(const EmbeddingAccounting& a, const EnergyOptions& o)
{
    nlohmann::ordered_json j = {{"method", a.method},
                                {"vocab", a.vocab},
                                {"dim", a.dim},
                                {"params_before", a.params_before},
                                {"params_after", a.params_after},
                                {"ratio", a.ratio},
                                {"eta_emb", a.eta_emb},
                                {"model_params_before", a.model_params_before},
                                {"model_params_after", a.model_params_after},
                                {"eta", a.eta},
                                {"flops_per_token", a.flops_per_token},
                                {"flops_per_token_dense", a.flops_per_token_dense}};
    if (a.method == "tt") {
        j["shape"] = a.shape;
        j["ranks"] = a.ranks;
        j["params_per_token"] = a.params_per_token;
        j["eta_ttd"] = a.eta_ttd;
        j["energy"] = energy_json(a.energy);
        j["svd_equal_size_rank"] = a.svd_equal_size_rank;
        j["svd_equal_size_energy"] = energy_json(a.svd_equal_size_energy);
    } else {
        j["rank"] = a.rank;
        j["energy"] = energy_json(a.energy);
    }
    j["energy_model"] = {
        {"nu", o.nu}, {"tau", o.tau}, {"tokens", o.tokens}, {"source", "TensorSLM eqs. 2-5 (METHODS.md 5)"}};
    return j;
}

nlohmann::ordered_json reconstruction_json(const ReconstructionMetrics& r)
{
    return {{"relative_frobenius", r.relative_frobenius},
            {"mean_cosine", r.mean_cosine},
            {"worst_cosine", r.worst_cosine},
            {"worst_row", r.worst_row}};
}

} // namespace embedlab
