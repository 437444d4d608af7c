#include "embedlab/tensor_train.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <utility>

#include <Eigen/Dense>

#include "embedlab/accounting.hpp"
#include "embedlab/parallel_for.hpp"
#include "io/onnx_graph.hpp"
#include "methods/table_checks.hpp"

namespace embedlab {

namespace {

using Eigen::MatrixXd;

std::string join(const std::vector<int64_t>& v)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i)
        s += (i ? "," : "") + std::to_string(v[i]);
    return s;
}

// Reused buffers of one worker: TT-SVD of one row at a time allocates nothing.
struct TokenWorkspace {
    std::vector<double> current, next;
    std::vector<float> scratch;
    // One Gram matrix and solver per step: sizes differ between steps.
    std::vector<MatrixXd> gram;
    std::vector<Eigen::SelfAdjointEigenSolver<MatrixXd>> solver;
    explicit TokenWorkspace(size_t steps) : gram(steps), solver(steps) {}
};

// Rank that keeps the discarded energy within delta2 (eigenvalues ascending).
int64_t needed_rank(const Eigen::VectorXd& ascending, double delta2)
{
    const int64_t n = ascending.size();
    double tail = 0;
    int64_t r = n;
    // Drop the smallest values while their sum stays within the bound.
    for (int64_t j = 0; j < n - 1; ++j) {
        tail += std::max(0.0, ascending(j));
        if (tail > delta2)
            break;
        r = n - 1 - j;
    }
    return std::max<int64_t>(1, r);
}

// One TT-SVD of a single row with ranks r_0..r_N (`ranks`, N + 1 values).
// - probe_step = k: the sweep stops at step k and returns the rank the eps bound
//   (delta2) needs there; earlier steps use `ranks`.
// - choose: each step's rank is the one the eps bound needs, written to ranks[k + 1].
// cores (when not null) receive core k in the layout [r_{k-1}, I_k, r_k] padded to
// the sizes `padded` (zeros beyond this row's ranks must already be in place).
int64_t tt_svd_row(const float* row, const std::vector<int64_t>& shape, int64_t* ranks, bool choose,
                   const int64_t* padded, double delta2, int64_t probe_step, float* const* cores,
                   TokenWorkspace& ws)
{
    const int64_t N = static_cast<int64_t>(shape.size());
    int64_t rest = 1;
    for (auto I : shape)
        rest *= I;
    ws.current.assign(row, row + rest);
    int64_t r_prev = 1;
    for (int64_t k = 0; k + 1 < N; ++k) {
        const int64_t m = r_prev * shape[k];
        rest /= shape[k];
        const int64_t n = rest;
        Eigen::Map<const MatrixXd> M(ws.current.data(), m, n);
        const bool left = m <= n; // decompose the smaller Gram side
        auto& gram = ws.gram[static_cast<size_t>(k)];
        auto& solver = ws.solver[static_cast<size_t>(k)];
        if (left)
            gram.noalias() = M * M.transpose();
        else
            gram.noalias() = M.transpose() * M;
        solver.compute(gram);
        const auto& values = solver.eigenvalues(); // ascending
        if (k == probe_step)
            return needed_rank(values, delta2);
        if (choose)
            ranks[k + 1] = needed_rank(values, delta2);
        const int64_t r = ranks[k + 1];
        const int64_t g = gram.rows();
        const int64_t kept = std::min(r, g); // ranks beyond g are zero padding
        ws.next.assign(static_cast<size_t>(r * n), 0.0);
        Eigen::Map<MatrixXd> C(ws.next.data(), r, n);
        // Probing sweeps recompute earlier steps but keep no cores.
        // U is built column-major (row a + r_{k-1} i) and scattered into the core below.
        ws.scratch.resize(static_cast<size_t>(m * r));
        Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>> U(ws.scratch.data(), m, r);
        U.setZero();
        const auto& vectors = solver.eigenvectors();
        if (left) {
            // U = top r eigenvectors of M M^T, C = U^T M = S V^T.
            for (int64_t j = 0; j < kept; ++j) {
                const auto u = vectors.col(g - 1 - j);
                U.col(j) = u.cast<float>();
                C.row(j).noalias() = u.transpose() * M;
            }
        } else {
            // V = top r eigenvectors of M^T M, C = S V^T, U = M V S^-1.
            const double s_max = std::sqrt(std::max(0.0, values(g - 1)));
            for (int64_t j = 0; j < kept; ++j) {
                const auto v = vectors.col(g - 1 - j);
                const double s = std::sqrt(std::max(0.0, values(g - 1 - j)));
                C.row(j) = s * v.transpose();
                // A null direction keeps a zero column: its row of C is zero too.
                if (s > 1e-12 * s_max && s > 0)
                    U.col(j) = ((M * v) / s).cast<float>();
            }
        }
        if (float* core = cores ? cores[k] : nullptr) {
            const int64_t I = shape[k], stride = padded[k + 1];
            for (int64_t b = 0; b < r; ++b)
                for (int64_t i = 0; i < I; ++i)
                    for (int64_t a = 0; a < r_prev; ++a)
                        core[(a * I + i) * stride + b] = U(a + r_prev * i, b);
        }
        std::swap(ws.current, ws.next);
        r_prev = r;
    }
    // The last core is what remains: [r_{N-1}, I_N], r_{N-1} fastest.
    if (!cores)
        return 0;
    const int64_t I = shape.back();
    for (int64_t i = 0; i < I; ++i)
        for (int64_t a = 0; a < r_prev; ++a)
            cores[N - 1][a * I + i] = static_cast<float>(ws.current[static_cast<size_t>(a + r_prev * i)]);
    return 0;
}

