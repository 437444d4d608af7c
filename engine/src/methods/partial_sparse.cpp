#include "embedlab/partial_sparse.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>

#include <Eigen/Dense>

#include "embedlab/low_rank.hpp"
#include "embedlab/name_table.hpp"
#include "embedlab/parallel_for.hpp"
#include "io/onnx_graph.hpp"
#include "methods/neighbour_search.hpp"
#include "methods/table_checks.hpp"

namespace embedlab {

using methods::check_k_common;
using methods::float_table;
using methods::id_tensor;
using methods::nearest_common_search;

namespace {

// Rows per step of the LLE solves (one progress report each) and of the head rebuild.
constexpr int64_t kRowBlock = 4096;

// Every id of 0..V-1 in exactly one of the two lists. Returns the slot map:
// >= 0 common slot, < 0 -(rare slot) - 1.
torch::Tensor partition_slots(const int64_t* common, int64_t C, const int64_t* rare, int64_t R, int64_t V)
{
    constexpr int64_t unset = std::numeric_limits<int64_t>::min();
    auto slot = torch::full({V}, unset, torch::kLong);
    int64_t* s = slot.data_ptr<int64_t>();
    auto place = [&](int64_t id, int64_t value, const char* set) {
        if (id < 0 || id >= V)
            throw InputError(std::string(set) + " holds token id " + std::to_string(id) +
                             ", outside the vocabulary (V = " + std::to_string(V) + ")");
        if (s[id] != unset)
            throw InputError("token id " + std::to_string(id) + " appears twice in V_C and V_R");
        s[id] = value;
    };
    for (int64_t c = 0; c < C; ++c)
        place(common[c], c, "V_C");
    for (int64_t r = 0; r < R; ++r)
        place(rare[r], -r - 1, "V_R");
    for (int64_t v = 0; v < V; ++v)
        if (s[v] == unset)
            throw InputError("token id " + std::to_string(v) + " is in neither V_C nor V_R");
    return slot;
}

// LLE weights of one rare row y with neighbour rows x_j (METHODS 2, scikit-learn's
// barycenter_weights convention). Writes k weights summing to one.
void solve_lle_weights(const float* y, const std::vector<const float*>& x, int64_t d, double reg,
                       Eigen::MatrixXd& D, float* weights)
{
    const int64_t k = static_cast<int64_t>(x.size());
    const Eigen::Map<const Eigen::VectorXf> yf(y, d);
    const double ny = yf.cast<double>().norm();
    Eigen::VectorXd alpha = Eigen::VectorXd::Constant(k, 1.0 / static_cast<double>(k));
    if (ny > 0) {
        const Eigen::VectorXd yn = yf.cast<double>() / ny;
        D.resize(k, d);
        for (int64_t j = 0; j < k; ++j) {
            const Eigen::VectorXd xj =
                Eigen::Map<const Eigen::VectorXf>(x[static_cast<size_t>(j)], d).cast<double>();
            const double nx = xj.norm();
            if (nx > 0)
                D.row(j) = (yn - xj / nx).transpose();
            else
                D.row(j) = yn.transpose(); // a zero neighbour has a zero unit row
        }
        Eigen::MatrixXd G = D * D.transpose();
        const double trace = G.trace();
        G.diagonal().array() += trace > 0 ? reg * trace : reg;
        const Eigen::VectorXd ones = Eigen::VectorXd::Ones(k);
        Eigen::VectorXd w;
        Eigen::LLT<Eigen::MatrixXd> llt(G);
        if (llt.info() == Eigen::Success)
            w = llt.solve(ones);
        // Singular G (reg = 0 with collinear neighbours): least squares instead.
        if (w.size() != k || !w.allFinite())
            w = G.completeOrthogonalDecomposition().solve(ones);
        const double sum = w.sum();
        if (w.allFinite() && std::isfinite(sum) && sum != 0)
            alpha = w / sum;
    }
    for (int64_t j = 0; j < k; ++j)
        weights[j] = static_cast<float>(alpha(j));
}

// Rebuilt rows of the given rare slots [n] -> [n, d] (METHODS 2).
torch::Tensor rebuild_rare(const PartialSparseFit& f, const torch::Tensor& slot_map,
                           const torch::Tensor& slots)
{
    const int64_t n = slots.size(0), d = f.dim;
    switch (f.kind) {
    case PartialSparseKind::Unk:
        return f.fallback.unsqueeze(0).expand({n, d}).contiguous();
    case PartialSparseKind::PCA:
        return torch::addmm(f.mean, f.coords.index_select(0, slots), f.basis);
    case PartialSparseKind::LLE:
        break;
    }
    auto out = torch::empty({n, d}, torch::kFloat32);
    const int64_t k = f.k;
    const int64_t* slot = slots.data_ptr<int64_t>();
    const int64_t* common_slot = slot_map.data_ptr<int64_t>();
    const int64_t* nb = f.neighbour_ids.data_ptr<int64_t>();
    const float* w = f.weights.data_ptr<float>();
    const float* norms = f.norms.data_ptr<float>();
    const float* rows = f.common_rows.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    at::parallel_for(0, n, 64, [&](int64_t lo, int64_t hi) {
        std::vector<double> acc(static_cast<size_t>(d));
        for (int64_t i = lo; i < hi; ++i) {
            const int64_t s = slot[i];
            std::fill(acc.begin(), acc.end(), 0.0);
            // y_hat^n = sum_j alpha_j x_j^n, from the exact common rows.
            for (int64_t j = 0; j < k; ++j) {
                const float* x = rows + common_slot[nb[s * k + j]] * d;
                double nx = 0;
                for (int64_t c = 0; c < d; ++c)
                    nx += static_cast<double>(x[c]) * x[c];
                nx = std::sqrt(nx);
                if (nx == 0)
                    continue; // a zero neighbour has a zero unit row
                const double a = w[s * k + j] / nx;
                for (int64_t c = 0; c < d; ++c)
                    acc[static_cast<size_t>(c)] += a * x[c];
            }
            double na = 0;
            for (double v : acc)
                na += v * v;
            na = std::sqrt(na);
            // y_hat = ||y|| y_hat^n / ||y_hat^n||; a zero direction gives a zero row.
            const double scale = na > 0 ? norms[s] / na : 0.0;
            for (int64_t c = 0; c < d; ++c)
                dst[i * d + c] = static_cast<float>(acc[static_cast<size_t>(c)] * scale);
        }
    });
    return out;
}

std::string shape_text(const std::vector<int64_t>& shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string shape_text(const torch::Tensor& t)
{
    return t.defined() ? shape_text(t.sizes().vec()) : "none";
}

} // namespace

torch::Tensor lle_weights(const torch::Tensor& y, const torch::Tensor& neighbours, double reg)
{
    if (y.dim() != 1 || neighbours.dim() != 2 || neighbours.size(1) != y.size(0) || neighbours.size(0) < 1)
        throw InputError("lle_weights: expected a row [d] and neighbour rows [k, d]");
    const auto yf = y.to(torch::kFloat32).contiguous();
    const auto xf = neighbours.to(torch::kFloat32).contiguous();
    const int64_t k = xf.size(0), d = xf.size(1);
    std::vector<const float*> x(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j)
        x[static_cast<size_t>(j)] = xf.data_ptr<float>() + j * d;
    Eigen::MatrixXd D;
    auto out = torch::empty({k}, torch::kFloat32);
    solve_lle_weights(yf.data_ptr<float>(), x, d, reg, D, out.data_ptr<float>());
    return out.to(torch::kDouble); // the weights the fit stores (float32), widened
}

const char* partial_sparse_method_name(PartialSparseKind kind)
{
    static constexpr Named<PartialSparseKind> names[]{{PartialSparseKind::LLE, "lle"},
                                                      {PartialSparseKind::Unk, "lle-unk"},
                                                      {PartialSparseKind::PCA, "lle-pca"}};
    return name_of(names, kind, "lle");
}

// --- split -------------------------------------------------------------------

FrequencySplit split_by_frequency(std::span<const int32_t> ids, int64_t vocab_size, double keep_ratio,
                                  const std::vector<int64_t>& specials)
{
    if (!(keep_ratio > 0 && keep_ratio <= 1))
        throw InputError("the keep ratio r(V_C) must lie in (0, 1], got " + std::to_string(keep_ratio));
    if (vocab_size < 1)
        throw InputError("the vocabulary is empty");
    if (ids.empty())
        throw InputError("the frequency text has no tokens");
    FrequencySplit split;
    split.keep_ratio = keep_ratio;
    split.total_tokens = static_cast<int64_t>(ids.size());
    split.counts.assign(static_cast<size_t>(vocab_size), 0);
    for (const int32_t id : ids) {
        if (id < 0 || id >= vocab_size)
            throw InputError(
                "token id " + std::to_string(id) +
                " in the frequency text is outside the vocabulary (V = " + std::to_string(vocab_size) + ")");
        ++split.counts[static_cast<size_t>(id)];
    }
    std::vector<int64_t> seen;
    for (int64_t v = 0; v < vocab_size; ++v)
        if (split.counts[static_cast<size_t>(v)] > 0)
            seen.push_back(v);
    split.distinct_seen = static_cast<int64_t>(seen.size());
    // Most frequent first; stable on ascending ids, so equal counts keep the lower id.
    std::stable_sort(seen.begin(), seen.end(), [&](int64_t a, int64_t b) {
        return split.counts[static_cast<size_t>(a)] > split.counts[static_cast<size_t>(b)];
    });
    // ceil(r n), less a hair so that e.g. 0.1 * 30 = 3.0000000000000004 keeps 3.
    const double wanted = keep_ratio * static_cast<double>(seen.size());
    const auto keep = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(wanted - 1e-12 * wanted)), 1,
                                          static_cast<int64_t>(seen.size()));
    std::vector<char> in_common(static_cast<size_t>(vocab_size), 0);
    for (int64_t i = 0; i < keep; ++i)
        in_common[static_cast<size_t>(seen[static_cast<size_t>(i)])] = 1;
    for (const int64_t s : specials)
        if (s >= 0 && s < vocab_size)
            in_common[static_cast<size_t>(s)] = 1;
    for (int64_t v = 0; v < vocab_size; ++v)
        (in_common[static_cast<size_t>(v)] ? split.common : split.rare).push_back(v);
    return split;
}

