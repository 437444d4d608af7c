// Frequency-aware partial sparse coding of rare-token rows (LLE), METHODS.md 2,
// with its `unk` and `pca` baselines on the same common/rare split.
//
//   auto ids = tokenizer.encode(read_text_file("freq.txt"));
//   auto split = embedlab::split_by_frequency(ids, V, /*keep_ratio=*/0.5, specials);
//   auto fit = embedlab::fit_partial_sparse(table, split, {.kind = PartialSparseKind::LLE, .k = 5});
//   model.set_token_embedding(std::make_shared<embedlab::PartialSparseTokenEmbedding>(fit));
//
// Common rows (V_C) stay exact; each rare row (V_R) is rebuilt at lookup time
// from k common neighbours (LLE), a fallback row (unk) or k PCA coordinates (pca).
// The nearest-neighbour search is exact cosine, done as blocked BLAS products
// with a top-k per block, so the |V_R| x |V_C| similarity matrix is never held.
// Thread safety: functions are reentrant; the embedding is immutable.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct FrequencySplit {
    std::vector<int64_t> counts; // occurrences per token id, size V
    std::vector<int64_t> common; // V_C, ascending ids
    std::vector<int64_t> rare;   // V_R, ascending ids
    int64_t distinct_seen = 0;   // ids with count > 0
    int64_t total_tokens = 0;    // length of the frequency text in tokens
    double keep_ratio = 1.0;
};

// V_C = the top ceil(keep_ratio * distinct_seen) seen ids by count (ties: lower
// id first) plus every id in `specials`; V_R = the rest. InputError for a keep
// ratio outside (0, 1], an empty id list, or ids outside [0, V).
FrequencySplit split_by_frequency(std::span<const int32_t> ids, int64_t vocab_size, double keep_ratio,
                                  const std::vector<int64_t>& specials);

// How the k nearest common rows of each rare row are found: exactly (every
// common row is scored), or by an inverted-file index (IVF) for large V_C:
// spherical k-means puts the unit common rows in `nlist` lists, each rare row
// scores the centroids and compares itself with the members of its `nprobe`
// best lists only. Both rank the final candidates by float64 cosine, ties to
// the lower id; with nprobe = nlist IVF returns the exact neighbours.
enum class KnnKind { Exact, IVF };
const char* knn_kind_name(KnnKind kind);         // "exact", "ivf"
KnnKind parse_knn_kind(const std::string& name); // InputError naming "knn" otherwise

struct KnnOptions {
    KnnKind kind = KnnKind::Exact;
    int64_t nlist = 0;            // ivf: lists, 1..|V_C|; 0: round(2 sqrt(|V_C|))
    int64_t nprobe = 0;           // ivf: lists searched per rare row, 1..nlist; 0: ceil(nlist / 16)
    uint64_t seed = 0;            // ivf: k-means start and the recall sample
    int64_t recall_sample = 1000; // ivf: rare rows searched exactly too, for recall@k (0: none)
};

// What a search did. Exact: kind only. IVF: the lists it used and recall@k, the
// share of the exact k neighbours it returned over `recall_sample` seeded rare rows.
struct KnnReport {
    KnnKind kind = KnnKind::Exact;
    int64_t nlist = 0, nprobe = 0, kmeans_iterations = 0, recall_sample = 0;
    double recall_at_k = 1.0;
    double seconds = 0;        // the search (ivf: k-means, lists and scan)
    double recall_seconds = 0; // the exact search of the sample
};
// nlist and nprobe resolved (0 -> the defaults above); InputError naming nlist or
// nprobe when outside 1..|V_C| or 1..nlist, or for a negative recall sample.
KnnOptions resolved_knn_options(const KnnOptions& options, int64_t common_count);

// Cosine k-nearest common neighbours of every rare row (ties: lower id).
struct NearestCommon {
    torch::Tensor ids;     // [R, k] int64 token ids (members of V_C), best first
    torch::Tensor cosines; // [R, k] float32
    KnnReport knn;
};
NearestCommon nearest_common(const torch::Tensor& table, const std::vector<int64_t>& rare,
                             const std::vector<int64_t>& common, int64_t k, const ProgressFn& progress = {});
NearestCommon nearest_common(const torch::Tensor& table, const std::vector<int64_t>& rare,
                             const std::vector<int64_t>& common, int64_t k, const KnnOptions& knn,
                             const ProgressFn& progress = {});

enum class PartialSparseKind { LLE, Unk, PCA };
const char* partial_sparse_method_name(PartialSparseKind kind); // "lle", "lle-unk", "lle-pca"

struct PartialSparseOptions {
    PartialSparseKind kind = PartialSparseKind::LLE;
    int64_t k = 5;       // LLE: neighbours; pca: basis size
    double reg = 1e-3;   // LLE: G += reg * trace(G) * I (reg alone if trace is 0)
    int64_t unk_id = -1; // unk: the model's unk token, else the mean of V_C is the fallback
    KnnOptions knn;      // LLE: the neighbour search
};

