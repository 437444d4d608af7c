// tt (METHODS 5, TensorSLM): each token's row as a Tensor-Train of cores, with given
// inner ranks, or each token its own ranks from an accuracy eps (eq. 14).
#include <algorithm>
#include <cstdio>

#include "embedlab/json_members.hpp"
#include "embedlab/tensor_train.hpp"
#include "embedlab/text_format.hpp"
#include "methods/table_method_support.hpp"
#include "model/manifest_layout.hpp"

namespace embedlab::table_support {

namespace {

class TensorTrainMethod final : public TableMethod {
public:
    std::string name() const override { return "tt"; }
    double fit_work(const CompressionRequest&, double v, double d) const override
    {
        return 400 * v * d; // a small TT-SVD per token
    }

    void fit(const torch::Tensor& table, CompressedEmbedding& out, int64_t model_params,
             const ProgressFn& progress) const override
    {
        const auto& spec = out.spec;
        const int64_t V = table.size(0);
        auto fit = fit_tensor_train(
            table,
            {.shape = spec.shape, .ranks = spec.ranks, .eps = spec.eps, .uniform_ranks = spec.uniform_ranks},
            progress);
        out.fit_seconds = fit.seconds;
        out.spec.ranks = fit.ranks;
        out.fit = {{"ranks", fit.ranks}, {"per_token_ranks", fit.token_ranks.defined()}};
        if (fit.eps > 0)
            out.fit["mean_needed_ranks"] = fit.mean_needed_ranks;
        // The fit's cores move in (rearranged in place, not copied).
        auto embedding = std::make_shared<TensorTrainTokenEmbedding>(std::move(fit));
        if (embedding->per_token_ranks()) {
            const auto r = fit.token_ranks.contiguous();
            const std::vector<int32_t> own(r.data_ptr<int32_t>(), r.data_ptr<int32_t>() + r.numel());
            out.accounting = account_tensor_train_per_token(V, fit.shape, own, {}, model_params);
        } else {
            out.accounting = account_tensor_train(V, fit.shape, fit.ranks, {}, model_params);
        }
        out.embedding = std::move(embedding);
    }

    void spec_fields(const CompressionSpec& spec, nlohmann::ordered_json& j) const override
    {
        j["shape"] = spec.shape;
        j["ranks"] = spec.ranks; // eps: each position's largest (the cores' sizes)
        if (spec.eps > 0) {
            j["eps"] = spec.eps;
            // Per token: every token's own ranks are stored as tt.token_ranks.
            j["rank_mode"] = spec.uniform_ranks ? "uniform" : "per_token";
        }
    }

    void conventions(const EmbeddingAccounting& a, nlohmann::ordered_json& c) const override
    {
        if (a.per_token_ranks)
            c["params"] = "sum_k r_{k-1} I_k r_k per token (METHODS 5) plus the token's N-1 inner ranks, "
                          "stored as int32 beside its cores and counted in params_after, eta and eta_emb "
                          "(a reader needs them to split the cores)";
    }

    void accounting_fields(const EmbeddingAccounting& a, nlohmann::ordered_json& j) const override
    {
        j["shape"] = a.shape;
        j["ranks"] = a.ranks;
        j["rank_mode"] = a.per_token_ranks ? "per_token" : "uniform";
        if (a.per_token_ranks) {
            j["mean_ranks"] = a.mean_ranks;
            j["mean_params_per_token"] = a.mean_params_per_token;
        }
        EMBEDLAB_JSON_MEMBERS(j, a, params_per_token, eta_ttd, energy_size);
        j["energy_size_definition"] = "r_max^2 sum I_k per token: TensorSLM eq. 3's complexity term, as the "
                                      "paper computes omega (per-token ranks: the mean of each token's own)";
        j["energy"] = energy_json(a.energy);
        j["energy_size_stored"] = a.energy_size_stored;
        j["energy_stored"] = energy_json(a.energy_stored);
        j["svd_equal_size_rank"] = a.svd_equal_size_rank;
        j["svd_equal_size_energy"] = energy_json(a.svd_equal_size_energy);
    }