// --- fit -----------------------------------------------------------------------

PartialSparseFit fit_partial_sparse(const torch::Tensor& table, const FrequencySplit& split,
                                    const PartialSparseOptions& options, const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    const auto E = float_table(table);
    const int64_t V = E.size(0), d = E.size(1);
    const int64_t C = static_cast<int64_t>(split.common.size()), R = static_cast<int64_t>(split.rare.size());
    if (C + R != V)
        throw InputError("the frequency split covers " + std::to_string(C + R) +
                         " token ids but the table has " + std::to_string(V) + " rows");
    if (C == 0)
        throw InputError("V_C is empty: no token is kept exactly");
    partition_slots(split.common.data(), C, split.rare.data(), R, V);
    if (options.kind == PartialSparseKind::LLE)
        check_k_common(options.k, C);
    if (options.kind == PartialSparseKind::PCA && (options.k < 1 || options.k > d))
        throw InputError("the PCA basis size k must be between 1 and d = " + std::to_string(d) + ", got " +
                         std::to_string(options.k));
    if (options.kind == PartialSparseKind::LLE && !(options.reg >= 0 && std::isfinite(options.reg)))
        throw InputError("the LLE regulariser must be finite and >= 0, got " + std::to_string(options.reg));
    if (options.kind == PartialSparseKind::LLE && options.knn.kind == KnnKind::IVF)
        resolved_knn_options(options.knn, C); // its range errors before any work

    PartialSparseFit fit;
    fit.kind = options.kind;
    fit.vocab = V;
    fit.dim = d;
    fit.k = options.kind == PartialSparseKind::Unk ? 0 : options.k; // unk stores no per-token values
    fit.reg = options.kind == PartialSparseKind::LLE ? options.reg : 0.0;
    fit.common_ids = id_tensor(split.common);
    fit.rare_ids = id_tensor(split.rare);
    fit.common_rows = E.index_select(0, fit.common_ids).contiguous();

    switch (options.kind) {
    case PartialSparseKind::LLE: {
        const int64_t k = options.k, total = std::max<int64_t>(1, 2 * R);
        // Neighbour search is the first half of the bar, the solves the second.
        const ProgressFn search_progress =
            progress ? ProgressFn([&](int64_t done, int64_t) { return progress(done, total); })
                     : ProgressFn{};
        auto nn = nearest_common_search(E, split.rare, split.common, k, options.knn, search_progress);
        fit.neighbour_ids = nn.ids;
        fit.knn = nn.knn;
        fit.weights = torch::empty({R, k}, torch::kFloat32);
        fit.norms = torch::empty({R}, torch::kFloat32);
        const float* rows = E.data_ptr<float>();
        const int64_t* nb = fit.neighbour_ids.data_ptr<int64_t>();
        float* w = fit.weights.data_ptr<float>();
        float* norms = fit.norms.data_ptr<float>();
        for (int64_t r0 = 0; r0 < R; r0 += kRowBlock) {
            const int64_t r1 = std::min(R, r0 + kRowBlock);
            at::parallel_for(r0, r1, 64, [&](int64_t lo, int64_t hi) {
                Eigen::MatrixXd D;
                std::vector<const float*> x(static_cast<size_t>(k));
                for (int64_t r = lo; r < hi; ++r) {
                    const float* y = rows + split.rare[static_cast<size_t>(r)] * d;
                    for (int64_t j = 0; j < k; ++j)
                        x[static_cast<size_t>(j)] = rows + nb[r * k + j] * d;
                    solve_lle_weights(y, x, d, options.reg, D, w + r * k);
                    norms[r] =
                        static_cast<float>(Eigen::Map<const Eigen::VectorXf>(y, d).cast<double>().norm());
                }
            });
            report_progress(progress, R + r1, total);
        }
        report_progress(progress, total, total);
        break;
    }
    case PartialSparseKind::Unk:
        report_progress(progress, 0, 1);
        if (options.unk_id >= 0 && options.unk_id < V)
            fit.fallback = E[options.unk_id].clone();
        else
            fit.fallback =
                (fit.common_rows.to(torch::kDouble).sum(0) / static_cast<double>(C)).to(torch::kFloat32);
        report_progress(progress, 1, 1);
        break;
    case PartialSparseKind::PCA: {
        // Same PCA as METHODS 1 (mean and covariance of all rows of E); only the
        // rare rows keep coordinates.
        auto pca = fit_low_rank(E, LowRankKind::PCA, options.k, progress);
        fit.mean = pca.mu;
        fit.basis = pca.P;
        fit.coords = pca.Z.index_select(0, fit.rare_ids).contiguous();
        break;
    }
    }
    fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return fit;
}

