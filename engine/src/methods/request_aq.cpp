// aq's registry row (issue 38 part 3, the LLE paper's third baseline): additive
// quantisation after Shu and Nakayama (2017), every row a sum of M codewords, one from
// each of M codebooks of K, codes learned by a Gumbel-softmax autoencoder. Its stored form.
#include "methods/request_support.hpp"

namespace embedlab::method_rows {

namespace {

// aq's steps are optional: 0 trains the official code's 200 epochs.
FieldDoc aq_steps_doc()
{
    FieldDoc steps = default_field_doc("steps");
    steps.help = "Adam steps of the code learner";
    steps.zero = "the official 200 epochs";
    steps.required = false;
    return steps;
}

// A field whose 0 stands for aq's own default.
FieldDoc default_doc(const char* field, const char* zero)
{
    FieldDoc doc = default_field_doc(field);
    doc.zero = zero;
    return doc;
}

} // namespace

MethodDescriptor aq()
{
    return {
        .id = Method::AQ,
        .name = "aq",
        .part = CompressedPart::TokenEmbedding,
        .summary = "additive quantisation: each row a sum of M codewords of K (Shu and Nakayama 2017, the "
                   "LLE paper's third baseline)",
        .tied_head_from_factors = true,
        .stored_as = "aq",
        .fields = {"codebooks", "codewords", "steps", "lr", "fit_batch", "clip", "holdout", "store"},
        .check =
            [](const CompressionRequest& r, int64_t, const RequestFail& fail) {
                if (r.codebooks < 1 || r.codebooks > 1024)
                    fail("codebooks",
                         std::to_string(r.codebooks) + " must lie in 1..1024 (M; the paper: 32)");
                if (r.codewords < 2 || r.codewords > 256 || (r.codewords & (r.codewords - 1)) != 0)
                    fail("codewords", std::to_string(r.codewords) +
                                          " must be a power of two in 2..256 (K; the paper: 16)");
                if (r.steps < 0 || r.steps > 100'000'000)
                    fail("steps", std::to_string(r.steps) +
                                      " must be 1..100000000 (Adam steps of the code learner; 0: the "
                                      "official 200 epochs)");
                if (!(r.lr >= 0 && r.lr <= 10))
                    fail("lr", short_number(r.lr) + " must lie in (0, 10] (0: the official 1e-4)");
                if (r.fit_batch < 0 || r.fit_batch > 1'000'000'000)
                    fail("fit_batch",
                         std::to_string(r.fit_batch) + " must be at least 1 (0: the official 64)");
                if (!(r.clip >= 0 && r.clip <= 1e6))
                    fail("clip", short_number(r.clip) + " must lie in [0, 1e6] (0: no clipping)");
                if (r.holdout < 0 || r.holdout > (1 << 30))
                    fail("holdout",
                         std::to_string(r.holdout) + " must be 0 (the last step's codes) or a row count");
            },
        .describe =
            [](const CompressionRequest& r) {
                return "aq M " + std::to_string(r.codebooks) + ", K " + std::to_string(r.codewords) + ", " +
                       (r.steps > 0 ? std::to_string(r.steps) + " steps" : std::string("200 epochs"));
            },
        .field_docs = {{"steps", aq_steps_doc()},
                       {"lr", default_doc("lr", "the official 1e-4")},
                       {"fit_batch", default_doc("fit_batch", "the official 64")}},
        .example = R"({"codebooks": 32, "codewords": 16})"};
}

} // namespace embedlab::method_rows

namespace embedlab::method_rows {

// aq.codes [V, bytes]: each row's M codes of log2 K bits, packed a row at a time (ids);
// aq.codebooks [M, K, d].
StoredForm aq_form()
{
    return {.name = "aq", .layout = [](const StoredBlock& b, TableLayout& t) {
                const int64_t M = b.integer("codebooks"), K = b.integer("codewords");
                if (M < 1 || M > 1024 || K < 2 || K > 256 || (K & (K - 1)) != 0)
                    b.fail("aq needs 1..1024 codebooks of a power of two in 2..256 codewords, got " +
                           std::to_string(M) + " of " + std::to_string(K));
                int64_t bits = 0;
                while ((int64_t{1} << bits) < K)
                    ++bits;
                t.needs("aq.codes", {t.rows, (M * bits + 7) / 8}, true);
                t.needs("aq.codebooks", {M, K, t.dim});
                t.parameters = {{"codebooks", M}, {"codewords", K}};
            }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_ROWS(aq, .methods = {aq()}, .forms = {aq_form()})

} // namespace embedlab::method_rows
