// fourier (METHODS 4, PETE): no table stored; an MLP of Fourier features of the
// normalised token id, fitted to the table's rows.
#include <chrono>

#include "embedlab/json_members.hpp"
#include "methods/table_method_support.hpp"

namespace embedlab::table_support {

namespace {

class FourierMethod final : public TableMethod {
public:
    std::string name() const override { return "fourier"; }
    bool fit_is_seeded() const override { return true; } // its AdamW fit starts from spec.seed
    double fit_work(const CompressionRequest& r, double, double d) const override
    {
        return double(r.steps) * double(r.fit_batch > 0 ? r.fit_batch : 4096) * 12 * d *
               d; // forward + backward
    }

    // lr and batch 0: fourier's own defaults (1e-3, 4096 rows).
    void complete_spec(CompressionSpec& spec, const CompressionRequest&, int64_t) const override
    {
        spec.lr = spec.lr > 0 ? spec.lr : 1e-3;
        spec.batch = spec.batch > 0 ? spec.batch : 4096;
    }

    void fill_example(CompressionRequest& r, int64_t) const override
    {
        if (r.steps == 0)
            r.steps = 200;
    }

    void fit(const torch::Tensor& table, CompressedEmbedding& out, int64_t model_params,
             const ProgressFn& progress) const override
    {
        const auto& spec = out.spec;
        const int64_t V = table.size(0), d = table.size(1);
        const FourierOptions options{.mlp = parse_fourier_mlp(spec.mlp),
                                     .hidden_ratio = spec.hidden_ratio,
                                     .norm = spec.norm,
                                     .loss = spec.loss,
                                     .steps = spec.steps,
                                     .lr = spec.lr,
                                     .batch = spec.batch,
                                     .weight_decay = spec.weight_decay,
                                     .seed = spec.seed};
        auto fit = fit_fourier_embedding(table, options, progress);
        out.fit_seconds = fit.seconds;
        auto embedding = std::make_shared<FourierTokenEmbedding>(fit.params);
        // The tied head rebuilds all V rows at every call: time one call for one row.
        const auto r0 = std::chrono::steady_clock::now();
        {
            c10::InferenceMode guard;
            embedding->project(torch::zeros({1, d}, torch::kFloat32));
        }
        const double head_call = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
        const bool folded = fit.params.mlp == FourierMlp::Linear && !fit.params.norm;
        out.fit = {{"mlp", spec.mlp},
                   {"hidden", fit.params.hidden},
                   {"norm", spec.norm},
                   {"loss", spec.loss},
                   {"initial_loss", fit.initial_loss},
                   {"final_loss", fit.final_loss},
                   {"final_mse", fit.final_mse},
                   {"parameters", embedding->parameter_count()},
                   {"loss_curve", loss_curve_json(fit.loss_curve)},
                   {"flops_per_row", embedding->flops_per_row()},
                   {"tied_head",
                    {{"rows_rebuilt_per_call", V},
                     {"rebuild_flops_per_call", V * embedding->flops_per_row()},
                     {"seconds_per_call", head_call},
                     {"mlp_folded_into_hidden", folded},
                     {"note", std::string("no table is stored: a tied head rebuilds all V rows in blocks of "
                                          "4096 at every call, on top of the usual hidden E^T product") +
                                  (folded ? "; linear without norm folds the MLP into the hidden states, "
                                            "h E^T = (h + h W) T^T + h b, so only the features are rebuilt"
                                          : "") +
                                  "; accounting.flops_per_token charges a whole rebuild to each token (as "
                                  "for tt), an upper bound when a call has many tokens"}}}};
        // As for tt: the tied head of one token needs every row rebuilt (features,
        // MLP, residual, norm) and one product with each; a batch shares the rebuild.
        // Folded: features only, plus h W and h b for the token.
        out.accounting = account_stored(
            spec.method, V, d, embedding->parameter_count(), model_params, embedding->flops_per_row(),
            folded ? V * (d + 2 * d) + 2 * d * d + 2 * d : V * (embedding->flops_per_row() + 2 * d));
        out.embedding = std::move(embedding);
    }