// --- the embedding ---------------------------------------------------------------

PartialSparseTokenEmbedding::PartialSparseTokenEmbedding(PartialSparseFit fit) : fit_(std::move(fit))
{
    c10::InferenceMode guard;
    auto& f = fit_;
    const int64_t V = f.vocab, d = f.dim;
    if (V < 1 || d < 1)
        throw InputError("partial sparse embedding: vocabulary " + std::to_string(V) + " and dimension " +
                         std::to_string(d) + " must be positive");
    auto expect = [&](const torch::Tensor& t, std::vector<int64_t> shape, const std::string& name) {
        if (!t.defined() || t.sizes().vec() != shape)
            throw InputError("partial sparse embedding: " + name + " has shape " + shape_text(t) +
                             ", expected " + shape_text(shape));
    };
    auto finite = [&](torch::Tensor& t, const std::string& name) {
        t = t.to(torch::kFloat32).contiguous();
        if (!torch::isfinite(t).all().item<bool>())
            throw InputError("partial sparse embedding: " + name + " has non-finite values");
    };
    if (!f.common_ids.defined() || f.common_ids.dim() != 1 || (f.rare_ids.defined() && f.rare_ids.dim() != 1))
        throw InputError("partial sparse embedding: the V_C and V_R id lists must be vectors");
    f.common_ids = f.common_ids.to(torch::kLong).contiguous();
    if (!f.rare_ids.defined()) {
        // Not stored (issue 36): every id not in V_C, ascending, as the fit makes it.
        std::vector<char> in_common(static_cast<size_t>(V), 0);
        const int64_t* ids = f.common_ids.data_ptr<int64_t>();
        for (int64_t c = 0; c < f.common_ids.size(0); ++c) {
            const int64_t id = ids[c];
            if (id < 0 || id >= V)
                throw InputError("V_C holds token id " + std::to_string(id) +
                                 ", outside the vocabulary (V = " + std::to_string(V) + ")");
            if (in_common[static_cast<size_t>(id)])
                throw InputError("token id " + std::to_string(id) + " appears twice in V_C and V_R");
            in_common[static_cast<size_t>(id)] = 1;
        }
        std::vector<int64_t> rare;
        for (int64_t v = 0; v < V; ++v)
            if (!in_common[static_cast<size_t>(v)])
                rare.push_back(v);
        f.rare_ids = methods::id_tensor(rare);
    }
    f.rare_ids = f.rare_ids.to(torch::kLong).contiguous();
    const int64_t C = f.common_ids.size(0), R = f.rare_ids.size(0);
    if (C + R != V)
        throw InputError("partial sparse embedding: V_C and V_R hold " + std::to_string(C + R) +
                         " ids for a vocabulary of " + std::to_string(V));
    if (C == 0)
        throw InputError("partial sparse embedding: V_C is empty");
    slot_ = partition_slots(f.common_ids.data_ptr<int64_t>(), C, f.rare_ids.data_ptr<int64_t>(), R, V);
    expect(f.common_rows, {C, d}, "common_rows");
    finite(f.common_rows, "common_rows");
    switch (f.kind) {
    case PartialSparseKind::LLE: {
        if (f.k < 1 || f.k > C)
            throw InputError("partial sparse embedding: k = " + std::to_string(f.k) + " is outside 1.." +
                             std::to_string(C));
        expect(f.neighbour_ids, {R, f.k}, "neighbour_ids");
        expect(f.weights, {R, f.k}, "weights");
        expect(f.norms, {R}, "norms");
        f.neighbour_ids = f.neighbour_ids.to(torch::kLong).contiguous();
        const int64_t* nb = f.neighbour_ids.data_ptr<int64_t>();
        const int64_t* slot = slot_.data_ptr<int64_t>();
        for (int64_t i = 0; i < R * f.k; ++i)
            if (nb[i] < 0 || nb[i] >= V || slot[nb[i]] < 0)
                throw InputError("partial sparse embedding: neighbour id " + std::to_string(nb[i]) +
                                 " is not in V_C");
        finite(f.weights, "weights");
        finite(f.norms, "norms");
        if (R > 0 && f.norms.min().item<float>() < 0)
            throw InputError("partial sparse embedding: a rare-row norm is negative");
        break;
    }
    case PartialSparseKind::Unk:
        expect(f.fallback, {d}, "fallback");
        finite(f.fallback, "fallback");
        break;
    case PartialSparseKind::PCA:
        if (f.k < 1 || f.k > d)
            throw InputError("partial sparse embedding: k = " + std::to_string(f.k) + " is outside 1.." +
                             std::to_string(d));
        expect(f.mean, {d}, "mean");
        expect(f.basis, {f.k, d}, "basis");
        expect(f.coords, {R, f.k}, "coords");
        finite(f.mean, "mean");
        finite(f.basis, "basis");
        finite(f.coords, "coords");
        break;
    }
    // A rare list stored out of order (an earlier directory): its rows are put in
    // ascending order, the order a directory without the list derives.
    if (R > 1) {
        const auto [sorted, order] = f.rare_ids.sort();
        if (!torch::equal(sorted, f.rare_ids)) {
            f.rare_ids = sorted.contiguous();
            for (auto* t : {&f.neighbour_ids, &f.weights, &f.norms, &f.coords})
                if (t->defined())
                    *t = t->index_select(0, order).contiguous();
            slot_ =
                partition_slots(f.common_ids.data_ptr<int64_t>(), C, f.rare_ids.data_ptr<int64_t>(), R, V);
        }
    }
}

