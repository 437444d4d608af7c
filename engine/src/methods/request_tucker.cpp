// tucker's registry row (METHODS 5's baseline): tt's shape of d (required) and one
// rank per mode, 1 <= r_k <= I_k. Its stored form.
#include "methods/request_support.hpp"

namespace embedlab::method_rows {

namespace {

// --ranks A1,..,AN:B1,..,BN: one setting per colon-separated set and shape; a set of one
// value r is the uniform rank min(r, I_k).
std::vector<CompressionRequest> sweep_settings(const SweepValues& values, const CompressionRequest& base,
                                               int64_t d)
{
    const auto sets = values.integer_sets("--ranks", 1, d);
    if (sets.empty())
        throw InputError("sweep: --method tucker needs --ranks r1,..,rN[:r1,..,rN..] (one rank per --shape "
                         "factor per setting, or one uniform rank r per setting)");
    std::vector<CompressionRequest> out;
    for (const auto& shape : sweep_shapes(values, "tucker", d))
        for (const auto& set : sets) {
            CompressionRequest request = base;
            request.shape = shape;
            request.ranks = set;
            if (set.size() == 1 && shape.size() > 1) {
                request.ranks.clear();
                for (int64_t I : shape)
                    request.ranks.push_back(std::min(set[0], I));
            }
            check_tucker_shape_and_ranks(d, request.shape, request.ranks);
            out.push_back(std::move(request));
        }
    return out;
}

// Tucker's ranks: one per mode, no boundary 1s (unlike tt's).
FieldDoc tucker_ranks_doc()
{
    FieldDoc ranks = default_field_doc("ranks");
    ranks.value_name = "r1,..,rN";
    ranks.help = "the core's ranks, one per mode, 1 <= r_k <= I_k";
    ranks.required = true;
    return ranks;
}

} // namespace

MethodDescriptor tucker()
{
    return {
        .id = Method::Tucker,
        .name = "tucker",
        .part = CompressedPart::TokenEmbedding,
        .summary = "Tucker (HOSVD) of the tensorised table: shared factors, a core per token (METHODS 5)",
        .tied_head_from_factors = true,
        .positions = true,
        .lora = true,
        .stored_as = "tucker",
        .fields = {"shape", "ranks", "store"},
        .check =
            [](const CompressionRequest& r, int64_t d, const RequestFail& fail) {
                if (r.shape.empty())
                    fail("shape",
                         "is required: tucker tensorises each row as I_1 x .. x I_N with product d (as tt)");
                if (r.ranks.size() != r.shape.size())
                    fail("ranks",
                         (r.ranks.empty() ? std::string("are required") : joined(r.ranks, ",") + " are not") +
                             ": tucker needs " + std::to_string(r.shape.size()) + " ranks r_1..r_N, got " +
                             std::to_string(r.ranks.size()) + ": one per mode of shape " +
                             joined(r.shape, "x") + " (no boundary 1s, unlike tt)");
                for (size_t k = 0; k < r.shape.size(); ++k)
                    if (r.ranks[k] > r.shape[k])
                        fail("ranks", "r_" + std::to_string(k + 1) + " = " + std::to_string(r.ranks[k]) +
                                          " exceeds I_" + std::to_string(k + 1) + " = " +
                                          std::to_string(r.shape[k]) + " of shape " + joined(r.shape, "x"));
                const int64_t product = shape_product(r.shape);
                if (d > 0 && product != d)
                    fail("shape", joined(r.shape, "x") + " has product " + shape_product_text(r.shape) +
                                      ", not d = " + std::to_string(d));
            },
        .describe =
            [](const CompressionRequest& r) {
                return "tucker " + joined(r.shape, "x") + " ranks " + joined(r.ranks, ",");
            },
        .sweep = {.options = {"--shape", "--shapes", "--ranks"},
                  .usage = "--shape I1,I2,.. or --shapes A:B:.., and --ranks r1,..,rN[:r1,..,rN..]",
                  .settings = sweep_settings},
        .field_docs = {{"ranks", tucker_ranks_doc()}},
        .example = R"({"shape": [8, 8, 12], "ranks": [4, 4, 6]})"};
}

} // namespace embedlab::method_rows

namespace embedlab::method_rows {

// tucker.core [V, r_1..r_N] and tucker.factor<k> [I_k+1, r_k+1]: tt's tensorisation,
// ranks r_1..r_N, one per mode.
StoredForm tucker_form()
{
    return {.name = "tucker", .layout = [](const StoredBlock& b, TableLayout& t) {
                const auto shape = b.integers("shape");
                const auto ranks = b.integers("ranks");
                check_tucker_shape_and_ranks(t.dim, shape, ranks);
                TensorShape core{t.rows};
                core.insert(core.end(), ranks.begin(), ranks.end());
                t.needs("tucker.core", core);
                for (size_t k = 0; k < shape.size(); ++k)
                    t.needs("tucker.factor" + std::to_string(k), {shape[k], ranks[k]});
                t.parameters = {{"shape", shape}, {"ranks", ranks}};
            }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_ROWS(tucker, .methods = {tucker()}, .forms = {tucker_form()})

} // namespace embedlab::method_rows