    void spec_fields(const CompressionSpec& spec, nlohmann::ordered_json& j) const override
    {
        j["mlp"] = spec.mlp;
        if (spec.mlp == "geglu")
            j["hidden_ratio"] = spec.hidden_ratio;
        EMBEDLAB_JSON_MEMBERS(j, spec, norm, loss, steps, lr, batch, weight_decay, seed);
    }

    std::vector<std::string> fit_summary(const CompressedEmbedding& c) const override
    {
        const auto& spec = c.spec;
        const auto& f = c.fit;
        const std::string shape =
            (spec.mlp == "geglu" ? " (hidden " + format_number("%lld", f.value("hidden", int64_t{0})) + ")"
                                 : std::string()) +
            (spec.norm ? " + rmsnorm" : "");
        std::vector<std::string> lines = {
            "fourier " + spec.mlp + shape + ": " + spec.loss + " loss " +
            format_number("%.6g", f.value("initial_loss", 0.0)) + " -> " +
            format_number("%.6g", f.value("final_loss", 0.0)) + " after " + std::to_string(spec.steps) +
            " steps (full-table MSE " + format_number("%.6g", f.value("final_mse", 0.0)) + "); " +
            format_number("%lld", f.value("parameters", int64_t{0})) + " stored parameters"};
        if (f.contains("tied_head"))
            lines.push_back("tied head: all " +
                            format_number("%lld", f["tied_head"].value("rows_rebuilt_per_call", int64_t{0})) +
                            " rows rebuilt at every head call (" +
                            format_number("%.3f", f["tied_head"].value("seconds_per_call", 0.0)) +
                            " s a call)");
        return lines;
    }

    std::string parameters(const CompressionSpec& s) const override
    {
        return s.mlp + " MLP, " + std::to_string(s.steps) + " steps";
    }
};

} // namespace

EMBEDLAB_TABLE_METHOD_INSTANCE(fourier_method, FourierMethod)

// fourier's stored form (request_fourier.cpp): the MLP's weights.
StoredFormRebuild fourier_rebuild()
{
    return {.form = "fourier", .rebuild = [](const TableLayout& t, StoredTensors& f) {
                const auto& s = t.parameters;
                FourierParams p{.mlp = parse_fourier_mlp(s.at("mlp").get<std::string>()),
                                .vocab = t.rows,
                                .dim = t.dim,
                                .hidden = s.at("hidden").get<int64_t>(),
                                .norm = s.at("norm").get<bool>()};
                p.w_in = f.at("fourier.w_in");
                p.b_in = f.at("fourier.b_in");
                if (p.mlp == FourierMlp::GeGLU) {
                    p.w_out = f.at("fourier.w_out");
                    p.b_out = f.at("fourier.b_out");
                }
                if (p.norm)
                    p.norm_weight = f.at("fourier.norm");
                return std::make_shared<FourierTokenEmbedding>(std::move(p));
            }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_TABLES(fourier, .methods = {&fourier_method()}, .rebuilds = {fourier_rebuild()})

} // namespace embedlab::table_support

namespace embedlab {

std::vector<std::pair<std::string, torch::Tensor>> FourierTokenEmbedding::stored_tensors() const
{
    std::vector<std::pair<std::string, torch::Tensor>> out{{"fourier.w_in", p_.w_in},
                                                           {"fourier.b_in", p_.b_in}};
    if (p_.mlp == FourierMlp::GeGLU) {
        out.emplace_back("fourier.w_out", p_.w_out);
        out.emplace_back("fourier.b_out", p_.b_out);
    }
    if (p_.norm)
        out.emplace_back("fourier.norm", p_.norm_weight);
    return out;
}

} // namespace embedlab