torch::ScalarType index_dtype(int64_t vocab)
{
    // Ids 0..V-1: int16 holds them while V <= 32768 (tinyllama's 32,000), else int32.
    return vocab <= 32768 ? torch::kInt16 : torch::kInt32;
}

int64_t index_bytes_for(int64_t vocab)
{
    return static_cast<int64_t>(c10::elementSize(index_dtype(vocab)));
}

int64_t PartialSparseTokenEmbedding::index_values() const
{
    const int64_t C = fit_.common_ids.size(0), R = fit_.rare_ids.size(0);
    return C + (fit_.kind == PartialSparseKind::LLE ? R * fit_.k : 0);
}

torch::Tensor PartialSparseTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    c10::InferenceMode guard;
    const auto flat = ids.reshape({-1}).to(torch::kLong).contiguous();
    const int64_t n = flat.numel(), V = fit_.vocab, d = fit_.dim;
    if (n > 0) {
        const int64_t lo = flat.min().item<int64_t>(), hi = flat.max().item<int64_t>();
        if (lo < 0 || hi >= V)
            throw InputError("token id " + std::to_string(lo < 0 ? lo : hi) +
                             " is outside the vocabulary (V = " + std::to_string(V) + ")");
    }
    auto out = torch::empty({n, d}, torch::kFloat32);
    const auto slot = slot_.index_select(0, flat);
    const auto is_common = slot >= 0;
    const auto common_pos = is_common.nonzero().reshape({-1});
    const auto rare_pos = is_common.logical_not().nonzero().reshape({-1});
    out.index_copy_(0, common_pos, fit_.common_rows.index_select(0, slot.index_select(0, common_pos)));
    // Only the looked-up rare rows are rebuilt.
    if (rare_pos.numel() > 0)
        out.index_copy_(0, rare_pos, rebuild_rare(fit_, slot_, -slot.index_select(0, rare_pos) - 1));
    auto sizes = ids.sizes().vec();
    sizes.push_back(d);
    return out.view(sizes);
}

