// tt's registry row (METHODS 5): a shape of d and ranks 1,r1,..,1, or eps choosing
// each token's ranks; the energy model. Its stored form.
#include "methods/request_support.hpp"

namespace embedlab::method_rows {

namespace {

// Shapes x (uniform inner ranks, each clipped to the position's cap, or eps values).
std::vector<CompressionRequest> sweep_settings(const SweepValues& values, const CompressionRequest& base,
                                               int64_t d)
{
    const auto ranks = values.integers("--ranks", 1, d);
    const auto eps = values.numbers("--eps", 0, 1);
    if (ranks.empty() == eps.empty())
        throw InputError("sweep: --method tt needs --ranks R1,R2,.. (uniform inner ranks) or --eps E1,E2,..");
    const bool uniform = values.has("--uniform-ranks");
    if (uniform && eps.empty())
        throw InputError("sweep: --uniform-ranks applies to --eps (given --ranks are every token's)");
    std::vector<CompressionRequest> out;
    for (const auto& shape : sweep_shapes(values, "tt", d)) {
        const auto caps = tt_rank_caps(shape);
        for (int64_t r : ranks) {
            CompressionRequest request = base;
            request.shape = shape;
            request.ranks.resize(caps.size());
            for (size_t k = 0; k < caps.size(); ++k)
                request.ranks[k] = std::min(r, caps[k]);
            out.push_back(std::move(request));
        }
        for (double e : eps) {
            CompressionRequest request = base;
            request.shape = shape;
            request.eps = e;
            request.uniform_ranks = uniform;
            out.push_back(std::move(request));
        }
    }
    return out;
}

// tt's shape is optional: without one, the most balanced 3-factor shape of d.
FieldDoc tt_shape_doc()
{
    FieldDoc shape = default_field_doc("shape");
    shape.help = "factors of d the rows are reshaped to (none: the most balanced 3 factors)";
    shape.required = false;
    return shape;
}

} // namespace

MethodDescriptor tensor_train()
{
    std::vector<std::string> fields{"shape", "ranks", "eps", "uniform_ranks", "store"};
    fields.insert(fields.end(), energy_fields().begin(), energy_fields().end());
    return {
        .id = Method::TT,
        .name = "tt",
        .part = CompressedPart::TokenEmbedding,
        .summary = "per-token Tensor-Train cores (METHODS 5)",
        .tied_head_from_factors = true,
        .positions = true,
        .lora = true,
        .stored_as = "tt",
        .fields = std::move(fields),
        .check =
            [](const CompressionRequest& r, int64_t d, const RequestFail& fail) {
                if (r.ranks.empty() == !(r.eps > 0))
                    fail("eps", "or ranks: tt needs exactly one of ranks 1,r1,..,1 or eps in (0, 1)");
                if (r.ranks.empty() && !(r.eps > 0 && r.eps < 1))
                    fail("eps", short_number(r.eps) + " must lie strictly between 0 and 1");
                if (r.uniform_ranks && !r.ranks.empty())
                    fail("uniform_ranks", "applies to eps only (given ranks are the same for every token)");
                if (!r.ranks.empty() && r.shape.empty())
                    fail("ranks", "need a shape (ranks r_0..r_N belong to one factorisation of d)");
                if (r.shape.empty())
                    return;
                if (r.shape.size() < 2)
                    fail("shape", joined(r.shape, "x") + " needs at least two factors");
                const int64_t product = shape_product(r.shape);
                if (d > 0 && product != d)
                    fail("shape", joined(r.shape, "x") + " has product " + shape_product_text(r.shape) +
                                      ", not d = " + std::to_string(d));
                if (!r.ranks.empty() &&
                    (r.ranks.size() != r.shape.size() + 1 || r.ranks.front() != 1 || r.ranks.back() != 1))
                    fail("ranks", joined(r.ranks, ",") + " must be " + std::to_string(r.shape.size() + 1) +
                                      " ranks 1,r1,..,1 for shape " + joined(r.shape, "x"));
            },
        .describe =
            [](const CompressionRequest& r) {
                return "tt " +
                       (r.ranks.empty() ? "eps " + short_number(r.eps) : "ranks " + joined(r.ranks, ","));
            },
        .sweep = {.options = {"--shape", "--shapes", "--ranks", "--eps"},
                  .switches = {"--uniform-ranks"},
                  .usage =
                      "--shape I1,I2,.. or --shapes A:B:.., and --ranks R1,R2,.. (uniform inner ranks) or "
                      "--eps E1,E2,.. [--uniform-ranks]",
                  .settings = sweep_settings},
        .field_docs = {{"shape", tt_shape_doc()}},
        .example = R"({"shape": [8, 8, 12], "ranks": [1, 4, 4, 1]})"};
}

} // namespace embedlab::method_rows

namespace embedlab::method_rows {

// tt.core<k> [V, r_k, I_k+1, r_k+1]; per-token ranks: tt.token_ranks [V, N-1] and the
// cores packed, tt.packed_core<k> (1-D, each token's own values; issue 36), or padded
// to `ranks` as tt.core<k> in directories written before.
StoredForm tt_form()
{
    return {
        .name = "tt", .layout = [](const StoredBlock& b, TableLayout& t) {
            const auto shape = b.integers("shape");
            const auto ranks = b.integers("ranks");
            check_tt_shape_and_ranks(t.dim, shape, ranks);
            bool per_token = false;
            if (b.has("rank_mode")) {
                const auto& mode = b.params()["rank_mode"];
                if (mode != "per_token" && mode != "uniform")
                    b.fail("rank_mode must be \"per_token\" or \"uniform\", got " + mode.dump());
                per_token = mode == "per_token";
            }
            // The lengths of packed cores follow from tt.token_ranks, checked by the embedding.
            const bool packed = per_token && b.lists("tt.packed_core0");
            if (!per_token && (b.lists("tt.token_ranks") || b.lists("tt.packed_core0")))
                b.fail("lists per-token tensors (tt.token_ranks, tt.packed_core<k>) but its rank_mode is "
                       "not \"per_token\"");
            for (size_t k = 0; k < shape.size(); ++k) {
                if (packed) {
                    const std::string name = "tt.packed_core" + std::to_string(k);
                    const auto listed = b.listed_shape(name);
                    if (listed.size() != 1 || listed[0] < 0)
                        b.fail("'" + b.prefix() + name + "' must be one-dimensional (packed)");
                    t.needs(name, listed);
                } else {
                    t.needs("tt.core" + std::to_string(k), {t.rows, ranks[k], shape[k], ranks[k + 1]});
                }
            }
            if (per_token)
                t.needs("tt.token_ranks", {t.rows, static_cast<int64_t>(shape.size()) - 1}, true);
            t.parameters = {{"shape", shape}, {"ranks", ranks}, {"per_token", per_token}, {"packed", packed}};
        }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_ROWS(tensor_train, .methods = {tensor_train()}, .forms = {tt_form()})

} // namespace embedlab::method_rows