// Lookups are many tiny products (widths of 8 to 64 floats); fixed widths
// unroll fully, and on x86-64 an AVX2/FMA clone is picked at load time by the CPU's
// features (x86-64-v3: AVX2, FMA). Not "arch=haswell": GCC dispatches that on the CPU
// *being* a Haswell, so every AMD and later Intel core ran the SSE2 default.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define EMBEDLAB_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define EMBEDLAB_INLINE_INTO_CLONE __attribute__((always_inline))
#else
#define EMBEDLAB_SIMD_CLONES
#define EMBEDLAB_INLINE_INTO_CLONE
#endif

// Eight floats as one value (GCC's vector extension): the AVX2 clone holds one in a ymm
// register, the default clone in two xmm; row by row, never across rows with shuffles,
// which is what GCC's own vectoriser chose and cost most of a lookup (issue 63).
// (Never passed or returned by value: its ABI differs with AVX.)
using Float8 = float __attribute__((vector_size(32)));

// Inlined so that each clone compiles it for its own instruction set. The sums run in the
// same order as the scalar loop's (j ascending), so both clones give the same values.
template <int64_t W>
EMBEDLAB_INLINE_INTO_CLONE inline void small_gemm_fixed(const float* B, int64_t q, int64_t r, int64_t ldb,
                                                        const float* K, float* out)
{
    static_assert(W % 8 == 0);
    constexpr int64_t L = W / 8;
    for (int64_t row = 0; row < q; ++row) {
        Float8 acc[L] = {};
        for (int64_t j = 0; j < r; ++j) {
            const float s = B[row * ldb + j];
            for (int64_t x = 0; x < L; ++x) {
                Float8 k;
                std::memcpy(&k, K + j * W + 8 * x, sizeof k);
                acc[x] += s * k;
            }
        }
        std::memcpy(out + row * W, acc, sizeof acc);
    }
}

// small_gemm_fixed<W> for the first W equal to width; false if none is.
template <int64_t... W>
EMBEDLAB_INLINE_INTO_CLONE inline bool small_gemm_any_fixed(const float* B, int64_t q, int64_t r, int64_t ldb,
                                                            const float* K, int64_t width, float* out)
{
    return ((width == W && (small_gemm_fixed<W>(B, q, r, ldb, K, out), true)) || ...);
}

// out [q, width] = B [q, :r] K [:r, width], all row-major, B's rows ldb apart.
EMBEDLAB_SIMD_CLONES
void small_gemm(const float* B, int64_t q, int64_t r, int64_t ldb, const float* K, int64_t width, float* out)
{
    if (small_gemm_any_fixed<8, 16, 24, 32, 48, 64>(B, q, r, ldb, K, width, out))
        return;
    for (int64_t row = 0; row < q; ++row) {
        float* o = out + row * width;
        std::fill(o, o + width, 0.0f);
        for (int64_t j = 0; j < r; ++j) {
            const float s = B[row * ldb + j];
            const float* k = K + j * width;
            for (int64_t x = 0; x < width; ++x)
                o[x] += s * k[x];
        }
    }
}

} // namespace

