// pca and svd (METHODS 1): low-rank factors of the table, E ~ mu + Z P or E ~ Z P.
#include <algorithm>

#include "embedlab/low_rank.hpp"
#include "methods/table_method_support.hpp"
#include "model/manifest_layout.hpp"

namespace embedlab::table_support {

namespace {

class LowRankMethod final : public TableMethod {
public:
    explicit LowRankMethod(LowRankKind kind) : kind_(kind) {}
    std::string name() const override { return kind_ == LowRankKind::PCA ? "pca" : "svd"; }

    void fit(const torch::Tensor& table, CompressedEmbedding& out, int64_t model_params,
             const ProgressFn& progress) const override
    {
        const auto& spec = out.spec;
        auto fit = fit_low_rank(table, kind_, spec.rank, progress);
        out.fit_seconds = fit.seconds;
        out.fit = {
            {"eigenvalues", fit.eigenvalues},
            {"explained_variance", fit.explained_variance},
            {"explained_variance_at_rank", fit.explained_variance[static_cast<size_t>(spec.rank - 1)]}};
        out.embedding = std::make_shared<LowRankTokenEmbedding>(fit);
        out.accounting = account_low_rank(kind_, table.size(0), table.size(1), spec.rank, {}, model_params);
    }

    void spec_fields(const CompressionSpec& spec, nlohmann::ordered_json& j) const override
    {
        j["rank"] = spec.rank;
    }

    void accounting_fields(const EmbeddingAccounting& a, nlohmann::ordered_json& j) const override
    {
        j["rank"] = a.rank;
        j["energy"] = energy_json(a.energy);
    }

    std::string parameters(const CompressionSpec& spec) const override
    {
        return "rank " + std::to_string(spec.rank);
    }

    std::vector<std::string> fit_summary(const CompressedEmbedding& c) const override
    {
        return {"explained variance at rank " + std::to_string(c.spec.rank) + ": " +
                format_number("%.6f", c.fit.value("explained_variance_at_rank", 0.0))};
    }

    void fill_account_defaults(CompressionRequest&) const override {} // counted as given

    void fill_example(CompressionRequest& r, int64_t d) const override
    {
        if (r.rank == 0)
            r.rank = std::min<int64_t>(128, d);
    }

    EmbeddingAccounting account(const CompressionRequest& r, int64_t vocab, int64_t dim,
                                int64_t model_params) const override
    {
        return account_low_rank(kind_, vocab, dim, r.rank, {}, model_params);
    }

    std::optional<EnergyEstimate> recorded_energy(const nlohmann::json& accounting, int64_t vocab,
                                                  int64_t dim, const EnergyOptions& o) const override
    {
        const int64_t rank = detail::json_integer(accounting.at("rank"), "accounting.rank", "embedlab.json");
        return account_low_rank(kind_, vocab, dim, rank, o).energy;
    }

private:
    LowRankKind kind_;
};

} // namespace

EMBEDLAB_TABLE_METHOD_INSTANCE(pca_method, LowRankMethod, LowRankKind::PCA)

EMBEDLAB_TABLE_METHOD_INSTANCE(svd_method, LowRankMethod, LowRankKind::SVD)

// pca, svd and lrf's stored forms (request_low_rank.cpp): the factors as they are, svd
// and lrf with a zero mean; lrf, which no method fits, records its rank as pca does.
std::vector<StoredFormRebuild> low_rank_rebuilds()
{
    std::vector<StoredFormRebuild> out;
    for (const auto kind : {LowRankKind::PCA, LowRankKind::SVD, LowRankKind::LRF}) {
        const std::string form = kind == LowRankKind::PCA ? "pca" : kind == LowRankKind::SVD ? "svd" : "lrf";
        StoredFormRebuild r{.form = form};
        r.rebuild = [kind, form](const TableLayout& t, StoredTensors& f) {
            LowRankFit fit;
            fit.kind = kind;
            fit.rank = t.parameters.at("rank").get<int64_t>();
            fit.mu = kind == LowRankKind::PCA ? f.at("pca.mu") : torch::zeros({t.dim}, torch::kFloat32);
            fit.Z = f.at(form + ".Z");
            fit.P = f.at(form + ".P");
            return std::make_shared<LowRankTokenEmbedding>(fit);
        };
        if (kind == LowRankKind::LRF)
            r.spec_fields = [](const CompressionSpec& spec, nlohmann::ordered_json& j) {
                j["rank"] = spec.rank;
            };
        out.push_back(std::move(r));
    }
    return out;
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_TABLES(low_rank, .methods = {&pca_method(), &svd_method()}, .rebuilds = low_rank_rebuilds())

} // namespace embedlab::table_support

namespace embedlab {

std::vector<std::pair<std::string, torch::Tensor>> LowRankTokenEmbedding::stored_tensors() const
{
    const std::string p = kind() + ".";
    std::vector<std::pair<std::string, torch::Tensor>> out;
    if (kind_ == LowRankKind::PCA)
        out.emplace_back(p + "mu", mu_);
    out.emplace_back(p + "Z", Z_);
    out.emplace_back(p + "P", P_);
    return out;
}

} // namespace embedlab
