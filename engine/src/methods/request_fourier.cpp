// fourier's registry row (METHODS 4, PETE): the MLP over Fourier features of the id
// and its AdamW fit.
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
