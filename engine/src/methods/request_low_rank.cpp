// pca and svd's registry rows (METHODS 1): a rank in 1..d and the energy model; their
// stored forms, and lrf's (finetune --from-scratch's factors).
#include "methods/request_support.hpp"

namespace embedlab::method_rows {

namespace {

MethodDescriptor low_rank(Method id, const char* name, const char* summary)
{
    std::vector<std::string> fields{"rank", "store"};
    fields.insert(fields.end(), energy_fields().begin(), energy_fields().end());
    return {
        .id = id,
        .name = name,
        .part = CompressedPart::TokenEmbedding,
        .summary = summary,
        .tied_head_from_factors = true,
        .positions = true,
        .lora = true,
        .stored_as = name,
        .fields = std::move(fields),
        .check =
            [](const CompressionRequest& r, int64_t d, const RequestFail& fail) {
                if (r.rank == 0)
                    fail("rank", "is required (1.." + width(d) + ")");
                if (!within_d(r.rank, d))
                    fail("rank", std::to_string(r.rank) + " is outside 1.." + width(d));
            },
        .describe = [](const CompressionRequest& r) { return r.method + " rank " + std::to_string(r.rank); },
        .sweep = {.options = {"--ranks"},
                  .usage = "--ranks K1,K2,.. or A:B:S (each 1..d)",
                  .settings =
                      [](const SweepValues& values, const CompressionRequest& base, int64_t d) {
                          const auto ranks = values.integers("--ranks", 1, d);
                          if (ranks.empty())
                              throw InputError("sweep: --method " + base.method +
                                               " needs --ranks K1,K2,.. (each 1.." + width(d) + ")");
                          return each_setting(ranks, base,
                                              [](CompressionRequest& r, int64_t k) { r.rank = k; });
                      }},
        .example = R"({"rank": 32})"};
}

} // namespace

MethodDescriptor pca()
{
    return low_rank(Method::PCA, "pca", "centred low-rank factors E ~ mu + Z P (METHODS 1)");
}

MethodDescriptor svd()
{
    return low_rank(Method::SVD, "svd", "uncentred truncated SVD E ~ Z P (METHODS 1)");
}

} // namespace embedlab::method_rows

namespace embedlab::method_rows {

namespace {

// pca, svd and lrf: <form>.Z [V, r] and <form>.P [r, d]; pca's mean pca.mu [d] first.
StoredForm low_rank_form(const char* name, bool mean, bool names_a_method)
{
    return {.name = name,
            .names_a_method = names_a_method,
            .layout = [form = std::string(name), mean](const StoredBlock& b, TableLayout& t) {
                const int64_t rank = b.integer("rank");
                if (rank < 1 || rank > t.dim)
                    b.fail("rank " + std::to_string(rank) + " is outside 1.." + std::to_string(t.dim));
                t.parameters = {{"rank", rank}};
                if (mean)
                    t.needs(form + ".mu", {t.dim});
                t.needs(form + ".Z", {t.rows, rank});
                t.needs(form + ".P", {rank, t.dim});
            }};
}

} // namespace

StoredForm pca_form()
{
    return low_rank_form("pca", true, false);
}

StoredForm svd_form()
{
    return low_rank_form("svd", false, false);
}

StoredForm lrf_form()
{
    return low_rank_form("lrf", false, true);
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_ROWS(low_rank, .methods = {pca(), svd()}, .forms = {pca_form(), svd_form(), lrf_form()})

} // namespace embedlab::method_rows
