// Barnes-Hut t-SNE (layout_2d.hpp). The steps follow van der Maaten's bhtsne:
// kNN affinities calibrated per row, symmetrised; gradient descent with early
// exaggeration, momentum and gains; the repulsion from a quadtree whose cells
// count as one point when cell width / distance < theta. Squared Euclidean
// distances throughout (the paper's p_j|i), the true gradient (factor 4) and
// the learning rate of Belkina et al. 2019 (max(N / exaggeration / 4, 50)).
#include "embedlab/layout_2d.hpp"
#include "embedlab/low_rank.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>

#include "embedlab/parallel_for.hpp"
#include <torch/types.h>

namespace embedlab {

namespace {

std::string number(double v)
{
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.')
        s.pop_back();
    return s;
}

// Squared distances from each of `a`'s rows to `b`'s, and the k nearest (ascending),
// excluding the row itself when `self` (a and b the same rows). A chunk of rows at a
// time into buffers kept across chunks: fresh large tensors cost a page fault a page.
std::tuple<torch::Tensor, torch::Tensor> nearest(const torch::Tensor& a, const torch::Tensor& b, int64_t k,
                                                 bool self)
{
    const int64_t chunk = std::min<int64_t>(a.size(0), 512);
    const auto bn = b.pow(2).sum(1).unsqueeze(0);
    const auto bt = b.t().contiguous();
    auto buffer = torch::empty({chunk, b.size(0)}, b.options());
    auto dist = torch::empty({a.size(0), k}, b.options());
    auto idx = torch::empty({a.size(0), k}, torch::kLong);
    for (int64_t s = 0; s < a.size(0); s += chunk) {
        const int64_t e = std::min(a.size(0), s + chunk);
        const auto rows = a.slice(0, s, e);
        auto d2 = buffer.slice(0, 0, e - s);
        torch::mm_out(d2, rows, bt);
        d2.mul_(-2).add_(rows.pow(2).sum(1, true)).add_(bn).clamp_min_(0);
        if (self)
            d2.slice(1, s, e).fill_diagonal_(std::numeric_limits<double>::infinity());
        auto v = dist.slice(0, s, e), i = idx.slice(0, s, e);
        torch::topk_out(v, i, d2, k, 1, /*largest=*/false, /*sorted=*/true);
    }
    return {dist, idx};
}

// Row i's p_j|i over its neighbours' squared distances d2[0..k): beta by bisection so
// that the entropy is ln(perplexity), as bhtsne's computeGaussianPerplexity.
double calibrate(const double* d2, int64_t k, double perplexity, double* p)
{
    const double target = std::log(perplexity), tol = 1e-5;
    double beta = 1, lo = -std::numeric_limits<double>::max(), hi = std::numeric_limits<double>::max();
    const double shift = d2[0]; // exp(-beta (d - d_min)): no underflow for far rows
    for (int iter = 0; iter < 200; ++iter) {
        double sum = 0, weighted = 0;
        for (int64_t j = 0; j < k; ++j) {
            p[j] = std::exp(-beta * (d2[j] - shift));
            sum += p[j];
            weighted += (d2[j] - shift) * p[j];
        }
        const double h = beta * weighted / sum + std::log(sum);
        const bool done = std::abs(h - target) < tol;
        if (!done) {
            if (h > target) { // too flat: sharper
                lo = beta;
                beta = hi == std::numeric_limits<double>::max() ? beta * 2 : (beta + hi) / 2;
            } else {
                hi = beta;
                beta = lo == -std::numeric_limits<double>::max() ? beta / 2 : (beta + lo) / 2;
            }
        }
        if (done || iter == 199) {
            for (int64_t j = 0; j < k; ++j)
                p[j] /= sum;
            return beta;
        }
    }
    return beta;
}

TsneAffinities affinities_of(const torch::Tensor& z, double perplexity)
{
    const int64_t n = z.size(0);
    TsneAffinities a;
    a.k = std::min<int64_t>(n - 1, static_cast<int64_t>(3 * perplexity));
    auto [d2, idx] = nearest(z, z, a.k, true);
    d2 = d2.contiguous();
    idx = idx.contiguous();
    a.neighbours.assign(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel());
    a.p.resize(static_cast<size_t>(n * a.k));
    a.beta.resize(static_cast<size_t>(n));
    const double* d = d2.data_ptr<double>();
    at::parallel_for(0, n, 64, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
            a.beta[i] = calibrate(d + i * a.k, a.k, perplexity, a.p.data() + i * a.k);
    });
    return a;
}

// Symmetric joint P in CSR: (p_j|i + p_i|j) / (2 n).
struct SparseP {
    std::vector<int64_t> start, col;
    std::vector<double> val;
};

SparseP symmetrise(const TsneAffinities& a, int64_t n)
{
    struct Entry {
        int64_t i, j;
        double v;
    };
    std::vector<Entry> e;
    e.reserve(a.p.size() * 2);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t m = 0; m < a.k; ++m) {
            const int64_t j = a.neighbours[i * a.k + m];
            const double v = a.p[i * a.k + m];
            e.push_back({i, j, v});
            e.push_back({j, i, v});
        }
    std::sort(e.begin(), e.end(),
              [](const Entry& x, const Entry& y) { return std::tie(x.i, x.j) < std::tie(y.i, y.j); });
    SparseP s;
    s.start.assign(n + 1, 0);
    for (size_t t = 0; t < e.size(); ++t) {
        if (t > 0 && e[t].i == e[t - 1].i && e[t].j == e[t - 1].j) {
            s.val.back() += e[t].v / (2.0 * n);
            continue;
        }
        s.col.push_back(e[t].j);
        s.val.push_back(e[t].v / (2.0 * n));
        s.start[e[t].i + 1] = static_cast<int64_t>(s.col.size());
    }
    for (int64_t i = 0; i < n; ++i) // rows with no entry keep the previous end
        s.start[i + 1] = std::max(s.start[i + 1], s.start[i]);
    return s;
}