TensorTrainFit fit_tensor_train(const torch::Tensor& table_in, const TensorTrainOptions& options,
                                const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    const auto& shape = options.shape;
    if (shape.empty())
        throw InputError("TT shape is empty; give factors of d, e.g. 8,8,12 for d = 768");
    if (table_in.dim() != 2)
        throw InputError("the embedding table must be a matrix, got " + std::to_string(table_in.dim()) +
                         " dimensions");
    const int64_t d = table_in.size(1);
    const bool use_eps = options.ranks.empty();
    if (use_eps && !(options.eps > 0 && options.eps < 1))
        throw InputError("TT accuracy eps must lie in (0, 1), got " + std::to_string(options.eps) +
                         " (or give ranks)");
    // Shape first (its product must be d), then the ranks against their caps.
    check_tt_shape_and_ranks(d, shape, use_eps ? std::vector<int64_t>(shape.size() + 1, 1) : options.ranks);
    const auto table = table_in.to(torch::kFloat32).contiguous();
    methods::check_finite_rows(table);
    const int64_t V = table.size(0), N = static_cast<int64_t>(shape.size());
    const float* rows = table.data_ptr<float>();

    TensorTrainFit fit;
    fit.shape = shape;
    fit.eps = use_eps ? options.eps : 0.0;
    std::vector<int64_t> ranks = use_eps ? std::vector<int64_t>(N + 1, 1) : options.ranks;
    const auto caps = tt_rank_caps(shape);
    const double eps2_per_step =
        use_eps && N > 1 ? options.eps * options.eps / static_cast<double>(N - 1) : 0;

    // Rows are recomputed in each sweep instead of stored, so memory stays at the
    // cores' size. Sweeps: uniform eps, one probe per inner position fixing its rank
    // (the largest any token needs); per-token eps, one sweep choosing each token's
    // ranks; then the sweep that writes the cores.
    const bool per_token = use_eps && !options.uniform_ranks;
    const int64_t sweeps = !use_eps ? 1 : per_token ? 2 : N;
    const int64_t block = 4096;
    const int64_t blocks = (V + block - 1) / block;
    int64_t done = 0;
    report_progress(progress, 0, sweeps * blocks);
    auto sweep_tokens = [&](const std::function<void(int64_t, const float*, TokenWorkspace&)>& fn) {
        for (int64_t b = 0; b < blocks; ++b) {
            const int64_t begin = b * block, end = std::min(V, begin + block);
            at::parallel_for(begin, end, 64, [&](int64_t lo, int64_t hi) {
                TokenWorkspace ws(static_cast<size_t>(N));
                for (int64_t t = lo; t < hi; ++t)
                    fn(t, rows + t * d, ws);
            });
            report_progress(progress, ++done, sweeps * blocks);
        }
    };
    auto delta2_of = [&](const float* row) {
        double norm2 = 0;
        for (int64_t i = 0; i < d; ++i)
            norm2 += static_cast<double>(row[i]) * row[i];
        return eps2_per_step * norm2;
    };
    // Per-token mode: token t's r_0..r_N at [t * (N + 1)].
    std::vector<int64_t> own(per_token ? static_cast<size_t>(V * (N + 1)) : 0, 1);
    if (per_token) {
        sweep_tokens([&](int64_t t, const float* row, TokenWorkspace& ws) {
            tt_svd_row(row, shape, own.data() + t * (N + 1), true, nullptr, delta2_of(row), -1, nullptr, ws);
        });
        fit.token_ranks = torch::empty({V, N - 1}, torch::kInt32);
        auto* out = fit.token_ranks.data_ptr<int32_t>();
        for (int64_t k = 1; k < N; ++k) {
            double sum = 0;
            for (int64_t t = 0; t < V; ++t) {
                const int64_t r = own[static_cast<size_t>(t * (N + 1) + k)];
                ranks[k] = std::max(ranks[k], r);
                out[t * (N - 1) + k - 1] = static_cast<int32_t>(r);
                sum += static_cast<double>(r);
            }
            fit.mean_needed_ranks.push_back(sum / static_cast<double>(V));
        }
    } else if (use_eps) {
        for (int64_t step = 0; step + 1 < N; ++step) {
            std::vector<int64_t> needed(static_cast<size_t>(V), 0);
            sweep_tokens([&](int64_t t, const float* row, TokenWorkspace& ws) {
                needed[t] =
                    tt_svd_row(row, shape, ranks.data(), false, nullptr, delta2_of(row), step, nullptr, ws);
            });
            ranks[step + 1] = std::min(caps[step + 1], *std::max_element(needed.begin(), needed.end()));
            fit.mean_needed_ranks.push_back(std::accumulate(needed.begin(), needed.end(), 0.0) /
                                            static_cast<double>(V));
        }
    }
    // The cores: uniform ranks [V, r, I, r]; per-token ranks packed, each token's own
    // r_{k-1} x I_k x r_k values after the previous token's (no padding).
    std::vector<std::vector<int64_t>> offsets(per_token ? static_cast<size_t>(N) : 0);
    std::vector<float*> core_ptrs;
    for (int64_t k = 0; k < N; ++k) {
        if (per_token) {
            auto& off = offsets[static_cast<size_t>(k)];
            off.resize(static_cast<size_t>(V + 1), 0);
            for (int64_t t = 0; t < V; ++t)
                off[static_cast<size_t>(t + 1)] =
                    off[static_cast<size_t>(t)] + own[static_cast<size_t>(t * (N + 1) + k)] * shape[k] *
                                                      own[static_cast<size_t>(t * (N + 1) + k + 1)];
            fit.cores.push_back(torch::empty({off.back()}, torch::kFloat32));
        } else {
            fit.cores.push_back(torch::empty({V, ranks[k], shape[k], ranks[k + 1]}, torch::kFloat32));
        }
        core_ptrs.push_back(fit.cores.back().data_ptr<float>());
    }
    sweep_tokens([&](int64_t t, const float* row, TokenWorkspace& ws) {
        std::vector<float*> ptrs(static_cast<size_t>(N));
        for (int64_t k = 0; k < N; ++k)
            ptrs[k] = core_ptrs[k] + (per_token ? offsets[static_cast<size_t>(k)][static_cast<size_t>(t)]
                                                : t * ranks[k] * shape[k] * ranks[k + 1]);
        std::vector<int64_t> row_ranks =
            per_token ? std::vector<int64_t>(own.begin() + t * (N + 1), own.begin() + (t + 1) * (N + 1))
                      : ranks;
        // A packed token's rows are its own r_k apart; every value is written.
        tt_svd_row(row, shape, row_ranks.data(), false, row_ranks.data(), 0, -1, ptrs.data(), ws);
    });
    fit.ranks = ranks;
    fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return fit;
}

