// The lle family's registry rows (METHODS 2): a frequency text splitting common from
// rare tokens, the share kept, and how rare rows are rebuilt; their stored forms.

#include "embedlab/task_names.hpp"
#include "methods/request_support.hpp"

namespace embedlab::method_rows {

namespace {

// The family's checks; lle-unk's k is optional (0: the mean of V_C as fallback).
void check_partial_sparse(const CompressionRequest& r, int64_t d, const RequestFail& fail, bool k_required)
{
    if (r.freq_text.empty())
        fail("freq_text", "is required: token frequencies decide common vs rare");
    if (!(r.keep_ratio > 0 && r.keep_ratio <= 1))
        fail("keep_ratio", short_number(r.keep_ratio) + " must lie in (0, 1]");
    if (k_required && r.k == 0)
        fail("k", "is required: neighbours (lle) or basis size (lle-pca), 1.." + width(d));
    if (k_required && !within_d(r.k, d))
        fail("k", std::to_string(r.k) + " (neighbours, or basis size) is outside 1.." + width(d));
    if (!k_required && r.k != 0 && !within_d(r.k, d))
        fail("k", std::to_string(r.k) + " is outside 1.." + width(d));
    if (!(r.reg >= 0 && r.reg <= 1e6))
        fail("reg", short_number(r.reg) + " must lie in [0, 1e6]");
    if (r.knn != "exact" && r.knn != "ivf")
        fail("knn", "'" + r.knn + "' must be exact or ivf");
    if (r.knn != "ivf" && (r.nlist != 0 || r.nprobe != 0))
        fail(r.nlist != 0 ? "nlist" : "nprobe", "applies to knn ivf (the IVF lists)");
    if (r.nlist < 0 || r.nlist > (int64_t{1} << 31))
        fail("nlist", std::to_string(r.nlist) + " must be 0 (automatic) or 1..|V_C| IVF lists");
    if (r.nprobe < 0 || (r.nlist > 0 && r.nprobe > r.nlist) || r.nprobe > (int64_t{1} << 31))
        fail("nprobe", std::to_string(r.nprobe) + " must be 0 (automatic) or 1..nlist" +
                           (r.nlist > 0 ? " = " + std::to_string(r.nlist) : std::string()) +
                           " lists searched per rare row");
    if (r.coverage_task.empty() != r.coverage_data.empty())
        fail(r.coverage_task.empty() ? "coverage_data" : "coverage_task",
             "goes with coverage_task and coverage_data together (a task and its file)");
    if (!r.coverage_task.empty() && !is_known_task(r.coverage_task))
        fail("coverage_task", "'" + r.coverage_task + "' must be one of " + task_names);
}

std::string describe_partial_sparse(const CompressionRequest& r)
{
    // Appended piece by piece: GCC 12's -Wrestrict misfires on one long sum of strings.
    std::string what = r.method;
    what += " keep ";
    what += short_number(r.keep_ratio);
    if (r.k > 0) {
        what += ", k ";
        what += std::to_string(r.k);
    }
    if (r.knn == "ivf") {
        what += ", ivf";
        if (r.nlist > 0) {
            what += ' ';
            what += std::to_string(r.nlist);
        }
        if (r.nprobe > 0) {
            what += '/';
            what += std::to_string(r.nprobe);
        }
    }
    return what;
}

// Keep ratios x ks (paper Tables 5-9); lle-unk has no k (1 stands in).
std::vector<CompressionRequest> sweep_settings(const SweepValues& values, const CompressionRequest& base,
                                               int64_t d, bool k_required)
{
    const auto ratios = values.numbers("--keep-ratios", 0, 1);
    auto ks = values.integers("--ks", 1, d);
    if (ratios.empty() || (ks.empty() && k_required))
        throw InputError("sweep: --method " + base.method +
                         " needs --keep-ratios R1,R2,.. and --ks K1,K2,..");
    if (ks.empty())
        ks = {1};
    std::vector<CompressionRequest> out;
    for (double ratio : ratios)
        for (int64_t k : ks) {
            CompressionRequest request = base;
            request.keep_ratio = ratio;
            request.k = k;
            out.push_back(std::move(request));
        }
    return out;
}

// What sets the family's members apart.
struct Member {
    Method id;
    const char* name;
    const char* summary;
    bool neighbour_search; // lle proper is the one with a neighbour search
    bool k_required;
    FieldDoc k; // k as the member reads it: lle's neighbours, lle-pca's basis size, lle-unk's optional k
    std::vector<int64_t> protocol_ks;
};

MethodDescriptor partial_sparse(Member m)
{
    std::vector<std::string> fields{"freq_text",     "keep_ratio",    "k",    "reg",
                                    "coverage_task", "coverage_data", "store"};
    if (m.neighbour_search)
        fields.insert(fields.end(), {"knn", "nlist", "nprobe"});
    const bool k_required = m.k_required;
    return {
        .id = m.id,
        .name = m.name,
        .part = CompressedPart::TokenEmbedding,
        .summary = m.summary,
        .needs_frequency_text = true,
        .tied_head_from_factors = true,
        .lora = true,
        .classifier_protocol_ks = std::move(m.protocol_ks),
        .stored_as = m.name,
        .fields = std::move(fields),
        .check = [k_required](const CompressionRequest& r, int64_t d,
                              const RequestFail& fail) { check_partial_sparse(r, d, fail, k_required); },
        .describe = describe_partial_sparse,
        .sweep = {.options = {"--keep-ratios", "--ks"},
                  .usage = std::string("--keep-ratios R1,R2,..") + (k_required ? " and --ks K1,K2,.." : ""),
                  .settings =
                      [k_required](const SweepValues& values, const CompressionRequest& base, int64_t d) {
                          return sweep_settings(values, base, d, k_required);
                      }},
        .field_docs = {{"k", std::move(m.k)}},
        .example = k_required ? R"({"freq_text": "FILE", "keep_ratio": 0.5, "k": 8})"
                              : R"({"freq_text": "FILE", "keep_ratio": 0.5})"};
}

// 1..n: the LLE paper's k range for its classifier protocol.
std::vector<int64_t> one_to(int64_t n)
{
    std::vector<int64_t> ks;
    for (int64_t k = 1; k <= n; ++k)
        ks.push_back(k);
    return ks;
}

} // namespace

MethodDescriptor lle()
{
    return partial_sparse({.id = Method::LLE,
                           .name = "lle",
                           .summary = "rare rows as LLE mixtures of common rows (METHODS 2)",
                           .neighbour_search = true,
                           .k_required = true,
                           .k = default_field_doc("k"),
                           .protocol_ks = one_to(5)}); // the paper's section 3.3
}

MethodDescriptor lle_unk()
{
    FieldDoc k = default_field_doc("k");
    k.help = "neighbours averaged into the fallback row";
    k.zero = "the mean of V_C";
    k.required = false;
    return partial_sparse({.id = Method::LLEUnk,
                           .name = "lle-unk",
                           .summary = "rare rows replaced by one fallback row (METHODS 2)",
                           .neighbour_search = false,
                           .k_required = false,
                           .k = std::move(k),
                           .protocol_ks = one_to(5)});
}

MethodDescriptor lle_pca()
{
    FieldDoc k = default_field_doc("k");
    k.label = "Basis size k";
    k.help = "principal directions of the whole table a rare row is written in";
    return partial_sparse({.id = Method::LLEPCA,
                           .name = "lle-pca",
                           .summary = "rare rows in the table's top-k PCA basis (METHODS 2)",
                           .neighbour_search = false,
                           .k_required = true,
                           .k = std::move(k),
                           .protocol_ks = one_to(10)}); // the PCA baseline's, section 3.4
}

} // namespace embedlab::method_rows

