// fourier's registry row (METHODS 4, PETE): the MLP over Fourier features of the id
// and its AdamW fit; its stored form.
#include "embedlab/fourier_mlp.hpp"
#include "methods/request_support.hpp"

namespace embedlab::method_rows {

namespace {

// A field whose 0 stands for fourier's own default.
FieldDoc zero_doc(const char* field, const char* zero)
{
    FieldDoc doc = default_field_doc(field);
    doc.zero = zero;
    return doc;
}

} // namespace

MethodDescriptor fourier()
{
    return {.id = Method::Fourier,
            .name = "fourier",
            .part = CompressedPart::TokenEmbedding,
            .summary = "an MLP of Fourier features of the id (METHODS 4)",
            .tied_head_from_factors = true,
            .lora = true,
            .recovery_trains_table_network = true, // PETE keeps no per-token parameters
            .stored_as = "fourier",
            .fields = {"mlp", "hidden_ratio", "norm", "loss", "steps", "lr", "fit_batch", "weight_decay",
                       "store"},
            .check =
                [](const CompressionRequest& r, int64_t, const RequestFail& fail) {
                    if (r.mlp != "linear" && r.mlp != "geglu")
                        fail("mlp", "'" + r.mlp + "' must be linear or geglu");
                    if (r.hidden_ratio != CompressionRequest{}.hidden_ratio && r.mlp != "geglu")
                        fail("hidden_ratio", "applies to mlp geglu only");
                    if (!(r.hidden_ratio > 0 && r.hidden_ratio <= 64))
                        fail("hidden_ratio", short_number(r.hidden_ratio) + " must lie in (0, 64]");
                    if (r.loss != "mse" && r.loss != "cosine")
                        fail("loss", "'" + r.loss + "' must be mse or cosine");
                    if (r.steps < 1 || r.steps > 100'000'000)
                        fail("steps",
                             std::to_string(r.steps) + " must be 1..100000000 (AdamW steps, e.g. 2000)");
                    if (!(r.lr >= 0 && r.lr <= 10))
                        fail("lr", short_number(r.lr) + " must lie in (0, 10] (0: 1e-3)");
                    if (r.fit_batch < 0 || r.fit_batch > 1'000'000'000)
                        fail("fit_batch", std::to_string(r.fit_batch) + " must be at least 1 (0: 4096)");
                    if (!(r.weight_decay >= 0 && r.weight_decay <= 10))
                        fail("weight_decay", short_number(r.weight_decay) + " must lie in [0, 10]");
                },
            .describe =
                [](const CompressionRequest& r) {
                    return "fourier " + r.mlp + ", " + std::to_string(r.steps) + " steps";
                },
            .field_docs = {{"lr", zero_doc("lr", "1e-3")}, {"fit_batch", zero_doc("fit_batch", "4096")}},
            .example = R"({"mlp": "linear", "steps": 300})"};
}

} // namespace embedlab::method_rows

namespace embedlab::method_rows {

// fourier.w_in and fourier.b_in ([d, d], [d] linear; [2h, d], [2h] geglu, which adds
// fourier.w_out [d, h] and fourier.b_out [d]); fourier.norm [d] with norm. No per-token
// values: the features are computed from the id.
StoredForm fourier_form()
{
    return {.name = "fourier", .layout = [](const StoredBlock& b, TableLayout& t) {
                const std::string mlp =
                    fourier_mlp_name(parse_fourier_mlp(b.field("mlp").get<std::string>()));
                const bool norm = b.field("norm").get<bool>();
                const int64_t d = t.dim;
                if (t.rows < 2)
                    b.fail("fourier needs at least 2 rows, the table has " + std::to_string(t.rows));
                int64_t hidden = 0;
                if (mlp == "linear") {
                    t.needs("fourier.w_in", {d, d});
                    t.needs("fourier.b_in", {d});
                } else {
                    const double ratio = b.field("hidden_ratio").get<double>();
                    if (!(ratio > 0 && ratio <= kMaxFourierHiddenRatio))
                        b.fail("hidden_ratio must be in (0, " + std::to_string(kMaxFourierHiddenRatio) +
                               "], got " + std::to_string(ratio));
                    hidden = fourier_hidden_size(d, ratio);
                    t.needs("fourier.w_in", {2 * hidden, d});
                    t.needs("fourier.b_in", {2 * hidden});
                    t.needs("fourier.w_out", {d, hidden});
                    t.needs("fourier.b_out", {d});
                }
                if (norm)
                    t.needs("fourier.norm", {d});
                t.parameters = {{"mlp", mlp}, {"norm", norm}, {"hidden", hidden}};
            }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_ROWS(fourier, .methods = {fourier()}, .forms = {fourier_form()})

} // namespace embedlab::method_rows