torch::Tensor PartialSparseTokenEmbedding::rare_rows(int64_t first, int64_t count) const
{
    c10::InferenceMode guard;
    const int64_t R = fit_.rare_ids.size(0);
    if (first < 0 || count < 0 || first + count > R)
        throw InputError("rare rows " + std::to_string(first) + " + " + std::to_string(count) +
                         " are outside the " + std::to_string(R) + " rare slots");
    return rebuild_rare(fit_, slot_, torch::arange(first, first + count, torch::kLong));
}

torch::Tensor PartialSparseTokenEmbedding::project(const torch::Tensor& hidden) const
{
    c10::InferenceMode guard;
    if (hidden.dim() < 1 || hidden.size(-1) != fit_.dim)
        throw InputError("hidden states of shape " + shape_text(hidden) +
                         " do not end in d = " + std::to_string(fit_.dim));
    // The table is rebuilt from the stored factors on every call (no dense copy is kept).
    return torch::matmul(hidden.to(torch::kFloat32), rebuilt_rows().t());
}

torch::Tensor PartialSparseTokenEmbedding::rebuilt_rows() const
{
    c10::InferenceMode guard;
    auto table = torch::empty({fit_.vocab, fit_.dim}, torch::kFloat32);
    table.index_copy_(0, fit_.common_ids, fit_.common_rows);
    const int64_t R = fit_.rare_ids.size(0);
    for (int64_t r0 = 0; r0 < R; r0 += kRowBlock) {
        const int64_t n = std::min(kRowBlock, R - r0);
        table.index_copy_(0, fit_.rare_ids.narrow(0, r0, n), rare_rows(r0, n));
    }
    return table;
}

