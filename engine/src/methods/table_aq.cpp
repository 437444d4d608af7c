// aq (issue 38 part 3): additive quantisation of the table, codes learned as Shu and
// Nakayama (2017); the rows' reconstruction is measured like every method's.
#include <bit>
#include <cmath>

#include "embedlab/additive_quantisation.hpp"
#include "embedlab/json_members.hpp"
#include "methods/table_method_support.hpp"

namespace embedlab::table_support {

namespace {

class AqMethod final : public TableMethod {
public:
    std::string name() const override { return "aq"; }
    double fit_work(const CompressionRequest& r, double v, double d) const override
    {
        // Each step: the encoder (d H + H M K) and the decoder (M K d), forward and back.
        const double mk = double(r.codebooks) * double(r.codewords);
        const double batch =
            double(std::min<int64_t>(r.fit_batch > 0 ? r.fit_batch : AqOptions{}.batch, 1 << 20));
        const double steps = r.steps > 0 ? double(r.steps) : 200 * std::ceil(v / batch); // 200 epochs
        return 6 * steps * batch * (d * mk / 2 + mk * mk / 2 + mk * d);
    }

    void fit(const torch::Tensor& table, CompressedEmbedding& out, int64_t model_params,
             const ProgressFn& progress) const override
    {
        const auto& s = out.spec;
        // eval_every at AqOptions' default (once an epoch, as the official code's).
        auto fit = fit_additive_quantisation(table,
                                             {.codebooks = s.codebooks,
                                              .codewords = s.codewords,
                                              .steps = s.steps,
                                              .lr = s.lr,
                                              .batch = s.batch,
                                              .clip = s.clip,
                                              .holdout = s.holdout,
                                              .seed = s.seed},
                                             progress);
        out.fit_seconds = fit.seconds;
        out.spec.steps = fit.steps; // 0 stood for 200 epochs
        const auto& curve = fit.loss_curve;
        out.fit = {
            {"code_bits_per_token", s.codebooks * std::bit_width(static_cast<uint64_t>(s.codewords) - 1)},
            {"steps", fit.steps},
            {"initial_loss", curve.front()},
            {"final_loss", curve.back()},
            {"loss", "0.5 ||sum_m y_m A_m - e||^2, y_m Gumbel-softmax (tau 1) of the encoder's log a_m, "
                     "a batch mean; codes: argmax of log a_m"},
            {"optimizer", "Adam (0.9, 0.999, eps 1e-8)"},
            {"clip", fit.options.clip},
            {"clipped_steps", fit.clipped_steps},
            {"grad_norm_first", fit.grad_norms.front()},
            {"grad_norm_last", fit.grad_norms.back()},
            {"holdout_rows", fit.holdout_ids.size(0)},
            {"heldout_loss", "0.5 ||sum_m A_m[c^m] - e||^2 of the held-out rows' codes, a mean"},
            {"heldout_steps", fit.heldout_steps},
            {"heldout_loss_curve", fit.heldout_loss_curve},
            {"best_step", fit.best_step},
            {"best_heldout_loss", fit.best_heldout_loss},
            {"estimated_bytes", fit.estimated_bytes}};
        out.embedding = std::make_shared<AdditiveQuantisedTokenEmbedding>(fit.codes, fit.codebooks);
        out.accounting = account_aq(table.size(0), table.size(1), s.codebooks, s.codewords, model_params);
    }

    void spec_fields(const CompressionSpec& s, nlohmann::ordered_json& j) const override
    {
        EMBEDLAB_JSON_MEMBERS(j, s, codebooks, codewords, steps, lr, batch, clip, holdout, seed);
    }

    // lr and batch 0: the official code's (AqOptions' defaults).
    void complete_spec(CompressionSpec& spec, const CompressionRequest&, int64_t) const override
    {
        spec.lr = spec.lr > 0 ? spec.lr : AqOptions{}.lr;
        spec.batch = spec.batch > 0 ? spec.batch : AqOptions{}.batch;
    }