    void complete_spec(CompressionSpec& spec, const CompressionRequest& r, int64_t d) const override
    {
        if (spec.shape.empty())
            spec.shape = balanced_tt_shape(d, r.model.empty() ? "tt" : r.model);
    }

    // The smallest eps of 0.3, 0.4, .., 0.9 whose per-token TT stores at most 0.9 of the
    // values on an evenly spaced sample of at most 4096 rows (a margin for the whole
    // table); 0.9 when none does. eps 0.3, the old default, stored 1.4-1.6x tinygpt2's.
    bool picks_default_from_table() const override { return true; }
    std::optional<TableDefault> default_from_table(const torch::Tensor& table, const CompressionRequest& base,
                                                   const ProgressFn& progress) const override
    {
        const int64_t v = table.size(0), d = table.size(1);
        const int64_t n = std::min<int64_t>(v, 4096);
        const torch::Tensor sample =
            table.index_select(0, evenly_spaced_rows(v, n)).to(torch::kFloat).contiguous();
        const auto shape = base.shape.empty() ? balanced_tt_shape(d, "tt") : base.shape;
        const std::vector<double> grid = {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
        TableDefault picked{.request = base};
        picked.request.ranks.clear();
        double ratio = 0;
        for (size_t i = 0; i < grid.size(); ++i) {
            const auto c = compress_table(
                sample, {.method = "tt", .shape = shape, .eps = grid[i], .uniform_ranks = base.uniform_ranks},
                0,
                progress ? ProgressFn([&progress, i, steps = static_cast<int64_t>(grid.size())](int64_t done,
                                                                                                int64_t of) {
                    return of <= 0 || progress(static_cast<int64_t>(i) * of + done, steps * of);
                })
                         : ProgressFn{});
            picked.request.eps = grid[i];
            ratio = c.accounting.ratio;
            if (ratio <= 0.9)
                break;
        }
        picked.measured = {{"eps", picked.request.eps}, {"sample_ratio", ratio}, {"sample_rows", n}};
        picked.how = "tt default eps " + short_number(picked.request.eps) + ": stores " +
                     std::to_string(ratio).substr(0, 4) + " of the table on a " + std::to_string(n) +
                     "-row sample";
        return picked;
    }

    void fill_example(CompressionRequest& r, int64_t d) const override
    {
        if (r.shape.empty())
            r.shape = balanced_tt_shape(d, "tt");
        if (r.ranks.empty() && r.eps == 0) { // 1,4,..,4,1 within the caps
            r.ranks = tt_rank_caps(r.shape);
            for (size_t k = 1; k + 1 < r.ranks.size(); ++k)
                r.ranks[k] = std::min<int64_t>(4, r.ranks[k]);
        }
    }

    // Without ranks or eps: each position's cap, the full-rank train (as account always did).
    void fill_account_defaults(CompressionRequest& r) const override
    {
        if (r.shape.empty())
            throw InputError("tt needs a shape I1,I2,.. (product = d)");
        if (r.ranks.empty() && r.eps == 0)
            r.ranks = tt_rank_caps(r.shape);
    }

    EmbeddingAccounting account(const CompressionRequest& r, int64_t vocab, int64_t,
                                int64_t model_params) const override
    {
        if (r.eps > 0)
            throw InputError(
                "tt's eps chooses each token's ranks from the table, so it is counted only after "
                "a fit; give ranks 1,r1,..,1 (compress --method tt --eps prints its accounting)");
        return account_tensor_train(vocab, r.shape, r.ranks, {}, model_params);
    }

    std::string accounting_note(const EmbeddingAccounting& a) const override
    {
        char text[600];
        std::snprintf(
            text, sizeof text,
            "params per token %lld, eta_TTD %.3f; SVD of equal size: rank %lld, omega %.4f\n"
            "(TensorSLM's Table 6 totals cannot be reproduced from its own formula; counted as "
            "METHODS.md 5)\n"
            "omega above: eq. 3's r_max^2 sum I_k = %.0f per token (the paper's complexity); from the "
            "%.0f values stored per token: omega %.4f",
            (long long)a.params_per_token, a.eta_ttd, (long long)a.svd_equal_size_rank,
            a.svd_equal_size_energy.omega, a.energy_size, a.energy_size_stored, a.energy_stored.omega);
        return text;
    }

    std::string parameters(const CompressionSpec& s) const override
    {
        return "shape " + joined(s.shape, "x") + (s.eps > 0 ? ", eps " + short_number(s.eps) : "") +
               (s.eps > 0 && !s.uniform_ranks ? ", per-token ranks up to " : ", ranks ") +
               joined(s.ranks, ",");
    }

    // Per-token ranks: the recorded N I r^2 term (a mean over tokens), not the largest ranks'.
    std::optional<EnergyEstimate> recorded_energy(const nlohmann::json& acc, int64_t vocab, int64_t dim,
                                                  const EnergyOptions& o) const override
    {
        const auto a = account_tensor_train(
            vocab, detail::json_integers(acc.at("shape"), "accounting.shape", "embedlab.json"),
            detail::json_integers(acc.at("ranks"), "accounting.ranks", "embedlab.json"), o);
        const auto size = acc.find("energy_size");
        const bool per_token = acc.contains("rank_mode") && acc["rank_mode"] == "per_token";
        if (per_token && (size == acc.end() || !size->is_number() || !(size->get<double>() > 0)))
            throw InputError("embedlab.json: accounting.energy_size must be a positive number for per-token "
                             "TT ranks");
        return per_token ? tt_energy(vocab, dim, size->get<double>(), o) : a.energy;
    }
};

} // namespace

EMBEDLAB_TABLE_METHOD_INSTANCE(tensor_train_method, TensorTrainMethod)

// tt's stored form (request_tensor_train.cpp): uniform cores, packed per-token ones with
// their ranks, or per-token ones padded to `ranks` (before issue 36, packed here).
StoredFormRebuild tensor_train_rebuild()
{
    return {.form = "tt", .rebuild = [](const TableLayout& t, StoredTensors& f) {
                const auto shape = t.parameters.at("shape").get<std::vector<int64_t>>();
                const bool packed = t.parameters.at("packed").get<bool>();
                std::vector<torch::Tensor> cores;
                // Moved out: the embedding rearranges a core it alone holds in place (a mapped
                // core's pages become its own), instead of keeping the file's and a copy.
                for (size_t k = 0; k < shape.size(); ++k)
                    cores.push_back(
                        std::move(f.at((packed ? "tt.packed_core" : "tt.core") + std::to_string(k))));
                const torch::Tensor token_ranks =
                    t.parameters.at("per_token").get<bool>() ? f.at("tt.token_ranks") : torch::Tensor();
                return std::make_shared<TensorTrainTokenEmbedding>(shape, std::move(cores), token_ranks);
            }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_TABLES(tensor_train, .methods = {&tensor_train_method()},
                        .rebuilds = {tensor_train_rebuild()})

} // namespace embedlab::table_support

namespace embedlab {

// Per-token ranks: each token's own values packed (issue 36), what is counted.
std::vector<std::pair<std::string, torch::Tensor>> TensorTrainTokenEmbedding::stored_tensors() const
{
    const bool packed = per_token_ranks();
    const auto stored = packed ? packed_cores() : cores();
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (size_t k = 0; k < stored.size(); ++k)
        out.emplace_back((packed ? "tt.packed_core" : "tt.core") + std::to_string(k), stored[k]);
    if (packed)
        out.emplace_back("tt.token_ranks", token_ranks());
    return out;
}

} // namespace embedlab