int64_t PartialSparseTokenEmbedding::parameter_count() const
{
    const int64_t C = fit_.common_ids.size(0), R = fit_.rare_ids.size(0), d = fit_.dim, k = fit_.k;
    // The common rows and their C ids, then each method's own values.
    switch (fit_.kind) {
    case PartialSparseKind::LLE:
        return C * d + C + R * (2 * k + 1);
    case PartialSparseKind::Unk:
        return C * d + C + d;
    case PartialSparseKind::PCA:
        return C * d + C + R * k + k * d + d;
    }
    return C * d + C;
}

// --- ONNX export (onnx_export.hpp) ------------------------------------------------

namespace {

constexpr int64_t kOnnxBool = 9, kOnnxDouble = 11; // TensorProto's codes, for Cast

// Ids (token ids or common slots, all < V) as a directory stores them (issue 36):
// int16 while V <= 32768, else int32. An ONNX initializer here holds no int16, so
// int16 ids are stored as their two little-endian bytes (uint8 [.., 2], the same
// bytes) and put back together in the graph. `ids()` is called once per graph (the
// head's lookup reuses the tensor). Returns the int64 value.
std::string onnx_stored_ids(onnx::Graph& g, const std::string& name,
                            const std::function<torch::Tensor()>& ids, int64_t vocab)
{
    if (index_dtype(vocab) == torch::kInt16) {
        const auto bytes = g.initializer_once(name, [&] {
            const auto t = ids();
            auto sizes = t.sizes().vec();
            sizes.push_back(2);
            return t.to(torch::kInt16).contiguous().view(torch::kUInt8).view(sizes);
        });
        // lo + 256 hi: ids below 32768 have no sign bit.
        return g.reduce_sum(g.mul(g.cast(bytes, onnx::kInt64), g.ints({1, 256})), {-1}, false);
    }
    return g.cast(g.initializer_once(name, [&] { return ids().to(torch::kInt32); }), onnx::kInt64);
}

// Where each of 0..V-1 lives, derived in the graph from the stored common ids alone:
// in_common (1 for V_C), its common slot, and the rare ids below it (a rare id's slot:
// the rare ids are ascending). All int64 [V].
struct OnnxSlots {
    std::string in_common, common_slot, rare_before;
};

OnnxSlots onnx_slots(onnx::Graph& g, const PartialSparseFit& f)
{
    const int64_t V = f.vocab, C = f.common_ids.size(0);
    const auto common_ids = onnx_stored_ids(
        g, "embed.common_ids", [&] { return f.common_ids; }, V);
    const auto zeros = g.op("Expand", {g.int_scalar(0), g.ints({V})});
    OnnxSlots s;
    s.in_common =
        g.op("ScatterElements", {zeros, common_ids, g.op("Expand", {g.int_scalar(1), g.ints({C})})});
    s.common_slot =
        g.op("ScatterElements",
             {zeros, common_ids, g.op("Range", {g.int_scalar(0), g.int_scalar(C), g.int_scalar(1)})});
    s.rare_before =
        g.op("CumSum", {g.sub(g.int_scalar(1), s.in_common), g.int_scalar(0)}, {{"exclusive", int64_t{1}}});
    return s;
}

// rebuild_rare() of rare slots `rare` [n] -> [n, d] float32; `neighbour_slots` gives the
// LLE neighbours as common slots [R, k]. Unk: the fallback [d] (to broadcast).
std::string onnx_rare_rows(onnx::Graph& g, const PartialSparseFit& f, const std::string& rare,
                           const std::function<torch::Tensor()>& neighbour_slots, bool all)
{
    switch (f.kind) {
    case PartialSparseKind::Unk:
        return g.initializer("embed.fallback", f.fallback);
    case PartialSparseKind::PCA: // addmm(mean, coords, basis)
        return g.op("Gemm", {g.gather(g.initializer("embed.coords", f.coords), rare),
                             g.initializer("embed.basis", f.basis), g.initializer("embed.mean", f.mean)});
    case PartialSparseKind::LLE:
        break;
    }
    // y = ||y|| u / ||u||, u = sum_j (w_j / ||x_j||) x_j over the neighbours (zero-norm
    // ones skipped; a zero u gives a zero row), in float64 as rebuild_rare(); the sum is
    // one batched MatMul [n, 1, k] x [n, k, d]. `all` (the head's every rare slot, which
    // ONNX Runtime computes once, folding it into a constant when the session loads):
    // the common rows are widened and their norms taken once, not once per neighbour.
    const auto nb =
        g.gather(onnx_stored_ids(g, "embed.neighbours", neighbour_slots, f.vocab), rare);          // [n, k]
    const auto w = g.cast(g.gather(g.initializer("embed.weights", f.weights), rare), kOnnxDouble); // [n, k]
    const auto rows = g.initializer("embed.common_rows", f.common_rows);
    const auto zero = g.cast(g.scalar(0), kOnnxDouble);
    auto norms = [&](const std::string& x, int64_t axis, bool keep) {
        return g.op("Sqrt",
                    {g.op("ReduceSumSquare", {x},
                          {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{keep ? 1 : 0}}})});
    };
    std::string x, nx; // [n, k, d], [n, k]
    if (all) {
        const auto wide = g.cast(rows, kOnnxDouble); // [C, d]
        x = g.gather(wide, nb);
        nx = g.gather(norms(wide, 1, false), nb);
    } else {
        x = g.cast(g.gather(rows, nb), kOnnxDouble);
        nx = norms(x, 2, false);
    }
    const auto a = g.op("Where", {g.op("Equal", {nx, zero}), zero, g.div(w, nx)});
    const auto u = g.squeeze(g.matmul(g.unsqueeze(a, {1}), x), {1}); // [n, d]
    const auto nu = norms(u, 1, true);                               // [n, 1]
    const auto norm =
        g.unsqueeze(g.cast(g.gather(g.initializer("embed.norms", f.norms), rare), kOnnxDouble), {1});
    const auto scale = g.op("Where", {g.op("Greater", {nu, zero}), g.div(norm, nu), zero});
    return g.cast(g.mul(u, scale), onnx::kFloat);
}

} // namespace

