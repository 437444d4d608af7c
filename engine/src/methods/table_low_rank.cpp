// pca and svd (METHODS 1): low-rank factors of the table, E ~ mu + Z P or E ~ Z P.
#include <algorithm>

#include "embedlab/low_rank.hpp"
#include "methods/table_method_support.hpp"

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

private:
    LowRankKind kind_;
};

} // namespace

EMBEDLAB_TABLE_METHOD_INSTANCE(pca_method, LowRankMethod, LowRankKind::PCA)

EMBEDLAB_TABLE_METHOD_INSTANCE(svd_method, LowRankMethod, LowRankKind::SVD)

} // namespace embedlab::table_support
