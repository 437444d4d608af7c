// Per-token Tensor-Train embeddings (TensorSLM), METHODS.md 5.
//
//   auto fit = embedlab::fit_tensor_train(table, {.shape = {8, 8, 12}, .ranks = {1, 4, 4, 1}});
//   model.set_token_embedding(std::make_shared<embedlab::TensorTrainTokenEmbedding>(fit));
//
// Each row x (length d = prod I_k) is tensorised little-endian (eq. 6:
// X[i_1..i_N] = x[i_1 + i_2 I_1 + ...]) and decomposed by TT-SVD (Oseledets'
// Algorithm 1). The whole vocabulary is processed at once: every step's small
// SVDs run as float64 eigendecompositions of the smaller Gram side, in parallel
// over tokens. Ranks are fixed, or chosen from an accuracy eps. With eps every
// token keeps the ranks its own TT-SVD needs (TensorSLM eq. 14 sums ranks per
// token): each core holds every token's own r_{k-1} x I_k x r_k values packed one
// token after the other (issue 36: no zero padding, in memory or on disk), with
// each token's ranks stored beside them (int32, one value each); the offsets are
// derived from the ranks. Lookups and the tied head contract only a token's own
// ranks. Directories written before issue 36 hold the cores padded with zeros to
// each position's largest rank; they still load (and are packed on load).
// `uniform_ranks` instead gives every token the largest rank any token needs at
// each position (one rank set, as before issue 20).
// Thread safety: fit_tensor_train is reentrant; the embedding is immutable.
#pragma once

#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct TensorTrainOptions {
    std::vector<int64_t> shape; // I_1..I_N, product d
    std::vector<int64_t> ranks; // r_0..r_N with r_0 = r_N = 1; empty: chosen from eps
    double eps = 0;             // in (0, 1) when ranks is empty
    bool uniform_ranks = false; // eps: one rank set for all tokens (each position's maximum)
};

struct TensorTrainFit {
    std::vector<int64_t> shape;
    std::vector<int64_t> ranks; // per position the largest rank stored (the cores' sizes)
    double eps = 0;             // 0 when ranks were given
    // core k (0-based): [V, r_k, I_{k+1}, r_{k+1}] float32, the conventional TT layout.
    // With per-token ranks (token_ranks defined) core k is packed instead: 1-D float32,
    // token after token, each token's own [r_k, I_{k+1}, r_{k+1}] values row-major.
    std::vector<torch::Tensor> cores;
    // Per-token ranks (eps without uniform_ranks): [V, N - 1] int32, each token's
    // r_1..r_{N-1}. Undefined when every token has `ranks`.
    torch::Tensor token_ranks;
    // eps mode: mean over tokens of the rank each token needed at each inner position.
    std::vector<double> mean_needed_ranks;
    double seconds = 0;
};

// table [V, d] float32. Throws InputError for a bad shape, ranks above their caps,
// eps outside (0, 1), or non-finite rows.
TensorTrainFit fit_tensor_train(const torch::Tensor& table, const TensorTrainOptions& options,
                                const ProgressFn& progress = {});

class TensorTrainTokenEmbedding final : public TokenEmbedding {
public:
    // Checks that the cores agree with each other (InputError naming the core) and,
    // when given, that token_ranks [V, N - 1] lie within the cores' sizes.
    // With token_ranks the cores are either packed (1-D, as TensorTrainFit::cores
    // describes; their lengths must be the tokens' own sizes) or, as written before
    // issue 36, padded [V, r_k, I_{k+1}, r_{k+1}] (repacked here, the padding dropped).
    // A core passed as the only handle to its own float32 storage (moved in) is
    // rearranged into the lookup layout in place instead of copied: a fitted table
    // is then held once, not twice (issue 21's memory bound).
    TensorTrainTokenEmbedding(std::vector<int64_t> shape, std::vector<torch::Tensor> cores,
                              const torch::Tensor& token_ranks = {});
    explicit TensorTrainTokenEmbedding(const TensorTrainFit& fit);
    // Takes the fit's cores (fit.cores is left empty).
    explicit TensorTrainTokenEmbedding(TensorTrainFit&& fit);

    int64_t vocab_size() const override { return vocab_; }
    int64_t dim() const override { return dim_; }
    // Contracts only the looked-up tokens' cores.
    torch::Tensor lookup(const torch::Tensor& ids) const override;
    // Tied head: rows are contracted block by block and multiplied into the
    // logits, so no V x d table is ever held.
    torch::Tensor project(const torch::Tensor& hidden) const override;
    torch::Tensor rebuilt_rows() const override; // every row contracted
    std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const override; // onnx_export.hpp
    // Per-token ranks: each token's own core values plus its N - 1 stored ranks,
    // exactly the elements packed_cores() and token_ranks() hold.
    int64_t parameter_count() const override;
    std::string kind() const override { return "tt"; }
    std::vector<std::pair<std::string, torch::Tensor>> stored_tensors() const override; // tt.core<k> ...
    bool rows_built_alone() const override { return true; } // each token's cores contracted on their own

    const std::vector<int64_t>& shape() const { return shape_; }
    std::vector<int64_t> ranks() const; // per position, the cores' (largest) ranks
    bool per_token_ranks() const { return !token_ranks_.empty(); }
    // [V, N - 1] int32 (a copy); undefined without per-token ranks.
    torch::Tensor token_ranks() const;
    // The cores in the conventional layout [V, r_k, I_{k+1}, r_{k+1}] (a copy; with
    // per-token ranks padded with zeros to ranks(), as the layout needs).
    std::vector<torch::Tensor> cores() const;
    // Per-token ranks: the packed cores as stored (TensorTrainFit::cores), a copy;
    // otherwise cores().
    std::vector<torch::Tensor> packed_cores() const;

private:
    // rows [first, first + count) -> [count, d] into `out` (contiguous float32).
    void contract_rows(const int64_t* ids, int64_t count, float* out) const;
    // Construction: 4-D cores (uniform, or padded per-token ones); 1-D packed cores.
    void build_padded(std::vector<torch::Tensor> cores);
    void build_packed(std::vector<torch::Tensor> cores, const torch::Tensor& token_ranks);
    // Padded per-token cores (written before issue 36) repacked without the padding.
    void pack_padded(const torch::Tensor& token_ranks);
    // token_ranks_, offsets_ and largest_ from [V, N - 1] ranks within `limits`.
    void read_token_ranks(const torch::Tensor& token_ranks, const std::vector<int64_t>& limits,
                          const char* what);
    int64_t token_rank(int64_t t, int64_t k) const; // r_k of token t (r_0 = r_N = 1)

    std::vector<int64_t> shape_;
    // Only one copy of the cores is held, in the layout the contraction reads:
    // core k as [V, r_{k+1}, I_{k+1}, r_k]; with per-token ranks 1-D, each token's
    // own [r_{k+1}, I_{k+1}, r_k] at offsets_[k][t].
    std::vector<torch::Tensor> kernel_;
    std::vector<std::vector<int64_t>> offsets_; // per-token: N lists of V + 1
    std::vector<int64_t> largest_;              // r_0..r_N, each position's largest
    // Row-major [V, N - 1]: token t's r_1..r_{N-1}; empty when all share ranks().
    std::vector<int32_t> token_ranks_;
    int64_t vocab_ = 0, dim_ = 0;
    int64_t buffer_ = 1; // floats per contraction scratch buffer
    int64_t parameters_ = 0;
};

} // namespace embedlab