// Common rows by Gather; rare rows rebuilt as rebuild_rare() does them. Only the fit's
// values are stored: each id's slot is derived in the graph (onnx_slots), and LLE's
// neighbours are stored as their common slots, at the width of the ids they replace.
std::string PartialSparseTokenEmbedding::onnx_lookup(onnx::Graph& g, const std::string& ids) const
{
    const auto& f = fit_;
    const int64_t d = f.dim, R = f.rare_ids.size(0);
    const auto flat = g.reshape(ids, {-1}); // [n]
    const auto s = onnx_slots(g, f);
    auto rows = g.gather(g.initializer("embed.common_rows", f.common_rows), g.gather(s.common_slot, flat));
    if (R > 0) {
        // Every looked-up id is rebuilt as if rare (a common id reads rare slot
        // min(rare ids below it, R - 1)), then the common ones keep their exact rows.
        const auto rare = g.op("Min", {g.gather(s.rare_before, flat), g.int_scalar(R - 1)});
        const auto is_common = g.unsqueeze(g.cast(g.gather(s.in_common, flat), kOnnxBool), {1}); // [n, 1]
        rows = g.op("Where", {is_common, rows,
                              onnx_rare_rows(
                                  g, f, rare, [&] { return neighbour_slots(); }, false)});
    }
    return g.reshape_to(rows, g.concat({g.op("Shape", {ids}), g.ints({d})}, 0));
}