// --- the embedding --------------------------------------------------------------

TensorTrainTokenEmbedding::TensorTrainTokenEmbedding(const TensorTrainFit& fit)
    : TensorTrainTokenEmbedding(fit.shape, fit.cores, fit.token_ranks)
{
}

TensorTrainTokenEmbedding::TensorTrainTokenEmbedding(TensorTrainFit&& fit)
    : TensorTrainTokenEmbedding(fit.shape, std::exchange(fit.cores, {}), fit.token_ranks)
{
}

namespace {

// Whether `c` is the only handle to a float32 storage of exactly its own elements.
bool sole_owner(const torch::Tensor& c)
{
    return c.scalar_type() == torch::kFloat32 && c.is_contiguous() && c.storage_offset() == 0 &&
           c.use_count() == 1 && c.storage().use_count() == 1 &&
           c.storage().nbytes() == static_cast<size_t>(c.numel()) * sizeof(float);
}

// One token's slice [r_in, I, r_out] -> [r_out, I, r_in] where it is (via `slice`);
// false when a value is not finite.
bool permute_slice(float* p, int64_t r_in, int64_t I, int64_t r_out, std::vector<float>& slice)
{
    const int64_t n = r_in * I * r_out;
    slice.assign(p, p + n);
    for (float v : slice)
        if (!std::isfinite(v))
            return false;
    for (int64_t a = 0; a < r_in; ++a)
        for (int64_t i = 0; i < I; ++i)
            for (int64_t b = 0; b < r_out; ++b)
                p[(b * I + i) * r_in + a] = slice[static_cast<size_t>((a * I + i) * r_out + b)];
    return true;
}

// Every token's slice of `data` into the kernel layout, `at(t)` giving its offset and
// ranks; false when a value is not finite (the data is then left partly rearranged:
// only for a core nobody else holds, or a copy).
template <class At> bool permute_tokens_in_place(float* data, int64_t V, int64_t I, At&& at)
{
    std::atomic<bool> finite{true};
    at::parallel_for(0, V, 256, [&](int64_t lo, int64_t hi) {
        std::vector<float> slice;
        for (int64_t t = lo; t < hi && finite.load(std::memory_order_relaxed); ++t) {
            const auto [offset, r_in, r_out] = at(t);
            if (!permute_slice(data + offset, r_in, I, r_out, slice)) {
                finite = false;
                return;
            }
        }
    });
    return finite;
}

// Core [V, r_in, I, r_out] -> the kernel [V, r_out, I, r_in] in its own storage.
bool permute_core_in_place(torch::Tensor& c)
{
    const int64_t r_in = c.size(1), I = c.size(2), r_out = c.size(3), n = r_in * I * r_out;
    return permute_tokens_in_place(c.data_ptr<float>(), c.size(0), I, [&](int64_t t) {
        return std::tuple<int64_t, int64_t, int64_t>{t * n, r_in, r_out};
    });
}

// One token's core from the kernel's (r_out, I, r_in) order to (r_in, I, r_out) with
// rows of stride row >= r_out (zero-padded cores use the largest rank).
void core_in_rank_order(const float* p, float* q, int64_t r_in, int64_t I, int64_t r_out, int64_t row)
{
    for (int64_t a = 0; a < r_in; ++a)
        for (int64_t i = 0; i < I; ++i)
            for (int64_t b = 0; b < r_out; ++b)
                q[(a * I + i) * row + b] = p[(b * I + i) * r_in + a];
}

} // namespace

TensorTrainTokenEmbedding::TensorTrainTokenEmbedding(std::vector<int64_t> shape,
                                                     std::vector<torch::Tensor> cores,
                                                     const torch::Tensor& token_ranks)
    : shape_(std::move(shape))
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    if (N == 0 || static_cast<int64_t>(cores.size()) != N)
        throw InputError("TT embedding: " + std::to_string(cores.size()) + " cores for a shape of " +
                         std::to_string(N) + " factors");
    dim_ = 1;
    for (auto I : shape_)
        dim_ *= I;
    // Packed per-token cores (issue 36) are 1-D; padded ones, and uniform ones, 4-D.
    const bool packed = token_ranks.defined() && cores[0].dim() == 1;
    if (packed) {
        build_packed(std::move(cores), token_ranks);
    } else {
        build_padded(std::move(cores));
        if (token_ranks.defined())
            pack_padded(token_ranks);
    }
    // Widest intermediate of the right-to-left contraction: (I_k..I_N) x r_{k-1}.
    for (int64_t k = 0; k < N; ++k) {
        int64_t trailing = 1;
        for (int64_t j = k; j < N; ++j)
            trailing *= shape_[j];
        buffer_ = std::max(buffer_, trailing * largest_[k]);
    }
    for (const auto& k : kernel_)
        parameters_ += k.numel();
    // Each token's own values, plus its N - 1 stored ranks.
    parameters_ += static_cast<int64_t>(token_ranks_.size());
}

