// tucker (METHODS 5's baseline): HOSVD of the tensorised table, factors shared by
// every token and one core per token.
#include <algorithm>

#include "embedlab/json_members.hpp"
#include "embedlab/text_format.hpp"
#include "embedlab/tucker.hpp"
#include "methods/table_method_support.hpp"

namespace embedlab::table_support {

namespace {

class TuckerMethod final : public TableMethod {
public:
    std::string name() const override { return "tucker"; }
    double fit_work(const CompressionRequest& r, double v, double d) const override
    {
        double s = 0; // the modes' Gram matrices, then each token's core
        for (int64_t i : r.shape)
            s += double(i);
        return 4 * v * d * (s + 1);
    }

    void fit(const torch::Tensor& table, CompressedEmbedding& out, int64_t model_params,
             const ProgressFn& progress) const override
    {
        const auto& spec = out.spec;
        auto fit = fit_tucker(table, {.shape = spec.shape, .ranks = spec.ranks}, progress);
        out.fit_seconds = fit.seconds;
        // How much of each mode's energy the kept eigenvectors hold (HOSVD's per-mode bound).
        nlohmann::ordered_json kept = nlohmann::ordered_json::array();
        for (size_t k = 0; k < fit.eigenvalues.size(); ++k) {
            double all = 0, top = 0;
            for (size_t j = 0; j < fit.eigenvalues[k].size(); ++j) {
                all += fit.eigenvalues[k][j];
                top += j < static_cast<size_t>(fit.ranks[k]) ? fit.eigenvalues[k][j] : 0.0;
            }
            kept.push_back(all > 0 ? top / all : 1.0);
        }
        out.fit = {{"ranks", fit.ranks},
                   {"mode_eigenvalues", fit.eigenvalues},
                   {"mode_energy_kept", kept},
                   {"tied_head", "logits in core space: the hidden state is projected onto the factors once "
                                 "(h x_k U_k^T), then multiplied with every token's core; no dense copy"}};
        out.embedding = std::make_shared<TuckerTokenEmbedding>(fit);
        out.accounting = account_tucker(table.size(0), spec.shape, spec.ranks, model_params);
    }

    void spec_fields(const CompressionSpec& spec, nlohmann::ordered_json& j) const override
    {
        j["shape"] = spec.shape;
        j["ranks"] = spec.ranks; // r_1..r_N
    }

    void accounting_fields(const EmbeddingAccounting& a, nlohmann::ordered_json& j) const override
    {
        j["shape"] = a.tucker_shape;
        j["ranks"] = a.tucker_ranks;
        EMBEDLAB_JSON_MEMBERS(j, a, core_values_per_token, factor_values);
        j["flops_note"] = "lookup: the core's product with U_1..U_N mode by mode; tied head: the hidden "
                          "state projected onto the factors, then one product with every core";
    }

    std::string parameters(const CompressionSpec& s) const override
    {
        return "shape " + joined(s.shape, "x") + ", ranks " + joined(s.ranks, ",");
    }

    void fill_account_defaults(CompressionRequest&) const override {} // counted as given

    void fill_example(CompressionRequest& r, int64_t d) const override
    {
        if (r.shape.empty())
            r.shape = balanced_tt_shape(d, "tucker");
        if (r.ranks.empty())
            for (int64_t I : r.shape)
                r.ranks.push_back(std::min<int64_t>(4, I));
    }

    EmbeddingAccounting account(const CompressionRequest& r, int64_t vocab, int64_t,
                                int64_t model_params) const override
    {
        return account_tucker(vocab, r.shape, r.ranks, model_params);
    }

    std::string accounting_note(const EmbeddingAccounting& a) const override
    {
        return "core values per token " + std::to_string(a.core_values_per_token) +
               " (prod r_k), shared factor values " + std::to_string(a.factor_values) +
               " (sum I_k r_k); FLOPs: lookup " + std::to_string(a.flops_lookup) +
               " (multi-mode product), tied head " + std::to_string(a.flops_head) +
               " (projection onto the factors + one product with every core); no energy model (TensorSLM "
               "eqs. 2-5 model tt and svd)";
    }
};

} // namespace

EMBEDLAB_TABLE_METHOD_INSTANCE(tucker_method, TuckerMethod)

// tucker's stored form (request_tucker.cpp): the core and one factor per mode.
StoredFormRebuild tucker_rebuild()
{
    return {.form = "tucker", .rebuild = [](const TableLayout& t, StoredTensors& f) {
                const auto shape = t.parameters.at("shape").get<std::vector<int64_t>>();
                std::vector<torch::Tensor> factors;
                for (size_t k = 0; k < shape.size(); ++k)
                    factors.push_back(f.at("tucker.factor" + std::to_string(k)));
                return std::make_shared<TuckerTokenEmbedding>(shape, f.at("tucker.core"), factors);
            }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_TABLES(tucker, .methods = {&tucker_method()}, .rebuilds = {tucker_rebuild()})

} // namespace embedlab::table_support

namespace embedlab {

std::vector<std::pair<std::string, torch::Tensor>> TuckerTokenEmbedding::stored_tensors() const
{
    std::vector<std::pair<std::string, torch::Tensor>> out{{"tucker.core", core()}};
    const auto stored = factors();
    for (size_t k = 0; k < stored.size(); ++k)
        out.emplace_back("tucker.factor" + std::to_string(k), stored[k]);
    return out;
}

} // namespace embedlab
