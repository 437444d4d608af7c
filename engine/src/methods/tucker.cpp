#include "embedlab/tucker.hpp"

#include <chrono>

#include "embedlab/accounting.hpp"
#include "io/onnx_graph.hpp"
#include "methods/table_checks.hpp"

namespace embedlab {

namespace {

std::string join(const std::vector<int64_t>& v, const char* sep = ",")
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i)
        s += (i ? sep : "") + std::to_string(v[i]);
    return s;
}

// A row viewed row-major as [n, I_N, .., I_1] is the little-endian tensorisation (eq. 6):
// mode k (0-based) sits at dim N - k. The core is held the same way, [n, r_N, .., r_1].
std::vector<int64_t> reversed_sizes(int64_t n, const std::vector<int64_t>& sizes)
{
    std::vector<int64_t> out{n};
    out.insert(out.end(), sizes.rbegin(), sizes.rend());
    return out;
}

// X x_dim M: the size a at `dim` becomes M's rows, sum_a M[b, a] X[.., a, ..].
torch::Tensor mode_product(const torch::Tensor& x, int64_t dim, const torch::Tensor& m)
{
    return torch::tensordot(x, m, {dim}, {1}).movedim(-1, dim);
}

// [V, a_N..a_1] <-> [V, a_1..a_N]: the same permutation both ways.
std::vector<int64_t> reverse_modes(int64_t N)
{
    std::vector<int64_t> p{0};
    for (int64_t k = N; k >= 1; --k)
        p.push_back(k);
    return p;
}

int64_t product(const std::vector<int64_t>& v)
{
    int64_t p = 1;
    for (int64_t x : v)
        p *= x;
    return p;
}

} // namespace

TuckerFit fit_tucker(const torch::Tensor& table_in, const TuckerOptions& options, const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    if (table_in.dim() != 2)
        throw InputError("the embedding table must be a matrix, got " + std::to_string(table_in.dim()) +
                         " dimensions");
    const auto& shape = options.shape;
    const auto& ranks = options.ranks;
    check_tucker_shape_and_ranks(table_in.size(1), shape, ranks);
    const auto table = table_in.to(torch::kFloat32).contiguous();
    methods::check_finite_rows(table);
    const int64_t V = table.size(0), N = static_cast<int64_t>(shape.size());
    const int64_t block = 4096;
    const auto row_sizes = [&](int64_t n) { return reversed_sizes(n, shape); };

    // Pass 1: each mode's Gram matrix X_(k) X_(k)^T, I_k x I_k, summed over blocks of rows.
    std::vector<torch::Tensor> gram;
    for (int64_t k = 0; k < N; ++k)
        gram.push_back(torch::zeros({shape[k], shape[k]}, torch::kDouble));
    for (int64_t v0 = 0; v0 < V; v0 += block) {
        const int64_t n = std::min(block, V - v0);
        const auto x = table.narrow(0, v0, n).to(torch::kDouble).view(row_sizes(n));
        for (int64_t k = 0; k < N; ++k) {
            const auto unfolded = x.movedim(N - k, 0).reshape({shape[k], -1});
            gram[k].addmm_(unfolded, unfolded.t());
        }
        report_progress(progress, v0 + n, 2 * V);
    }

    TuckerFit fit;
    fit.shape = shape;
    fit.ranks = ranks;
    // The leading eigenvectors, each column's largest-magnitude entry made positive so a
    // fit is reproducible (the sign of an eigenvector is arbitrary).
    std::vector<torch::Tensor> u64;
    for (int64_t k = 0; k < N; ++k) {
        const auto [values, vectors] = torch::linalg_eigh(gram[k]); // ascending
        const auto descending = values.flip({0}).contiguous();
        fit.eigenvalues.emplace_back(descending.data_ptr<double>(),
                                     descending.data_ptr<double>() + descending.numel());
        auto u = vectors.flip({1}).narrow(1, 0, ranks[k]).contiguous();
        const auto largest = u.abs().argmax(0);
        const auto signs = torch::sign(u.gather(0, largest.unsqueeze(0)));
        u = u * torch::where(signs == 0, torch::ones_like(signs), signs);
        u64.push_back(u);
        fit.factors.push_back(u.to(torch::kFloat32).contiguous());
    }

    // Pass 2: every token's core G_v = X_v x_1 U_1^T .. x_N U_N^T, in float64.
    auto core = torch::empty(reversed_sizes(V, ranks), torch::kFloat32);
    for (int64_t v0 = 0; v0 < V; v0 += block) {
        const int64_t n = std::min(block, V - v0);
        auto y = table.narrow(0, v0, n).to(torch::kDouble).view(row_sizes(n));
        for (int64_t k = 0; k < N; ++k)
            y = mode_product(y, N - k, u64[k].t());
        core.narrow(0, v0, n).copy_(y);
        report_progress(progress, V + v0 + n, 2 * V);
    }
    fit.core = core.permute(reverse_modes(N)).contiguous(); // [V, r_1..r_N]
    fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return fit;
}