void TensorTrainTokenEmbedding::build_padded(std::vector<torch::Tensor> cores)
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    vocab_ = cores[0].dim() == 4 ? cores[0].size(0) : -1;
    largest_.assign(1, 1);
    int64_t r_prev = 1;
    for (int64_t k = 0; k < N; ++k) {
        const auto& c = cores[static_cast<size_t>(k)];
        const std::string name = "TT core " + std::to_string(k);
        if (c.dim() != 4 || c.size(0) != vocab_ || c.size(1) != r_prev || c.size(2) != shape_[k] ||
            c.size(3) < 1 || (k + 1 == N && c.size(3) != 1))
            throw InputError(name + " has shape [" + join(c.sizes().vec()) + "], expected [" +
                             std::to_string(vocab_) + ", " + std::to_string(r_prev) + ", " +
                             std::to_string(shape_[k]) + ", " + (k + 1 == N ? "1" : "r") + "]");
        r_prev = c.size(3);
        largest_.push_back(r_prev);
        auto& core = cores[static_cast<size_t>(k)];
        if (sole_owner(core)) {
            // Nobody else sees this storage: rearranged where it is, checked on the way.
            if (!permute_core_in_place(core))
                throw InputError(name + " has non-finite values");
            kernel_.push_back(core.view({c.size(0), c.size(3), c.size(2), c.size(1)}));
        } else {
            if (!torch::isfinite(core).all().item<bool>())
                throw InputError(name + " has non-finite values");
            kernel_.push_back(core.to(torch::kFloat32).permute({0, 3, 2, 1}).contiguous());
        }
        core = torch::Tensor(); // released now (a copied core's source, when this was its last handle)
    }
}

void TensorTrainTokenEmbedding::read_token_ranks(const torch::Tensor& token_ranks,
                                                 const std::vector<int64_t>& limits, const char* what)
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    if (token_ranks.dim() != 2 || token_ranks.size(0) != vocab_ || token_ranks.size(1) != N - 1 ||
        token_ranks.is_floating_point() || token_ranks.is_complex())
        throw InputError("TT token ranks have shape [" + join(token_ranks.sizes().vec()) + "] (" +
                         std::string(c10::toString(token_ranks.scalar_type())) + "), expected [" +
                         std::to_string(vocab_) + ", " + std::to_string(N - 1) + "] integers");
    const auto r = token_ranks.to(torch::kLong).contiguous();
    const int64_t* p = r.data_ptr<int64_t>();
    token_ranks_.resize(static_cast<size_t>(vocab_ * (N - 1)));
    for (int64_t t = 0; t < vocab_; ++t)
        for (int64_t k = 1; k < N; ++k) {
            const int64_t own = p[t * (N - 1) + k - 1];
            if (own < 1 || own > limits[k])
                throw InputError("TT token " + std::to_string(t) + " has rank r_" + std::to_string(k) +
                                 " = " + std::to_string(own) + ", outside [1, " + std::to_string(limits[k]) +
                                 "] (" + what + ")");
            token_ranks_[static_cast<size_t>(t * (N - 1) + k - 1)] = static_cast<int32_t>(own);
        }
    // Core k of token t starts at offsets_[k][t]: the earlier tokens' own sizes.
    offsets_.assign(static_cast<size_t>(N), std::vector<int64_t>(static_cast<size_t>(vocab_ + 1), 0));
    largest_.assign(static_cast<size_t>(N + 1), 1);
    for (int64_t k = 0; k < N; ++k) {
        auto& off = offsets_[static_cast<size_t>(k)];
        for (int64_t t = 0; t < vocab_; ++t) {
            const int64_t r_in = token_rank(t, k), r_out = token_rank(t, k + 1);
            largest_[static_cast<size_t>(k + 1)] = std::max(largest_[static_cast<size_t>(k + 1)], r_out);
            off[static_cast<size_t>(t + 1)] = off[static_cast<size_t>(t)] + r_in * shape_[k] * r_out;
        }
    }
}