// As project(): the rare rows rebuilt once each (not every id as if rare, as the default
// head's lookup of 0..V-1 would), one product with the common and the rare rows, its
// columns then put in id order.
std::string PartialSparseTokenEmbedding::onnx_project(onnx::Graph& g, const std::string& hidden) const
{
    const auto& f = fit_;
    const int64_t C = f.common_ids.size(0), R = f.rare_ids.size(0), d = f.dim;
    const auto s = onnx_slots(g, f);
    auto rows = g.initializer("embed.common_rows", f.common_rows); // [C, d]
    if (R > 0) {
        auto rare = onnx_rare_rows(
            g, f, g.op("Range", {g.int_scalar(0), g.int_scalar(R), g.int_scalar(1)}),
            [&] { return neighbour_slots(); }, true);
        if (f.kind == PartialSparseKind::Unk)
            rare = g.op("Expand", {rare, g.ints({R, d})});
        rows = g.concat({rows, rare}, 0); // [C + R, d]
    }
    const auto logits = g.op("Gemm", {hidden, rows}, {{"transB", int64_t{1}}}); // [m, C + R]
    const auto column = g.op("Where", {g.cast(s.in_common, kOnnxBool), s.common_slot,
                                       g.add(s.rare_before, g.int_scalar(C))}); // [V]
    return g.gather(logits, column, 1);
}

torch::Tensor PartialSparseTokenEmbedding::neighbour_slots() const
{
    const int64_t R = fit_.rare_ids.size(0);
    return slot_.index_select(0, fit_.neighbour_ids.reshape({-1})).view({R, fit_.k});
}

// --- coverage --------------------------------------------------------------------

namespace {

// Membership in V_C; ids beyond the split's vocabulary are simply not in it.
class CommonSet {
public:
    explicit CommonSet(const FrequencySplit& split) : in_common_(split.common.size() + split.rare.size(), 0)
    {
        for (const int64_t id : split.common)
            if (id >= 0 && static_cast<size_t>(id) < in_common_.size())
                in_common_[static_cast<size_t>(id)] = 1;
    }
    bool operator()(int32_t id) const
    {
        return id >= 0 && static_cast<size_t>(id) < in_common_.size() && in_common_[static_cast<size_t>(id)];
    }

private:
    std::vector<char> in_common_;
};

} // namespace

ExampleCoverage coverage_of_examples(const FrequencySplit& split, const Tokenizer& tokenizer,
                                     const std::vector<std::string>& examples)
{
    const CommonSet covered(split);
    ExampleCoverage c;
    int64_t kept = 0, whole = 0;
    for (const auto& text : examples) {
        const auto ids = tokenizer.encode(text);
        const auto in = std::count_if(ids.begin(), ids.end(), covered);
        kept += in;
        whole += in == static_cast<std::ptrdiff_t>(ids.size()) ? 1 : 0;
        c.tokens += static_cast<int64_t>(ids.size());
    }
    c.examples = static_cast<int64_t>(examples.size());
    c.token_coverage = c.tokens > 0 ? static_cast<double>(kept) / static_cast<double>(c.tokens) : 0.0;
    c.example_coverage = c.examples > 0 ? static_cast<double>(whole) / static_cast<double>(c.examples) : 0.0;
    return c;
}

Coverage coverage_of(const FrequencySplit& split, const Tokenizer& tokenizer, const std::string& text)
{
    const CommonSet covered(split);
    Coverage c;
    const auto ids = tokenizer.encode(text);
    c.tokens = static_cast<int64_t>(ids.size());
    const auto kept = std::count_if(ids.begin(), ids.end(), covered);
    c.token_coverage = c.tokens > 0 ? static_cast<double>(kept) / static_cast<double>(c.tokens) : 0.0;

    // Lines are encoded on their own, as a sentence would be; CRLF ends count as LF.
    int64_t covered_lines = 0;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos)
            end = text.size();
        std::string_view line(text.data() + start, end - start);
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        if (!line.empty()) {
            ++c.lines;
            const auto line_ids = tokenizer.encode(line);
            if (std::all_of(line_ids.begin(), line_ids.end(), covered))
                ++covered_lines;
        }
        start = end + 1;
    }
    c.line_coverage = c.lines > 0 ? static_cast<double>(covered_lines) / static_cast<double>(c.lines) : 0.0;
    return c;
}

} // namespace embedlab