TuckerTokenEmbedding::TuckerTokenEmbedding(std::vector<int64_t> shape, const torch::Tensor& core,
                                           const std::vector<torch::Tensor>& factors)
    : shape_(std::move(shape))
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    if (N == 0 || static_cast<int64_t>(factors.size()) != N)
        throw InputError("Tucker embedding: " + std::to_string(factors.size()) + " factors for a shape of " +
                         std::to_string(N) + " modes");
    if (!core.defined() || core.dim() != N + 1)
        throw InputError("Tucker core has " + std::to_string(core.defined() ? core.dim() : 0) +
                         " dimensions, expected " + std::to_string(N + 1) + " [V, r_1..r_N] for shape " +
                         join(shape_, "x"));
    vocab_ = core.size(0);
    for (int64_t k = 0; k < N; ++k)
        ranks_.push_back(core.size(k + 1));
    int64_t d = 1;
    for (int64_t f : shape_)
        d = f > 0 && d <= (int64_t(1) << 40) / f ? d * f : int64_t(1) << 40;
    dim_ = d;
    check_tucker_shape_and_ranks(dim_, shape_, ranks_);
    for (int64_t k = 0; k < N; ++k) {
        const auto& u = factors[static_cast<size_t>(k)];
        const std::string name = "Tucker factor U_" + std::to_string(k + 1);
        if (u.dim() != 2 || u.size(0) != shape_[k] || u.size(1) != ranks_[k])
            throw InputError(name + " has shape [" + join(u.sizes().vec(), ", ") + "], expected [" +
                             std::to_string(shape_[k]) + ", " + std::to_string(ranks_[k]) +
                             "] (I_k, r_k of the core)");
        if (!torch::isfinite(u).all().item<bool>())
            throw InputError(name + " has non-finite values");
        factors_.push_back(u.to(torch::kFloat32).contiguous());
    }
    if (!torch::isfinite(core).all().item<bool>())
        throw InputError("Tucker core has non-finite values");
    core_ = core.to(torch::kFloat32).permute(reverse_modes(N)).contiguous().view({vocab_, product(ranks_)});
}

TuckerTokenEmbedding::TuckerTokenEmbedding(const TuckerFit& fit)
    : TuckerTokenEmbedding(fit.shape, fit.core, fit.factors)
{
}

int64_t TuckerTokenEmbedding::parameter_count() const
{
    int64_t factors = 0;
    for (size_t k = 0; k < shape_.size(); ++k)
        factors += shape_[k] * ranks_[k];
    return core_.numel() + factors;
}

torch::Tensor TuckerTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    c10::InferenceMode guard;
    const auto flat = ids.reshape({-1}).to(torch::kLong);
    if (flat.numel() > 0) {
        const int64_t lo = flat.min().item<int64_t>(), hi = flat.max().item<int64_t>();
        if (lo < 0 || hi >= vocab_)
            throw InputError("token id " + std::to_string(lo < 0 ? lo : hi) +
                             " is outside the vocabulary (V = " + std::to_string(vocab_) + ")");
    }
    const int64_t n = flat.numel(), N = static_cast<int64_t>(shape_.size());
    auto y = core_.index_select(0, flat).view(reversed_sizes(n, ranks_));
    for (int64_t k = 0; k < N; ++k) // G_v x_1 U_1 .. x_N U_N
        y = mode_product(y, N - k, factors_[static_cast<size_t>(k)]);
    auto sizes = ids.sizes().vec();
    sizes.push_back(dim_);
    return y.contiguous().view(sizes);
}