void TensorTrainTokenEmbedding::build_packed(std::vector<torch::Tensor> cores,
                                             const torch::Tensor& token_ranks)
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    vocab_ = token_ranks.dim() == 2 ? token_ranks.size(0) : -1;
    read_token_ranks(token_ranks, tt_rank_caps(shape_), "the caps of the shape");
    for (int64_t k = 0; k < N; ++k) {
        auto& core = cores[static_cast<size_t>(k)];
        const std::string name = "TT packed core " + std::to_string(k);
        const int64_t expected = offsets_[static_cast<size_t>(k)].back();
        if (core.dim() != 1 || core.size(0) != expected)
            throw InputError(name + " has shape [" + join(core.sizes().vec()) + "], expected [" +
                             std::to_string(expected) + "] (the tokens' own r_" + std::to_string(k) + " x " +
                             std::to_string(shape_[k]) + " x r_" + std::to_string(k + 1) + ")");
        // A core nobody else holds is rearranged where it is; any other is copied first.
        torch::Tensor kernel =
            sole_owner(core) ? std::move(core) : core.to(torch::kFloat32).contiguous().clone();
        core = torch::Tensor();
        const auto& off = offsets_[static_cast<size_t>(k)];
        if (!permute_tokens_in_place(kernel.data_ptr<float>(), vocab_, shape_[k], [&](int64_t t) {
                return std::tuple<int64_t, int64_t, int64_t>{off[static_cast<size_t>(t)], token_rank(t, k),
                                                             token_rank(t, k + 1)};
            }))
            throw InputError(name + " has non-finite values");
        kernel_.push_back(std::move(kernel));
    }
}

void TensorTrainTokenEmbedding::pack_padded(const torch::Tensor& token_ranks)
{
    // Written before issue 36: each token's values sit in the corner of a padded
    // [r_out, I, r_in] kernel slice; only they are kept.
    const int64_t N = static_cast<int64_t>(shape_.size());
    const std::vector<int64_t> padded = largest_;
    read_token_ranks(token_ranks, padded, "the cores' size");
    for (int64_t k = 0; k < N; ++k) {
        const auto& src = kernel_[static_cast<size_t>(k)];
        const int64_t I = shape_[k], R_out = src.size(1), R_in = src.size(3);
        const auto& off = offsets_[static_cast<size_t>(k)];
        auto packed = torch::empty({off.back()}, torch::kFloat32);
        const float* from = src.data_ptr<float>();
        float* to = packed.data_ptr<float>();
        at::parallel_for(0, vocab_, 256, [&](int64_t lo, int64_t hi) {
            for (int64_t t = lo; t < hi; ++t) {
                const int64_t r_in = token_rank(t, k), r_out = token_rank(t, k + 1);
                const float* p = from + t * R_out * I * R_in;
                float* q = to + off[static_cast<size_t>(t)];
                for (int64_t b = 0; b < r_out; ++b)
                    for (int64_t i = 0; i < I; ++i)
                        for (int64_t a = 0; a < r_in; ++a)
                            q[(b * I + i) * r_in + a] = p[(b * I + i) * R_in + a];
            }
        });
        kernel_[static_cast<size_t>(k)] = std::move(packed);
    }
}

int64_t TensorTrainTokenEmbedding::token_rank(int64_t t, int64_t k) const
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    return k == 0 || k == N ? 1 : token_ranks_[static_cast<size_t>(t * (N - 1) + k - 1)];
}

torch::Tensor TensorTrainTokenEmbedding::token_ranks() const
{
    if (token_ranks_.empty())
        return {};
    const int64_t N = static_cast<int64_t>(shape_.size());
    return torch::from_blob(const_cast<int32_t*>(token_ranks_.data()), {vocab_, N - 1}, torch::kInt32)
        .clone();
}

std::vector<int64_t> TensorTrainTokenEmbedding::ranks() const
{
    return largest_;
}

std::vector<torch::Tensor> TensorTrainTokenEmbedding::cores() const
{
    if (token_ranks_.empty()) {
        std::vector<torch::Tensor> out;
        for (const auto& k : kernel_)
            out.push_back(k.permute({0, 3, 2, 1}).contiguous());
        return out;
    }
    // Padded with zeros to each position's largest rank.
    std::vector<torch::Tensor> out;
    const int64_t N = static_cast<int64_t>(shape_.size());
    for (int64_t k = 0; k < N; ++k) {
        const int64_t I = shape_[k], R_in = largest_[k], R_out = largest_[k + 1];
        auto core = torch::zeros({vocab_, R_in, I, R_out}, torch::kFloat32);
        const float* from = kernel_[static_cast<size_t>(k)].data_ptr<float>();
        float* to = core.data_ptr<float>();
        for (int64_t t = 0; t < vocab_; ++t) {
            const int64_t r_in = token_rank(t, k), r_out = token_rank(t, k + 1);
            const float* p = from + offsets_[static_cast<size_t>(k)][static_cast<size_t>(t)];
            float* q = to + t * R_in * I * R_out;
            core_in_rank_order(p, q, r_in, I, r_out, R_out);
        }
        out.push_back(core);
    }
    return out;
}

