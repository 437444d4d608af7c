// The test's toy method (issue 37, 59): a seeded Gaussian random projection,
// E ~ (E R) pinv(R), registered from the tests alone: its registry row with a field of
// its own ("density"), its TableMethod, its stored form (randproj.ER, randproj.pinvR)
// and the form's rebuild, and its own energy model (recorded_energy).
// toy_method_test.cpp runs it through every front door;
// app_method_panel_test.cpp picks it in the workbench.
//
//   toy_method::register_toy_once(); // then "randproj" is a method like the others
//
// Thread safety: register_toy_once before any other thread reads the registries.
#pragma once

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "embedlab/experiment_request.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/stored_form.hpp"
#include "embedlab/table_method.hpp"

namespace toy_method {

// The toy's rank is the projection's width: its own label and help (issue 59).
inline embedlab::FieldDoc toy_rank_doc()
{
    embedlab::FieldDoc rank = embedlab::default_field_doc("rank");
    rank.label = "Projection width";
    rank.help = "columns of the Gaussian projection R";
    return rank;
}

// The toy's own field (issue 59): the share of R's entries drawn nonzero (a sparse
// random projection), a request field no other method has.
inline embedlab::MethodField toy_density_field()
{
    return {.name = "density",
            .type = embedlab::RequestFieldType::Number,
            .default_value = 1.0,
            .doc = {.label = "Density",
                    .value_name = "P",
                    .help = "share of R's entries drawn nonzero (a sparse projection)",
                    .ranged = true,
                    .lo = 0,
                    .hi = 1,
                    .lo_open = true}};
}

// The toy's registry row: its fields (rank, and density its own), its check and its
// words; stored in its own form "randproj" (below).
inline embedlab::MethodDescriptor toy_row()
{
    return {
        .name = "randproj",
        .part = embedlab::CompressedPart::TokenEmbedding,
        .summary = "a Gaussian random projection of the rows (a test's toy)",
        .tied_head_from_factors = true,
        .stored_as = "randproj",
        .fields = {"rank"},
        .own_fields = {toy_density_field()},
        .check =
            [](const embedlab::CompressionRequest& r, int64_t d, const embedlab::RequestFail& fail) {
                if (r.rank < 1 || (d > 0 && r.rank > d))
                    fail("rank", std::to_string(r.rank) + " is outside 1..d");
            },
        .describe =
            [](const embedlab::CompressionRequest& r) { return "randproj rank " + std::to_string(r.rank); },
        .field_docs = {{"rank", toy_rank_doc()}},
        .example = R"({"rank": 6})"};
}

// The toy's table: the low-rank product of the projected rows E R [V, r] and pinv(R)
// [r, d], which it stores under its own names and exports through the low-rank graph.
class RandomProjectionEmbedding final : public embedlab::TokenEmbedding {
public:
    explicit RandomProjectionEmbedding(const embedlab::LowRankFit& fit) : product_(fit) {}
    int64_t vocab_size() const override { return product_.vocab_size(); }
    int64_t dim() const override { return product_.dim(); }
    torch::Tensor lookup(const torch::Tensor& ids) const override { return product_.lookup(ids); }
    torch::Tensor project(const torch::Tensor& hidden) const override { return product_.project(hidden); }
    int64_t parameter_count() const override { return product_.parameter_count(); }
    std::string kind() const override { return "randproj"; }
    std::vector<std::pair<std::string, torch::Tensor>> stored_tensors() const override
    {
        return {{"randproj.ER", product_.Z()}, {"randproj.pinvR", product_.P()}};
    }
    std::string onnx_lookup(embedlab::onnx::Graph& graph, const std::string& ids) const override
    {
        return product_.onnx_lookup(graph, ids);
    }
    std::string onnx_project(embedlab::onnx::Graph& graph, const std::string& hidden) const override
    {
        return product_.onnx_project(graph, hidden);
    }
    // Its rows are ER pinvR: by saying so it gets LoRA on its factors and their merge,
    // named nowhere else (issue 59). Fitted to the table, not drawn at random.
    std::optional<embedlab::LowRankFactors> low_rank_factors() const override
    {
        return embedlab::LowRankFactors{
            .mu = product_.mu(), .Z = product_.Z(), .P = product_.P(), .fitted = true};
    }
    std::shared_ptr<const embedlab::TokenEmbedding>
    with_low_rank_factors(const embedlab::LowRankFactors& factors) const override;

private:
    embedlab::LowRankTokenEmbedding product_;
};

inline std::shared_ptr<const RandomProjectionEmbedding> projection_embedding(torch::Tensor ER,
                                                                             torch::Tensor pinvR)
{
    embedlab::LowRankFit fit{.kind = embedlab::LowRankKind::LRF, .rank = ER.size(1)};
    fit.mu = torch::zeros({pinvR.size(1)}, torch::kFloat32);
    fit.Z = std::move(ER);
    fit.P = std::move(pinvR);
    return std::make_shared<RandomProjectionEmbedding>(fit);
}

inline std::shared_ptr<const embedlab::TokenEmbedding>
RandomProjectionEmbedding::with_low_rank_factors(const embedlab::LowRankFactors& factors) const
{
    return projection_embedding(factors.Z, factors.P);
}

// The toy's stored form: its rank, checked against the table's width, and its two tensors.
inline embedlab::StoredForm toy_form()
{
    return {.name = "randproj", .layout = [](const embedlab::StoredBlock& b, embedlab::TableLayout& t) {
                const int64_t r = b.integer("rank");
                if (r < 1 || r > t.dim)
                    b.fail("randproj's projection width " + std::to_string(r) + " is outside 1.." +
                           std::to_string(t.dim));
                t.parameters = {{"rank", r}};
                t.needs("randproj.ER", {t.rows, r});
                t.needs("randproj.pinvR", {r, t.dim});
            }};
}

inline embedlab::StoredFormRebuild toy_rebuild()
{
    return {.form = "randproj",
            .rebuild = [](const embedlab::TableLayout&,
                          embedlab::StoredTensors& f) -> std::shared_ptr<const embedlab::TokenEmbedding> {
                return projection_embedding(f.at("randproj.ER"), f.at("randproj.pinvR"));
            }};
}

class RandomProjection final : public embedlab::TableMethod {
public:
    std::string name() const override { return "randproj"; }
    void fit(const torch::Tensor& table, embedlab::CompressedEmbedding& out, int64_t model_params,
             const embedlab::ProgressFn&) const override
    {
        const int64_t V = table.size(0), d = table.size(1), r = out.spec.rank;
        const double density = out.spec.method_fields.at("density").get<double>();
        auto gen = at::make_generator<at::CPUGeneratorImpl>(out.spec.seed);
        auto R = torch::randn({d, r}, gen, torch::kFloat32);
        if (density < 1) // keep each entry with probability density, scaled to the same variance
            R = R * (torch::rand({d, r}, gen) < density).to(torch::kFloat32) / std::sqrt(density);
        out.embedding =
            projection_embedding(torch::matmul(table, R).contiguous(), torch::linalg_pinv(R).contiguous());
        out.accounting = embedlab::account_low_rank(embedlab::LowRankKind::LRF, V, d, r, {}, model_params);
        out.accounting.method = "randproj";
        out.fit = {{"projection", "gaussian"}, {"density", density}};
    }
    void spec_fields(const embedlab::CompressionSpec& spec, nlohmann::ordered_json& j) const override
    {
        j["rank"] = spec.rank;
    }
    bool fit_is_seeded() const override { return true; }
    std::string parameters(const embedlab::CompressionSpec& spec) const override
    {
        return "rank " + std::to_string(spec.rank);
    }
    void accounting_fields(const embedlab::EmbeddingAccounting& a, nlohmann::ordered_json& j) const override
    {
        j["rank"] = a.rank;
    }
    // Its own energy model (issue 59): the product's, as TensorSLM's eqs. 2-5 give svd's.
    std::optional<embedlab::EnergyEstimate> recorded_energy(const nlohmann::json& accounting, int64_t vocab,
                                                            int64_t dim,
                                                            const embedlab::EnergyOptions& o) const override
    {
        return embedlab::svd_energy(vocab, dim, accounting.at("rank").get<int64_t>(), o);
    }
    void fill_account_defaults(embedlab::CompressionRequest&) const override {}
    embedlab::EmbeddingAccounting account(const embedlab::CompressionRequest& r, int64_t vocab, int64_t dim,
                                          int64_t model_params) const override
    {
        auto a = embedlab::account_low_rank(embedlab::LowRankKind::LRF, vocab, dim, r.rank, {}, model_params);
        a.method = "randproj";
        return a;
    }
};

inline void register_toy_once()
{
    static const bool registered = [] {
        embedlab::register_method(toy_row());
        static const RandomProjection method;
        embedlab::register_table_method(method);
        embedlab::register_stored_form(toy_form());
        embedlab::register_stored_rebuild(toy_rebuild());
        return true;
    }();
    (void)registered;
}

} // namespace toy_method