torch::Tensor TuckerTokenEmbedding::project(const torch::Tensor& hidden) const
{
    c10::InferenceMode guard;
    const int64_t n = hidden.size(0), N = static_cast<int64_t>(shape_.size());
    // <E_v, h> = <G_v x_k U_k, h> = <G_v, h x_k U_k^T>: project h once, then one
    // product of length prod r_k with every core.
    auto z = hidden.to(torch::kFloat32).contiguous().view(reversed_sizes(n, shape_));
    for (int64_t k = 0; k < N; ++k)
        z = mode_product(z, N - k, factors_[static_cast<size_t>(k)].t());
    return torch::mm(z.contiguous().view({n, core_.size(1)}), core_.t());
}

torch::Tensor TuckerTokenEmbedding::core() const
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    return core_.view(reversed_sizes(vocab_, ranks_)).permute(reverse_modes(N)).contiguous();
}

std::vector<torch::Tensor> TuckerTokenEmbedding::factors() const
{
    std::vector<torch::Tensor> out;
    for (const auto& u : factors_)
        out.push_back(u.clone());
    return out;
}

// --- ONNX export (onnx_export.hpp) ------------------------------------------------

namespace {

// y [n, a_N.., a_1] (mode 1 last) -> its modes x_k M_k in order, each a MatMul on the
// last axis followed by moving the new axis to the front: after all N modes y is
// [n, b_N.., b_1], the row-major view the lookup and the head read. `mats` are the
// [a_k, b_k] matrices.
std::string onnx_modes(onnx::Graph& g, std::string y, const std::vector<std::string>& mats)
{
    const int64_t N = static_cast<int64_t>(mats.size());
    std::vector<int64_t> last_to_front{0, N};
    for (int64_t k = 1; k < N; ++k)
        last_to_front.push_back(k);
    for (const auto& m : mats) {
        y = g.matmul(y, m);
        if (N > 1)
            y = g.transpose(y, last_to_front);
    }
    return y;
}

} // namespace

// The core [V, r_N..r_1] as held (flattened to [V, prod r_k]) and the factors U_k
// [I_k, r_k]; a lookup is the looked-up cores times U_k^T mode by mode (as lookup()).
std::string TuckerTokenEmbedding::onnx_lookup(onnx::Graph& g, const std::string& ids) const
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    auto y = g.gather(g.initializer("embed.tucker_core", core_), g.reshape(ids, {-1})); // [n, prod r]
    y = g.reshape(y, reversed_sizes(-1, ranks_));
    std::vector<std::string> mats;
    for (int64_t k = 0; k < N; ++k)
        mats.push_back(g.transpose(
            g.initializer("embed.tucker_U" + std::to_string(k + 1), factors_[static_cast<size_t>(k)]),
            {1, 0}));
    y = onnx_modes(g, y, mats); // [n, I_N..I_1]
    return g.reshape_to(y, g.concat({g.op("Shape", {ids}), g.ints({dim_})}, 0));
}

// As project(): z = hidden x_k U_k^T in core space, then one product with every core.
std::string TuckerTokenEmbedding::onnx_project(onnx::Graph& g, const std::string& hidden) const
{
    const int64_t N = static_cast<int64_t>(shape_.size());
    std::vector<std::string> mats;
    for (int64_t k = 0; k < N; ++k)
        mats.push_back(
            g.initializer("embed.tucker_U" + std::to_string(k + 1), factors_[static_cast<size_t>(k)]));
    auto z = onnx_modes(g, g.reshape(hidden, reversed_sizes(-1, shape_)), mats); // [m, r_N..r_1]
    z = g.reshape(z, {-1, core_.size(1)});
    return g.op("Gemm", {z, g.initializer("embed.tucker_core", core_)}, {{"transB", int64_t{1}}});
}

} // namespace embedlab