std::vector<torch::Tensor> TensorTrainTokenEmbedding::packed_cores() const
{
    if (token_ranks_.empty())
        return cores();
    std::vector<torch::Tensor> out;
    const int64_t N = static_cast<int64_t>(shape_.size());
    for (int64_t k = 0; k < N; ++k) {
        const int64_t I = shape_[k];
        const auto& off = offsets_[static_cast<size_t>(k)];
        auto core = torch::empty({off.back()}, torch::kFloat32);
        const float* from = kernel_[static_cast<size_t>(k)].data_ptr<float>();
        float* to = core.data_ptr<float>();
        at::parallel_for(0, vocab_, 256, [&](int64_t lo, int64_t hi) {
            for (int64_t t = lo; t < hi; ++t) {
                const int64_t r_in = token_rank(t, k), r_out = token_rank(t, k + 1);
                const float* p = from + off[static_cast<size_t>(t)];
                float* q = to + off[static_cast<size_t>(t)];
                core_in_rank_order(p, q, r_in, I, r_out, r_out);
            }
        });
        out.push_back(core);
    }
    return out;
}

int64_t TensorTrainTokenEmbedding::parameter_count() const
{
    return parameters_;
}

void TensorTrainTokenEmbedding::contract_rows(const int64_t* ids, int64_t count, float* out) const
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    std::vector<const float*> base;
    for (const auto& k : kernel_)
        base.push_back(k.data_ptr<float>());
    const bool per_token = !token_ranks_.empty();
    at::parallel_for(0, count, 16, [&](int64_t lo, int64_t hi) {
        std::vector<float> a(static_cast<size_t>(buffer_)), b(a.size());
        for (int64_t t = lo; t < hi; ++t) {
            const int64_t id = ids[t];
            float* dst = out + t * dim_;
            // Core k of this token in the kernel layout [r_out, I, r_in], and its ranks:
            // per token its own (packed, nothing else is stored), else the shared ones.
            auto core = [&](int64_t k, int64_t& r_in, int64_t& r_out) {
                if (per_token) {
                    r_in = token_rank(id, k);
                    r_out = token_rank(id, k + 1);
                    return base[static_cast<size_t>(k)] +
                           offsets_[static_cast<size_t>(k)][static_cast<size_t>(id)];
                }
                const auto& c = kernel_[static_cast<size_t>(k)];
                r_in = c.size(3);
                r_out = c.size(1);
                return base[static_cast<size_t>(k)] + id * c.stride(0);
            };
            // Right to left: B[q, b] (q over the trailing indices, i_N slowest)
            // times core k as [b, (i, a)] gives B'[(q, i), a], so the final
            // buffer is already the little-endian row (eq. 6).
            int64_t r = 0, r_out = 0;
            const float* src = core(N - 1, r, r_out); // r = r_{N-1}
            int64_t q = shape_[N - 1];                // rows of B
            float* cur = N == 1 ? dst : a.data();
            std::copy(src, src + q * r, cur);
            for (int64_t k = N - 2; k >= 0; --k) {
                int64_t r_in = 0;
                const float* K = core(k, r_in, r_out); // r_out == r
                const int64_t I = shape_[k], width = I * r_in;
                float* nxt = k == 0 ? dst : (cur == a.data() ? b.data() : a.data());
                // B'[q, (i, a)] = B[q, b] K[b, (i, a)]: a small GEMM per token.
                small_gemm(cur, q, r_out, r_out, K, width, nxt);
                cur = nxt;
                q *= I;
                r = r_in;
            }
        }
    });
}

torch::Tensor TensorTrainTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    auto flat = ids.reshape({-1}).to(torch::kLong).contiguous();
    if (flat.numel() > 0) {
        const int64_t lo = flat.min().item<int64_t>(), hi = flat.max().item<int64_t>();
        if (lo < 0 || hi >= vocab_)
            throw InputError("token id " + std::to_string(lo < 0 ? lo : hi) +
                             " is outside the vocabulary (V = " + std::to_string(vocab_) + ")");
    }
    auto out = torch::empty({flat.numel(), dim_}, torch::kFloat32);
    contract_rows(flat.data_ptr<int64_t>(), flat.numel(), out.data_ptr<float>());
    auto sizes = ids.sizes().vec();
    sizes.push_back(dim_);
    return out.view(sizes);
}

torch::Tensor TensorTrainTokenEmbedding::rebuilt_rows() const
{
    auto rows = torch::empty({vocab_, dim_}, torch::kFloat32);
    std::vector<int64_t> ids(static_cast<size_t>(vocab_));
    std::iota(ids.begin(), ids.end(), int64_t{0});
    contract_rows(ids.data(), vocab_, rows.data_ptr<float>());
    return rows;
}

torch::Tensor TensorTrainTokenEmbedding::project(const torch::Tensor& hidden) const
{
    const auto h = hidden.to(torch::kFloat32).contiguous();
    const int64_t block = 2048;
    auto logits = torch::empty({h.size(0), vocab_}, torch::kFloat32);
    auto rows = torch::empty({std::min(block, vocab_), dim_}, torch::kFloat32);
    std::vector<int64_t> ids(static_cast<size_t>(block));
    for (int64_t v0 = 0; v0 < vocab_; v0 += block) {
        const int64_t n = std::min(block, vocab_ - v0);
        std::iota(ids.begin(), ids.begin() + n, v0);
        contract_rows(ids.data(), n, rows.data_ptr<float>());
        logits.narrow(1, v0, n).copy_(torch::mm(h, rows.narrow(0, 0, n).t()));
    }
    return logits;
}