// Token ids as stored on disk (issue 36): int16 while V <= 32768, else int32 (they
// were int64); each counts as one value (METHODS 0) of index_bytes_for(V) bytes.
torch::ScalarType index_dtype(int64_t vocab);
int64_t index_bytes_for(int64_t vocab);

struct PartialSparseFit {
    PartialSparseKind kind = PartialSparseKind::LLE;
    int64_t vocab = 0, dim = 0, k = 0;
    double reg = 0;
    torch::Tensor common_ids; // [C] int64 in memory (stored at index_dtype(V))
    // [R] int64, ascending: the complement of common_ids. Not stored since issue 36;
    // the embedding derives it when undefined (a stored list of an earlier directory
    // is used, its rows put in ascending order).
    torch::Tensor rare_ids;
    torch::Tensor common_rows; // [C, d] float32, exact
    // LLE
    torch::Tensor neighbour_ids; // [R, k] int64 token ids in memory (stored at index_dtype(V))
    torch::Tensor weights;       // [R, k] float32, each row sums to 1
    torch::Tensor norms;         // [R] float32, ||y||
    // unk
    torch::Tensor fallback; // [d] float32
    // pca
    torch::Tensor mean;   // [d]
    torch::Tensor basis;  // [k, d]
    torch::Tensor coords; // [R, k]
    KnnReport knn;        // LLE: how the neighbours were found
    double seconds = 0;
};

// table [V, d] float32. InputError for k < 1, k > |V_C| (LLE) or k > d (pca), an
// empty V_C, or non-finite rows. Zero-norm rows never produce NaN.
PartialSparseFit fit_partial_sparse(const torch::Tensor& table, const FrequencySplit& split,
                                    const PartialSparseOptions& options, const ProgressFn& progress = {});

class PartialSparseTokenEmbedding final : public TokenEmbedding {
public:
    // Checks that the tensors agree (ids partition 0..V-1, shapes); InputError otherwise.
    explicit PartialSparseTokenEmbedding(PartialSparseFit fit);
    int64_t vocab_size() const override { return fit_.vocab; }
    int64_t dim() const override { return fit_.dim; }
    torch::Tensor lookup(const torch::Tensor& ids) const override;
    // Tied head: the rare rows are rebuilt once per call, then one product.
    torch::Tensor project(const torch::Tensor& hidden) const override;
    torch::Tensor rebuilt_rows() const override; // common rows and rebuilt rare rows
    std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const override; // onnx_export.hpp
    // The head as project(): every rare row rebuilt once, one product.
    std::string onnx_project(onnx::Graph& graph, const std::string& hidden) const override;
    // |V_C| d + |V_C| common ids + per rare token: LLE 2k + 1, unk 0 (+ d for the
    // fallback), pca k (+ k d + d). Every stored value, ids included (issue 36).
    int64_t parameter_count() const override;
    // The stored ids among them: |V_C| common ids, plus R k neighbour ids for LLE.
    int64_t index_values() const;
    std::string kind() const override { return partial_sparse_method_name(fit_.kind); }
    std::vector<std::pair<std::string, torch::Tensor>>
    stored_tensors() const override; // <kind>.common_ids ...
    const PartialSparseFit& fit() const { return fit_; }
    // Rebuilt rows of the given rare-slot range [first, first + count) -> [count, d].
    torch::Tensor rare_rows(int64_t first, int64_t count) const;

private:
    torch::Tensor neighbour_slots() const; // LLE: the neighbours' common slots [R, k]

    PartialSparseFit fit_;
    torch::Tensor slot_; // [V] int64: >= 0 common slot, < 0: -(rare slot) - 1
};

// LLE weights of one row (METHODS 2), as the fit computes and stores them (float32
// weights, returned as float64): y [d] and its k neighbour rows [k, d], both
// unnormalised; G on the unit-norm rows, G += reg * trace(G) * I (reg if the trace
// is 0), G w = 1, alpha = w / sum(w). Returns alpha [k] float64 (uniform if the
// solve degenerates). The rebuilt row is ||y|| * normalise(sum alpha_j x_j^n).
torch::Tensor lle_weights(const torch::Tensor& y, const torch::Tensor& neighbours, double reg);

// Coverage of an evaluation text by V_C (paper Tables 5 and 6).
struct Coverage {
    double token_coverage = 0; // share of the text's tokens whose id is in V_C
    double line_coverage = 0;  // share of non-empty lines made only of V_C tokens
    int64_t tokens = 0, lines = 0;
};
Coverage coverage_of(const FrequencySplit& split, const Tokenizer& tokenizer, const std::string& text);

// Coverage of a dataset's examples by V_C, counted per example (LLE paper Tables 5
// and 6): each example is encoded on its own; token coverage over all their tokens,
// example coverage the share of examples made only of V_C tokens.
struct ExampleCoverage {
    double token_coverage = 0;
    double example_coverage = 0;
    int64_t tokens = 0, examples = 0;
};
ExampleCoverage coverage_of_examples(const FrequencySplit& split, const Tokenizer& tokenizer,
                                     const std::vector<std::string>& examples);

} // namespace embedlab