// A point quadtree over the layout: each cell's centre of mass and count; one
// point a leaf, except exact duplicates (and cells past kMaxDepth) which share one.
class QuadTree {
public:
    QuadTree(const double* y, int64_t n) : y_(y)
    {
        double x0 = y[0], x1 = y[0], y0 = y[1], y1 = y[1];
        for (int64_t i = 1; i < n; ++i) {
            x0 = std::min(x0, y[2 * i]);
            x1 = std::max(x1, y[2 * i]);
            y0 = std::min(y0, y[2 * i + 1]);
            y1 = std::max(y1, y[2 * i + 1]);
        }
        nodes_.reserve(static_cast<size_t>(4 * n + 8));
        nodes_.push_back({(x0 + x1) / 2, (y0 + y1) / 2, std::max(x1 - x0, y1 - y0) / 2 * (1 + 1e-5) + 1e-5});
        for (int64_t i = 0; i < n; ++i)
            insert(i);
    }

    // The repulsion on point i: sum over j of q_ij^2 (y_i - y_j) and of q_ij (unnormalised).
    void repulsion(int64_t i, double theta, double* force, double& sum_q, std::vector<int>& stack) const
    {
        const double px = y_[2 * i], py = y_[2 * i + 1];
        stack.clear();
        stack.push_back(0);
        while (!stack.empty()) {
            const Node& nd = nodes_[stack.back()];
            stack.pop_back();
            if (nd.count == 0)
                continue;
            const double dx = px - nd.mx, dy = py - nd.my, d2 = dx * dx + dy * dy;
            const bool leaf = nd.child < 0;
            if (leaf && d2 == 0) { // the point itself and its duplicates: q = 1, no direction
                sum_q += static_cast<double>(nd.count - 1);
                continue;
            }
            if (leaf || nd.half * nd.half < theta * theta * d2) { // bhtsne: half width / distance < theta
                const double q = 1.0 / (1.0 + d2), m = static_cast<double>(nd.count) * q;
                sum_q += m;
                force[0] += m * q * dx;
                force[1] += m * q * dy;
                continue;
            }
            for (int c = 0; c < 4; ++c)
                stack.push_back(nd.child + c);
        }
    }

private:
    static constexpr int kMaxDepth = 48;
    struct Node {
        double cx, cy, half;
        double mx = 0, my = 0;
        int64_t count = 0;
        int child = -1; // the first of 4 (NW, NE, SW, SE order by x, y halves)
    };

