// tt's registry row (METHODS 5): a shape of d and ranks 1,r1,..,1, or eps choosing
// each token's ranks; the energy model.
#include "methods/request_support.hpp"

namespace embedlab::method_rows {

MethodDescriptor tensor_train()
{
    std::vector<std::string> fields{"shape", "ranks", "eps", "uniform_ranks"};
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
                    fail("shape", joined(r.shape, "x") + " has product " + std::to_string(product) +
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
            }};
}

} // namespace embedlab::method_rows
