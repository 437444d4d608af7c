// lle, lle-unk, lle-pca (METHODS 2): the common rows kept, each rare row rebuilt from
// its k nearest common rows (lle), one fallback row (lle-unk) or its coordinates in the
// top-k principal directions of the whole table E (lle-pca; METHODS 2: all rows, not
// only the common ones).
#include "embedlab/partial_sparse.hpp"
#include "embedlab/text_format.hpp"
#include "methods/table_method_support.hpp"

namespace embedlab::table_support {

namespace {

class PartialSparseMethod final : public TableMethod {
public:
    PartialSparseMethod(Method id, PartialSparseKind kind) : id_(id), kind_(kind) {}
    std::string name() const override { return method_descriptor(id_).name; }
    double fit_work(const CompressionRequest& r, double v, double d) const override
    {
        return 2 * (1 - r.keep_ratio) * r.keep_ratio * v * v * d; // the exact kNN products
    }

    void conventions(const EmbeddingAccounting&, nlohmann::ordered_json& c) const override
    {
        // METHODS 2 counts the rare tokens' values; the common rows' ids are stored too.
        const char* rare =
            kind_ == PartialSparseKind::LLE   ? "2k + 1 values per rare token (k neighbour slots, "
                                                "k weights, its norm; METHODS 2)"
            : kind_ == PartialSparseKind::Unk ? "one fallback row of d values"
                                              : "k coordinates per rare token plus the basis (k d) "
                                                "and its mean (d)";
        c["params"] =
            std::string("the |V_C| common rows (|V_C| d) and their |V_C| ids (one index value each), "
                        "then ") +
            rare;
    }

    void complete_spec(CompressionSpec& spec, const CompressionRequest& r, int64_t) const override
    {
        if (kind_ == PartialSparseKind::LLE) // its neighbour search (lle-unk, lle-pca have none)
            spec.knn = {.kind = parse_knn_kind(r.knn), .nlist = r.nlist, .nprobe = r.nprobe, .seed = r.seed};
    }

    void fit(const torch::Tensor& table, CompressedEmbedding& out, int64_t model_params,
             const ProgressFn& progress) const override
    {
        const auto& spec = out.spec;
        const int64_t V = table.size(0), d = table.size(1);
        if (!spec.split)
            throw InputError("method '" + spec.method +
                             "' needs a frequency split (--freq-text and --keep-ratio)");
        auto fit = fit_partial_sparse(
            table, *spec.split,
            {.kind = kind_, .k = spec.k, .reg = spec.reg, .unk_id = spec.unk_id, .knn = spec.knn}, progress);
        out.fit_seconds = fit.seconds;
        const auto knn = knn_json(fit.knn);
        auto embedding = std::make_shared<PartialSparseTokenEmbedding>(std::move(fit));
        out.fit = {{"common", spec.split->common.size()},
                   {"rare", spec.split->rare.size()},
                   {"rare_cosine", rare_cosine_json(table, *embedding)},
                   // METHODS 0: a tied head must not keep a dense copy.
                   {"tied_head", "logits use the rebuilt table, rebuilt once per forward call from the "
                                 "stored common rows and rare-token codes; no dense copy is kept, so a tied "
                                 "model keeps the whole saving"}};
        if (kind_ == PartialSparseKind::LLE)
            out.fit["knn"] = knn;
        // A rare row is a weighted sum of k common rows (lle), the shared unk row (lle-unk) or
        // z P + mu of rank k (lle-pca); common rows are read. The tied head rebuilds the R
        // rare rows once, then multiplies with all V.
        const int64_t rare = static_cast<int64_t>(spec.split->rare.size());
        // LLE as rebuild_rare runs it: each neighbour row normalised (2d for its norm,
        // 2d to add it weighted), then the sum's norm (2d) and the rescale (d): 4 k d + 3 d.
        const int64_t rare_lookup = kind_ == PartialSparseKind::LLE   ? 4 * spec.k * d + 3 * d
                                    : kind_ == PartialSparseKind::Unk ? 0
                                                                      : 2 * spec.k * d + d;
        out.accounting = account_stored(spec.method, V, d, embedding->parameter_count(), model_params,
                                        rare_lookup, rare * rare_lookup + 2 * V * d);
        out.accounting.index_values = embedding->index_values();
        out.accounting.index_bytes = out.accounting.index_values * index_bytes_for(V);
        out.fit["flops_lookup_note"] = "flops_lookup is a rare token's; a common token's row is read (0)";
        out.embedding = std::move(embedding);
    }

    void spec_fields(const CompressionSpec& spec, nlohmann::ordered_json& j) const override
    {
        j["k"] = spec.k;
        if (kind_ == PartialSparseKind::LLE)
            j["reg"] = spec.reg;
        if (kind_ == PartialSparseKind::LLE &&
            spec.knn.kind == KnnKind::IVF) { // 0: automatic (fit.knn: as run)
            j["knn"] = knn_kind_name(spec.knn.kind);
            j["nlist"] = spec.knn.nlist;
            j["nprobe"] = spec.knn.nprobe;
        }
        if (kind_ == PartialSparseKind::Unk)
            j["unk_id"] = spec.unk_id;
        if (spec.split) {
            j["keep_ratio"] = spec.split->keep_ratio;
            j["common"] = spec.split->common.size();
            j["rare"] = spec.split->rare.size();
        }
    }