    int quadrant(const Node& nd, double x, double y) const
    {
        return (x > nd.cx ? 1 : 0) + (y > nd.cy ? 2 : 0);
    }

    void add(Node& nd, double x, double y, int64_t count)
    {
        const double c = static_cast<double>(nd.count), w = static_cast<double>(count);
        nd.mx = (nd.mx * c + x * w) / (c + w);
        nd.my = (nd.my * c + y * w) / (c + w);
        nd.count += count;
    }

    void insert(int64_t i)
    {
        const double x = y_[2 * i], y = y_[2 * i + 1];
        int node = 0;
        for (int depth = 0;; ++depth) {
            if (nodes_[node].count == 0) {
                add(nodes_[node], x, y, 1);
                return;
            }
            if (nodes_[node].child < 0) {
                const Node old = nodes_[node];
                if ((old.mx == x && old.my == y) || depth >= kMaxDepth) {
                    add(nodes_[node], x, y, 1);
                    return;
                }
                // Split: what the leaf held moves to the quarter holding it.
                const int first = static_cast<int>(nodes_.size());
                const double h = old.half / 2;
                for (int c = 0; c < 4; ++c)
                    nodes_.push_back({old.cx + (c & 1 ? h : -h), old.cy + (c & 2 ? h : -h), h});
                nodes_[node].child = first;
                add(nodes_[first + quadrant(old, old.mx, old.my)], old.mx, old.my, old.count);
            }
            add(nodes_[node], x, y, 1);
            node = nodes_[node].child + quadrant(nodes_[node], x, y);
        }
    }

    const double* y_;
    std::vector<Node> nodes_;
};

uint64_t splitmix(uint64_t& state)
{
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double uniform01(uint64_t& state)
{
    return (static_cast<double>(splitmix(state) >> 11) + 0.5) * 0x1.0p-53;
}

void check(const float* rows, int64_t n, int64_t d, const TsneOptions& o)
{
    if (!rows || n < 2 || d < 1)
        throw InputError("t-SNE needs at least 2 rows of at least 1 value, got " + std::to_string(n) + " x " +
                         std::to_string(d));
    if (!(o.perplexity > 0) || !std::isfinite(o.perplexity))
        throw InputError("t-SNE perplexity must be a positive number, got " + number(o.perplexity));
    const int64_t sampled = std::min(n, o.sample);
    if (o.sample < 2)
        throw InputError("t-SNE sample must be at least 2 rows, got " + std::to_string(o.sample));
    if (3 * o.perplexity >= static_cast<double>(sampled))
        throw InputError("t-SNE perplexity " + number(o.perplexity) + " is too large for " +
                         std::to_string(sampled) + " sampled rows: it needs more than 3 x perplexity rows; " +
                         "use a perplexity below " + number(static_cast<double>(sampled) / 3.0) +
                         " or sample more rows");
    if (o.iterations < 1 || o.exaggeration_iterations < 0)
        throw InputError("t-SNE iterations must be at least 1 (got " + std::to_string(o.iterations) +
                         ") and the exaggeration iterations at least 0 (got " +
                         std::to_string(o.exaggeration_iterations) + ")");
    if (!(o.exaggeration >= 1) || !std::isfinite(o.exaggeration))
        throw InputError("t-SNE early exaggeration must be at least 1, got " + number(o.exaggeration));
    if (!(o.learning_rate >= 0) || !std::isfinite(o.learning_rate))
        throw InputError("t-SNE learning rate must be positive (or 0 for automatic), got " +
                         number(o.learning_rate));
    if (!(o.theta >= 0) || !(o.theta <= 1.5))
        throw InputError("t-SNE theta must be between 0 (exact) and 1.5, got " + number(o.theta));
    if (o.pca_dims < 0 || o.placement_neighbours < 1)
        throw InputError("t-SNE PCA dimensions must be at least 0 and placement neighbours at least 1");
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j)
            if (!std::isfinite(rows[i * d + j]))
                throw InputError("row " + std::to_string(i) + " has a NaN or infinite value at column " +
                                 std::to_string(j) + "; t-SNE needs finite rows");
}

} // namespace