    void accounting_fields(const EmbeddingAccounting& a, nlohmann::ordered_json& j) const override
    {
        j["codebooks"] = a.aq_codebooks;
        j["codewords"] = a.aq_codewords;
        j["code_bits_per_token"] = a.aq_code_bits_per_token;
        j["flops_note"] =
            "lookup: the sum of M codewords (M d additions); tied head: every row rebuilt, then "
            "one product (2 V d)";
    }

    std::vector<std::string> fit_summary(const CompressedEmbedding& c) const override
    {
        const auto& f = c.fit;
        std::vector<std::string> lines{
            "aq M " + std::to_string(c.spec.codebooks) + ", K " + std::to_string(c.spec.codewords) +
            ": loss " + format_number("%.6g", f.value("initial_loss", 0.0)) + " -> " +
            format_number("%.6g", f.value("final_loss", 0.0)) + " after " + std::to_string(c.spec.steps) +
            " steps; " + format_number("%lld", f.value("code_bits_per_token", int64_t{0})) +
            " code bits per token"};
        if (f.value("holdout_rows", int64_t{0}) > 0)
            lines.push_back("aq clip " + format_number("%g", f.value("clip", 0.0)) + " (" +
                            format_number("%lld", f.value("clipped_steps", int64_t{0})) +
                            " steps clipped); held-out codes' loss best at step " +
                            format_number("%lld", f.value("best_step", int64_t{0})) + ": " +
                            format_number("%.6g", f.value("best_heldout_loss", 0.0)) + " (" +
                            format_number("%lld", f.value("holdout_rows", int64_t{0})) + " rows)");
        return lines;
    }

    std::string parameters(const CompressionSpec& s) const override
    {
        return "M " + std::to_string(s.codebooks) + ", K " + std::to_string(s.codewords) + ", " +
               (s.steps > 0 ? std::to_string(s.steps) + " steps" : std::string("200 epochs"));
    }

    void fill_account_defaults(CompressionRequest& r) const override
    {
        if (r.steps == 0) // counted from M, K and the table: the fit's length changes no count
            r.steps = 1;
    }

    void fill_example(CompressionRequest& r, int64_t) const override
    {
        if (r.steps == 0)
            r.steps = 200;
    }

    EmbeddingAccounting account(const CompressionRequest& r, int64_t vocab, int64_t dim,
                                int64_t model_params) const override
    {
        return account_aq(vocab, dim, r.codebooks, r.codewords, model_params);
    }

    std::string accounting_note(const EmbeddingAccounting& a) const override
    {
        return std::to_string(a.aq_code_bits_per_token) + " bits of codes per token (M log2 K, packed), " +
               std::to_string(a.aq_codebooks * a.aq_codewords * a.dim) +
               " codebook values (M K d); no energy model (TensorSLM eqs. 2-5 model tt and svd)";
    }
};

} // namespace

EMBEDLAB_TABLE_METHOD_INSTANCE(aq_method, AqMethod)

// aq's stored form (request_aq.cpp): the codes packed a row at a time, the codebooks.
StoredFormRebuild aq_rebuild()
{
    return {.form = "aq", .rebuild = [](const TableLayout& t, StoredTensors& f) {
                const auto& p = t.parameters;
                return std::make_shared<AdditiveQuantisedTokenEmbedding>(
                    unpack_aq_codes(f.at("aq.codes"), p.at("codebooks").get<int64_t>(),
                                    p.at("codewords").get<int64_t>()),
                    f.at("aq.codebooks"));
            }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_TABLES(aq, .methods = {&aq_method()}, .rebuilds = {aq_rebuild()})

} // namespace embedlab::table_support

namespace embedlab {

std::vector<std::pair<std::string, torch::Tensor>> AdditiveQuantisedTokenEmbedding::stored_tensors() const
{
    return {{"aq.codes", pack_aq_codes(codes_, codebooks_.size(1))}, {"aq.codebooks", codebooks_}};
}

} // namespace embedlab