namespace embedlab::method_rows {

namespace {

enum class RareRows { Neighbours, Fallback, Basis }; // lle, lle-unk, lle-pca

// <form>.common_ids [C] and .common_rows [C, d], then how rare rows are rebuilt: lle's
// neighbour_ids, weights [R, k] and norms [R]; lle-unk's fallback [d]; lle-pca's mean
// [d], basis [k, d] and coords [R, k]. <form>.rare_ids [R] only before issue 36 (now
// the complement of the common ids).
StoredForm partial_sparse_form(const char* name, RareRows rare_rows)
{
    return {.name = name,
            .layout = [form = std::string(name), rare_rows](const StoredBlock& b, TableLayout& t) {
                const int64_t common = b.integer("common"), rare = b.integer("rare");
                const int64_t k = rare_rows == RareRows::Fallback ? 0 : b.integer("k");
                // Compared without adding, so huge counts cannot overflow.
                if (common < 1 || rare < 0 || common > t.rows || rare != t.rows - common)
                    b.fail("common " + std::to_string(common) + " + rare " + std::to_string(rare) +
                           " does not make the " + std::to_string(t.rows) + " rows of the table");
                if (rare_rows != RareRows::Fallback && k < 1)
                    b.fail("k must be at least 1, got " + std::to_string(k));
                const double reg = b.has("reg") ? b.params()["reg"].get<double>() : 0.0;
                const std::string m = form + ".";
                const bool rare_ids_stored = b.lists(m + "rare_ids");
                t.needs(m + "common_ids", {common}, true);
                if (rare_ids_stored)
                    t.needs(m + "rare_ids", {rare}, true);
                t.needs(m + "common_rows", {common, t.dim});
                if (rare_rows == RareRows::Neighbours) {
                    t.needs(m + "neighbour_ids", {rare, k}, true);
                    t.needs(m + "weights", {rare, k});
                    t.needs(m + "norms", {rare});
                } else if (rare_rows == RareRows::Fallback) {
                    t.needs(m + "fallback", {t.dim});
                } else {
                    t.needs(m + "mean", {t.dim});
                    t.needs(m + "basis", {k, t.dim});
                    t.needs(m + "coords", {rare, k});
                }
                t.parameters = {{"k", k}, {"reg", reg}, {"rare_ids_stored", rare_ids_stored}};
            }};
}

} // namespace

StoredForm lle_form()
{
    return partial_sparse_form("lle", RareRows::Neighbours);
}

StoredForm lle_unk_form()
{
    return partial_sparse_form("lle-unk", RareRows::Fallback);
}

StoredForm lle_pca_form()
{
    return partial_sparse_form("lle-pca", RareRows::Basis);
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_ROWS(partial_sparse, .methods = {lle(), lle_unk(), lle_pca()},
                      .forms = {lle_form(), lle_unk_form(), lle_pca_form()})

} // namespace embedlab::method_rows