TsneAffinities tsne_affinities(const float* rows, int64_t n, int64_t d, double perplexity)
{
    check(rows, n, d, {.perplexity = perplexity, .sample = n});
    c10::InferenceMode guard;
    const auto z = torch::from_blob(const_cast<float*>(rows), {n, d}, torch::kFloat32).to(torch::kDouble);
    return affinities_of(z, perplexity);
}

TsneResult tsne_layout(const float* rows, int64_t n, int64_t d, const TsneOptions& options,
                       const ProgressFn& progress)
{
    check(rows, n, d, options);
    c10::InferenceMode guard;
    TsneResult r;
    r.options = options;
    TsneOptions& o = r.options;
    uint64_t rng = o.seed;
    // The sample: a partial Fisher-Yates shuffle of the row ids, then ascending.
    const int64_t S = std::min(n, o.sample);
    std::vector<int64_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    if (S < n)
        for (int64_t i = 0; i < S; ++i)
            std::swap(ids[i], ids[i + static_cast<int64_t>(splitmix(rng) % static_cast<uint64_t>(n - i))]);
    ids.resize(static_cast<size_t>(S));
    std::sort(ids.begin(), ids.end());
    r.sample = ids;
    const int64_t total = o.iterations + 20; // progress: 10 steps before, 10 after
    report_progress(progress, 0, total);

    // Rows (or their top principal components, fitted on the sample) as doubles.
    const auto all = torch::from_blob(const_cast<float*>(rows), {n, d}, torch::kFloat32);
    const auto sample_ids = torch::tensor(ids, torch::kLong);
    auto sampled = all.index_select(0, sample_ids).to(torch::kDouble);
    torch::Tensor mean, basis;              // [d], [d, pca_dims]
    if (o.pca_dims > 0 && d > o.pca_dims) { // PCA as the pca method fits it (low_rank.hpp)
        const auto fit = fit_low_rank(sampled.to(torch::kFloat32), LowRankKind::PCA, o.pca_dims);
        mean = fit.mu.to(torch::kDouble);
        basis = fit.P.t().to(torch::kDouble).contiguous();
        sampled = (sampled - mean).mm(basis);
    }
    report_progress(progress, 5, total);
    const auto a = affinities_of(sampled, o.perplexity);
    const SparseP P = symmetrise(a, S);
    report_progress(progress, 10, total);

    if (o.learning_rate == 0)
        o.learning_rate = std::max(static_cast<double>(S) / o.exaggeration / 4.0, 50.0);
    std::vector<double> Y(static_cast<size_t>(2 * S)), update(Y.size(), 0.0), gains(Y.size(), 1.0),
        grad(Y.size());
    for (size_t t = 0; t < Y.size(); t += 2) { // N(0, 1e-4^2), Box-Muller
        const double u = uniform01(rng), v = uniform01(rng), radius = std::sqrt(-2 * std::log(u));
        Y[t] = 1e-4 * radius * std::cos(2 * M_PI * v);
        Y[t + 1] = 1e-4 * radius * std::sin(2 * M_PI * v);
    }
    std::vector<double> sum_q(static_cast<size_t>(S));
    double Z = 1;
    for (int iter = 0; iter < o.iterations; ++iter) {
        const double exaggerate = iter < o.exaggeration_iterations ? o.exaggeration : 1.0;
        const double momentum = iter < o.exaggeration_iterations ? 0.5 : 0.8;
        const QuadTree tree(Y.data(), S);
        at::parallel_for(0, S, 128, [&](int64_t lo, int64_t hi) {
            std::vector<int> stack;
            stack.reserve(256);
            for (int64_t i = lo; i < hi; ++i) {
                double neg[2] = {0, 0};
                sum_q[i] = 0;
                tree.repulsion(i, o.theta, neg, sum_q[i], stack);
                grad[2 * i] = -neg[0];
                grad[2 * i + 1] = -neg[1];
            }
        });
        Z = std::accumulate(sum_q.begin(), sum_q.end(), 0.0);
        at::parallel_for(0, S, 256, [&](int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; ++i) {
                double pos[2] = {0, 0};
                for (int64_t e = P.start[i]; e < P.start[i + 1]; ++e) {
                    const int64_t j = P.col[e];
                    const double dx = Y[2 * i] - Y[2 * j], dy = Y[2 * i + 1] - Y[2 * j + 1];
                    const double q = 1.0 / (1.0 + dx * dx + dy * dy);
                    pos[0] += exaggerate * P.val[e] * q * dx;
                    pos[1] += exaggerate * P.val[e] * q * dy;
                }
                grad[2 * i] = 4.0 * (pos[0] + grad[2 * i] / Z);
                grad[2 * i + 1] = 4.0 * (pos[1] + grad[2 * i + 1] / Z);
            }
        });
        for (size_t t = 0; t < Y.size(); ++t) { // after the whole gradient: every force from the same Y
            gains[t] = (grad[t] > 0) != (update[t] > 0) ? gains[t] + 0.2 : std::max(gains[t] * 0.8, 0.01);
            update[t] = momentum * update[t] - o.learning_rate * gains[t] * grad[t];
            Y[t] += update[t];
        }
        double cx = 0, cy = 0; // zero mean, as the reference
        for (int64_t i = 0; i < S; ++i) {
            cx += Y[2 * i];
            cy += Y[2 * i + 1];
        }
        cx /= static_cast<double>(S);
        cy /= static_cast<double>(S);
        for (int64_t i = 0; i < S; ++i) {
            Y[2 * i] -= cx;
            Y[2 * i + 1] -= cy;
        }
        if (iter % 10 == 9)
            report_progress(progress, 10 + iter + 1, total);
    }
    // KL(P || Q) with Q_ij = q_ij / Z (Z from the last iteration's tree: an estimate when theta > 0).
    for (int64_t i = 0; i < S; ++i)
        for (int64_t e = P.start[i]; e < P.start[i + 1]; ++e) {
            const int64_t j = P.col[e];
            const double dx = Y[2 * i] - Y[2 * j], dy = Y[2 * i + 1] - Y[2 * j + 1];
            const double q = 1.0 / (1.0 + dx * dx + dy * dy) / Z;
            if (P.val[e] > 0)
                r.kl += P.val[e] * std::log(P.val[e] / std::max(q, 1e-300));
        }

    // Every row: a sampled row where the t-SNE put it; any other at the mean of its
    // nearest sampled rows (in the same reduced space).
    r.x.assign(static_cast<size_t>(n), 0.0);
    r.y.assign(static_cast<size_t>(n), 0.0);
    for (int64_t s = 0; s < S; ++s) {
        r.x[ids[s]] = Y[2 * s];
        r.y[ids[s]] = Y[2 * s + 1];
    }
    if (S < n) {
        std::vector<int64_t> rest;
        rest.reserve(static_cast<size_t>(n - S));
        for (int64_t i = 0, s = 0; i < n; ++i) {
            if (s < S && ids[s] == i)
                ++s;
            else
                rest.push_back(i);
        }
        const auto targets = sampled.to(torch::kFloat32);
        const int64_t m = std::min<int64_t>(o.placement_neighbours, S);
        const int64_t chunk = 4096;
        for (size_t s = 0; s < rest.size(); s += chunk) {
            const size_t e = std::min(rest.size(), s + chunk);
            const auto which =
                torch::tensor(std::vector<int64_t>(rest.begin() + s, rest.begin() + e), torch::kLong);
            auto x = all.index_select(0, which);
            if (basis.defined())
                x = (x.to(torch::kDouble) - mean).mm(basis).to(torch::kFloat32);
            const auto [d2, near] = nearest(x, targets, m, false);
            const auto nn = near.contiguous();
            const int64_t* p = nn.data_ptr<int64_t>();
            for (size_t t = 0; t < e - s; ++t) {
                double sx = 0, sy = 0;
                for (int64_t j = 0; j < m; ++j) {
                    sx += Y[2 * p[t * m + j]];
                    sy += Y[2 * p[t * m + j] + 1];
                }
                r.x[rest[s + t]] = sx / static_cast<double>(m);
                r.y[rest[s + t]] = sy / static_cast<double>(m);
            }
            report_progress(progress, 10 + o.iterations + static_cast<int64_t>(10 * e / rest.size()), total);
        }
    }
    report_progress(progress, total, total);
    return r;
}

} // namespace embedlab