    std::vector<std::string> fit_summary(const CompressedEmbedding& c) const override
    {
        std::vector<std::string> lines;
        const auto& f = c.fit;
        if (f.contains("rare_cosine") && f["rare_cosine"].contains("mean"))
            lines.push_back(format_number("%lld", f.value("common", int64_t{0})) + " common, " +
                            format_number("%lld", f.value("rare", int64_t{0})) +
                            " rare rows; rare-row cosine mean " +
                            format_number("%.6f", f["rare_cosine"].value("mean", 0.0)) + " (p05 " +
                            format_number("%.4f", f["rare_cosine"].value("p05", 0.0)) + ", p50 " +
                            format_number("%.4f", f["rare_cosine"].value("p50", 0.0)) + ")");
        if (f.contains("knn") && f["knn"].value("kind", "") == "ivf" && f["knn"].contains("recall_at_k")) {
            const auto& k = f["knn"];
            lines.push_back("neighbours: ivf, " + format_number("%lld", k.value("nprobe", int64_t{0})) +
                            " of " + format_number("%lld", k.value("nlist", int64_t{0})) +
                            " lists searched per rare row; recall@k " +
                            format_number("%.4f", k.value("recall_at_k", 0.0)) +
                            " against the exact search on " +
                            format_number("%lld", k.value("recall_sample", int64_t{0})) + " rare rows");
        }
        return lines;
    }

    std::string parameters(const CompressionSpec& s) const override
    {
        return "keep " + short_number(s.split->keep_ratio) +
               (kind_ == PartialSparseKind::Unk ? "" : ", k " + std::to_string(s.k)) + ", " +
               std::to_string(s.split->rare.size()) + " rare";
    }

private:
    Method id_;
    PartialSparseKind kind_;
};

} // namespace

EMBEDLAB_TABLE_METHOD_INSTANCE(lle_method, PartialSparseMethod, Method::LLE, PartialSparseKind::LLE)

EMBEDLAB_TABLE_METHOD_INSTANCE(lle_unk_method, PartialSparseMethod, Method::LLEUnk, PartialSparseKind::Unk)

EMBEDLAB_TABLE_METHOD_INSTANCE(lle_pca_method, PartialSparseMethod, Method::LLEPCA, PartialSparseKind::PCA)

// lle, lle-unk and lle-pca's stored forms (request_partial_sparse.cpp): the common rows
// and ids, and the rare rows' rebuild; the embedding checks the ids and derives the rare
// list (stored too before issue 36).
std::vector<StoredFormRebuild> partial_sparse_rebuilds()
{
    std::vector<StoredFormRebuild> out;
    for (const auto kind : {PartialSparseKind::LLE, PartialSparseKind::Unk, PartialSparseKind::PCA}) {
        const std::string m = partial_sparse_method_name(kind) + std::string(".");
        out.push_back({.form = partial_sparse_method_name(kind),
                       .rebuild = [kind, m](const TableLayout& t, StoredTensors& f) {
                           const auto& p = t.parameters;
                           PartialSparseFit fit{.kind = kind,
                                                .vocab = t.rows,
                                                .dim = t.dim,
                                                .k = p.at("k").get<int64_t>(),
                                                .reg = p.at("reg").get<double>()};
                           fit.common_ids = f.at(m + "common_ids");
                           if (p.at("rare_ids_stored").get<bool>())
                               fit.rare_ids = f.at(m + "rare_ids");
                           fit.common_rows = f.at(m + "common_rows");
                           if (kind == PartialSparseKind::LLE) {
                               fit.neighbour_ids = f.at(m + "neighbour_ids");
                               fit.weights = f.at(m + "weights");
                               fit.norms = f.at(m + "norms");
                           } else if (kind == PartialSparseKind::Unk) {
                               fit.fallback = f.at(m + "fallback");
                           } else {
                               fit.mean = f.at(m + "mean");
                               fit.basis = f.at(m + "basis");
                               fit.coords = f.at(m + "coords");
                           }
                           return std::make_shared<PartialSparseTokenEmbedding>(std::move(fit));
                       }});
    }
    return out;
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_TABLES(partial_sparse, .methods = {&lle_method(), &lle_unk_method(), &lle_pca_method()},
                        .rebuilds = partial_sparse_rebuilds())

} // namespace embedlab::table_support

namespace embedlab {

// Ids at the width V needs; the rare list is the common one's complement (issue 36).
std::vector<std::pair<std::string, torch::Tensor>> PartialSparseTokenEmbedding::stored_tensors() const
{
    const auto& f = fit_;
    const std::string p = kind() + ".";
    std::vector<std::pair<std::string, torch::Tensor>> out;
    out.emplace_back(p + "common_ids", f.common_ids.to(index_dtype(f.vocab)));
    out.emplace_back(p + "common_rows", f.common_rows);
    if (f.kind == PartialSparseKind::LLE) {
        out.emplace_back(p + "neighbour_ids", f.neighbour_ids.to(index_dtype(f.vocab)));
        out.emplace_back(p + "weights", f.weights);
        out.emplace_back(p + "norms", f.norms);
    } else if (f.kind == PartialSparseKind::Unk) {
        out.emplace_back(p + "fallback", f.fallback);
    } else {
        out.emplace_back(p + "mean", f.mean);
        out.emplace_back(p + "basis", f.basis);
        out.emplace_back(p + "coords", f.coords);
    }
    return out;
}

} // namespace embedlab
