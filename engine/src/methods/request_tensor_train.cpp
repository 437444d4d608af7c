// tt's registry row (METHODS 5): a shape of d and ranks 1,r1,..,1, or eps choosing
// each token's ranks; the energy model.
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