// --- ONNX export (onnx_export.hpp) ------------------------------------------------

// Each looked-up token's core k in the kernel layout [r_{k+1}, I_{k+1}, r_k] (what kernel_
// holds), then contract_rows()'s right-to-left products as batched MatMuls. Uniform
// ranks: the cores are stored [V, r_{k+1}, I_{k+1}, r_k] and gathered. Per-token ranks:
// the packed cores are stored as they are (1-D, token after token) with the token ranks
// (int32 [V, N - 1]), exactly what the method stores; the offsets are derived in the
// graph (a running sum of the tokens' own sizes), and each looked-up token's values are
// gathered into a block padded with zeros to the position's largest ranks,
// [n, R_{k+1}, I_{k+1}, R_k], whose zeros add nothing to the products.
std::string TensorTrainTokenEmbedding::onnx_lookup(onnx::Graph& g, const std::string& ids) const
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    const auto flat = g.reshape(ids, {-1}); // [n]
    const bool per_token = !token_ranks_.empty();
    std::string ranks; // [V, N - 1] int64
    if (per_token) {
        ranks = g.cast(g.initializer_once("embed.tt_ranks", [&] { return token_ranks(); }), onnx::kInt64);
    }
    // r_k of every token ([V]) and of the looked-up ones ([n, 1, 1, 1]).
    auto all_ranks = [&](int64_t k) { return g.squeeze(g.slice(ranks, {k - 1}, {k}, {1}), {1}); };
    auto own = [&](const std::string& all) { return g.reshape(g.gather(all, flat), {-1, 1, 1, 1}); };

    // core(k): the looked-up tokens' core k, [n, R_out, I, R_in] float32.
    auto core = [&](int64_t k) {
        const auto& kernel = kernel_[static_cast<size_t>(k)];
        const std::string name = "embed.tt_core" + std::to_string(k);
        if (!per_token)
            return g.gather(g.initializer(name, kernel), flat);
        const int64_t I = shape_[k], R_in = largest_[k], R_out = largest_[k + 1];
        const bool first = k == 0, last = k + 1 == N;
        // Every token's own size r_in I r_out, and where its values start.
        std::string size;
        if (first)
            size = all_ranks(k + 1);
        else if (last)
            size = all_ranks(k);
        else
            size = g.mul(all_ranks(k), all_ranks(k + 1));
        size = g.mul(size, g.int_scalar(I));
        const auto offset = own(g.op("CumSum", {size, g.int_scalar(0)}, {{"exclusive", int64_t{1}}}));
        // Value [b, i, a] of a token's kernel sits at offset + (b I + i) r_in + a.
        std::vector<int64_t> bi(static_cast<size_t>(R_out * I)), a(static_cast<size_t>(R_in)),
            b(static_cast<size_t>(R_out));
        std::iota(bi.begin(), bi.end(), int64_t{0});
        std::iota(a.begin(), a.end(), int64_t{0});
        std::iota(b.begin(), b.end(), int64_t{0});
        const auto r_in = first ? g.int_scalar(1) : own(all_ranks(k));
        const auto a_at = g.reshape(g.ints(a), {1, 1, 1, R_in});
        auto index = g.add(g.add(offset, g.mul(g.reshape(g.ints(bi), {1, R_out, I, 1}), r_in)), a_at);
        // Inside the token's own ranks: a < r_in, b < r_out (not tested where the largest is 1).
        std::string inside;
        if (R_in > 1)
            inside = g.op("Less", {a_at, r_in});
        if (R_out > 1) {
            const auto b_inside =
                g.op("Less", {g.reshape(g.ints(b), {1, R_out, 1, 1}), own(all_ranks(k + 1))});
            inside = inside.empty() ? b_inside : g.op("And", {inside, b_inside});
        }
        if (inside.empty())
            return g.gather(g.initializer(name, kernel), index);
        index = g.op("Where", {inside, index, g.int_scalar(0)});
        return g.op("Where", {inside, g.gather(g.initializer(name, kernel), index), g.scalar(0)});
    };

    // Right to left: B [n, q, r] (q over the trailing indices, i_N slowest) times core k
    // as [n, r, I r_in] gives [n, q I, r_in]; the last B is the little-endian row.
    int64_t q = shape_[N - 1];
    auto B = g.reshape(core(N - 1), {-1, q, largest_[N - 1]});
    for (int64_t k = N - 2; k >= 0; --k) {
        const int64_t I = shape_[k], R_in = largest_[k], R_out = largest_[k + 1];
        B = g.matmul(B, g.reshape(core(k), {-1, R_out, I * R_in}));
        q *= I;
        B = g.reshape(B, {-1, q, R_in});
    }
    return g.reshape_to(B, g.concat({g.op("Shape", {ids}), g.ints({dim_})}, 0));
}

} // namespace embedlab
