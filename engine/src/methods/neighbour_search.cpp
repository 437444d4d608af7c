// The kNN searches of the LLE fit (METHODS 2): for every rare row its k most
// cosine-similar common rows, exactly (one BLAS product per block of rare rows) or
// through an IVF index (spherical k-means lists, a few probed per row), both ending
// in the same float64 re-rank.
#include "methods/neighbour_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "embedlab/name_table.hpp"
#include "embedlab/parallel_for.hpp"
#include "methods/table_checks.hpp"

namespace embedlab::methods {

torch::Tensor float_table(const torch::Tensor& table)
{
    if (table.dim() != 2)
        throw InputError("the embedding table must be a matrix, got " + std::to_string(table.dim()) +
                         " dimensions");
    if (table.size(0) < 1 || table.size(1) < 1)
        throw InputError("the embedding table is empty");
    auto E = table.to(torch::kFloat32).contiguous();
    methods::check_finite_rows(E);
    return E;
}

torch::Tensor id_tensor(const std::vector<int64_t>& ids)
{
    return torch::tensor(ids, torch::kLong).reshape({static_cast<int64_t>(ids.size())});
}

void check_k_common(int64_t k, int64_t C)
{
    if (k < 1 || k > C)
        throw InputError("k must be between 1 and |V_C| = " + std::to_string(C) + ", got " +
                         std::to_string(k));
}

namespace {

// Rare rows per similarity block, and a cap on one block's floats (128 MiB), so
// a large V_C shrinks the block instead of growing memory.
constexpr int64_t kBlockRows = 2048;
constexpr int64_t kBlockFloats = int64_t{1} << 25;
// Candidates beyond k that the float32 scan keeps for the float64 re-rank.
constexpr int64_t kRerankExtra = 8;

// Rows scaled to unit norm; zero rows stay zero (cosine 0 with everything).
torch::Tensor unit_rows(const torch::Tensor& rows)
{
    const auto norms = rows.norm(2, 1, /*keepdim=*/true);
    return rows / torch::where(norms > 0, norms, torch::ones_like(norms));
}

// The float64 re-rank both searches end with: float32 products decide near-ties
// by rounding, which can differ between machines, BLAS thread counts and block
// shapes, so the float32 scan keeps a few more candidates than k and those are
// ranked again in float64, ties to the lower id (METHODS 2; issue 20 item 10).
class Reranker {
public:
    Reranker(const torch::Tensor& E, const std::vector<int64_t>& common)
        : rows_(E.data_ptr<float>()), d_(E.size(1)), common_(common), common_norm_(common.size())
    {
        // Each common row's float64 norm once, not once per rare row that picks it.
        at::parallel_for(0, static_cast<int64_t>(common.size()), 256, [&](int64_t lo, int64_t hi) {
            for (int64_t j = lo; j < hi; ++j)
                common_norm_[static_cast<size_t>(j)] = norm64(rows_ + common[static_cast<size_t>(j)] * d_);
        });
    }
    double norm64(const float* x) const
    {
        double n = 0;
        for (int64_t t = 0; t < d_; ++t)
            n += static_cast<double>(x[t]) * x[t];
        return std::sqrt(n);
    }
    // The best k of the n candidate columns `cols` (n >= k) for rare token `rare_id`.
    void rank(int64_t rare_id, const int64_t* cols, int64_t n, int64_t k,
              std::vector<std::pair<double, int64_t>>& ranked, int64_t* ids, float* cosines) const
    {
        const float* y = rows_ + rare_id * d_;
        const double ny = norm64(y);
        ranked.resize(static_cast<size_t>(n));
        for (int64_t p = 0; p < n; ++p) {
            const int64_t id = common_[static_cast<size_t>(cols[p])];
            const float* x = rows_ + id * d_;
            const double nx = common_norm_[static_cast<size_t>(cols[p])];
            double dot = 0;
            for (int64_t t = 0; t < d_; ++t)
                dot += static_cast<double>(x[t]) * y[t];
            ranked[static_cast<size_t>(p)] = {ny > 0 && nx > 0 ? dot / (ny * nx) : 0.0, id};
        }
        std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b2) {
            return a.first != b2.first ? a.first > b2.first : a.second < b2.second;
        });
        for (int64_t p = 0; p < k; ++p) {
            ids[p] = ranked[static_cast<size_t>(p)].second;
            cosines[p] = static_cast<float>(ranked[static_cast<size_t>(p)].first);
        }
    }

private:
    const float* rows_;
    int64_t d_;
    const std::vector<int64_t>& common_;
    std::vector<double> common_norm_;
};

// E float32 contiguous and finite, `common` ascending without duplicates (so the
// column order is the id order and a stable scan breaks ties by lower id).
NearestCommon nearest_common_checked(const torch::Tensor& E, const std::vector<int64_t>& rare,
                                     const std::vector<int64_t>& common, int64_t k,
                                     const ProgressFn& progress)
{
    const int64_t R = static_cast<int64_t>(rare.size()), C = static_cast<int64_t>(common.size());
    NearestCommon out;
    out.ids = torch::empty({R, k}, torch::kLong);
    out.cosines = torch::empty({R, k}, torch::kFloat32);
    report_progress(progress, 0, R);
    if (R == 0)
        return out;
    const auto Xn_t = unit_rows(E.index_select(0, id_tensor(common))).t(); // [d, C]
    const auto rare_t = id_tensor(rare);
    const int64_t block = std::max<int64_t>(1, std::min(kBlockRows, kBlockFloats / C));
    int64_t* ids = out.ids.data_ptr<int64_t>();
    float* cosines = out.cosines.data_ptr<float>();
    const int64_t kept = std::min(C, k + kRerankExtra);
    const Reranker rerank(E, common);
    for (int64_t r0 = 0; r0 < R; r0 += block) {
        const int64_t b = std::min(block, R - r0);
        const auto sims = torch::matmul(unit_rows(E.index_select(0, rare_t.narrow(0, r0, b))), Xn_t)
                              .contiguous(); // [b, C], one BLAS product
        const float* S = sims.data_ptr<float>();
        // Top candidates per row by one ascending scan with a sorted list: an equal
        // value never displaces an earlier (lower-id) column, and no per-row sort of
        // C values is needed.
        at::parallel_for(0, b, 16, [&](int64_t lo, int64_t hi) {
            std::vector<float> best_val(static_cast<size_t>(kept));
            std::vector<int64_t> best_col(static_cast<size_t>(kept));
            std::vector<std::pair<double, int64_t>> ranked;
            for (int64_t i = lo; i < hi; ++i) {
                const float* row = S + i * C;
                int64_t filled = 0;
                for (int64_t j = 0; j < C; ++j) {
                    const float s = row[j];
                    if (filled == kept && !(s > best_val[kept - 1]))
                        continue;
                    int64_t p = filled < kept ? filled++ : kept - 1;
                    for (; p > 0 && best_val[p - 1] < s; --p) {
                        best_val[p] = best_val[p - 1];
                        best_col[p] = best_col[p - 1];
                    }
                    best_val[p] = s;
                    best_col[p] = j;
                }
                rerank.rank(rare[r0 + i], best_col.data(), kept, k, ranked, ids + (r0 + i) * k,
                            cosines + (r0 + i) * k);
            }
        });
        report_progress(progress, r0 + b, R);
    }
    return out;
}

// --- IVF ---------------------------------------------------------------------------

// splitmix64: the same stream on every platform (std distributions are not).
class SplitMix {
public:
    explicit SplitMix(uint64_t seed) : state_(seed) {}
    uint64_t next()
    {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    // `count` distinct values of 0..n-1 (a partial Fisher-Yates), ascending.
    std::vector<int64_t> sample(int64_t n, int64_t count)
    {
        std::vector<int64_t> all(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            all[static_cast<size_t>(i)] = i;
        for (int64_t i = 0; i < count; ++i) {
            const auto j = i + static_cast<int64_t>(next() % static_cast<uint64_t>(n - i));
            std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(j)]);
        }
        all.resize(static_cast<size_t>(count));
        std::sort(all.begin(), all.end());
        return all;
    }

private:
    uint64_t state_;
};

// k-means: training rows per list at most, and Lloyd iterations at most.
constexpr int64_t kTrainPerList = 32;
constexpr int64_t kKmeansIterations = 8;
// Rare rows per IVF block (the probed lists are scanned block by block).
constexpr int64_t kIvfBlockRows = 16384;

// The best centroid of each unit row [n, d] (first on ties), and its cosine.
std::pair<std::vector<int64_t>, std::vector<float>> nearest_centroid(const torch::Tensor& rows,
                                                                     const torch::Tensor& centroids)
{
    const int64_t n = rows.size(0), L = centroids.size(0);
    std::vector<int64_t> list(static_cast<size_t>(n));
    std::vector<float> best(static_cast<size_t>(n));
    const int64_t block = std::max<int64_t>(1, std::min<int64_t>(8192, kBlockFloats / L));
    const auto ct = centroids.t();
    for (int64_t r0 = 0; r0 < n; r0 += block) {
        const int64_t b = std::min(block, n - r0);
        const auto sims = torch::matmul(rows.narrow(0, r0, b), ct).contiguous();
        const float* S = sims.data_ptr<float>();
        at::parallel_for(0, b, 64, [&](int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; ++i) {
                const float* row = S + i * L;
                int64_t arg = 0;
                for (int64_t j = 1; j < L; ++j)
                    if (row[j] > row[arg])
                        arg = j;
                list[static_cast<size_t>(r0 + i)] = arg;
                best[static_cast<size_t>(r0 + i)] = row[arg];
            }
        });
    }
    return {list, best};
}

// Spherical k-means of unit rows [n, d] into L unit centroids: seeded distinct
// rows to start, Lloyd steps until no row moves (at most kKmeansIterations); an
// empty list restarts at the worst-served row. Returns the centroids and the steps.
std::pair<torch::Tensor, int64_t> spherical_kmeans(const torch::Tensor& rows, int64_t L, SplitMix& rng)
{
    const int64_t n = rows.size(0), d = rows.size(1);
    auto centroids = rows.index_select(0, id_tensor(rng.sample(n, L))).contiguous();
    std::vector<int64_t> previous;
    int64_t steps = 0;
    const float* x = rows.data_ptr<float>();
    std::vector<double> sum(static_cast<size_t>(L * d));
    std::vector<int64_t> count(static_cast<size_t>(L));
    for (; steps < kKmeansIterations; ++steps) {
        auto [list, best] = nearest_centroid(rows, centroids);
        if (list == previous)
            break;
        previous = list;
        // Sums in float64, list by list in parallel (each thread owns whole lists).
        std::fill(count.begin(), count.end(), 0);
        for (int64_t i = 0; i < n; ++i)
            ++count[static_cast<size_t>(list[static_cast<size_t>(i)])];
        std::vector<int64_t> offset(static_cast<size_t>(L + 1), 0), members(static_cast<size_t>(n));
        for (int64_t l = 0; l < L; ++l)
            offset[static_cast<size_t>(l + 1)] =
                offset[static_cast<size_t>(l)] + count[static_cast<size_t>(l)];
        {
            auto fill = offset;
            for (int64_t i = 0; i < n; ++i)
                members[static_cast<size_t>(fill[static_cast<size_t>(list[static_cast<size_t>(i)])]++)] = i;
        }
        float* c = centroids.data_ptr<float>();
        at::parallel_for(0, L, 8, [&](int64_t lo, int64_t hi) {
            for (int64_t l = lo; l < hi; ++l) {
                double* acc = sum.data() + l * d;
                std::fill(acc, acc + d, 0.0);
                for (int64_t m = offset[static_cast<size_t>(l)]; m < offset[static_cast<size_t>(l + 1)];
                     ++m) {
                    const float* row = x + members[static_cast<size_t>(m)] * d;
                    for (int64_t t = 0; t < d; ++t)
                        acc[t] += row[t];
                }
                double norm = 0;
                for (int64_t t = 0; t < d; ++t)
                    norm += acc[t] * acc[t];
                norm = std::sqrt(norm);
                if (norm > 0)
                    for (int64_t t = 0; t < d; ++t)
                        c[l * d + t] = static_cast<float>(acc[t] / norm);
            }
        });
        // Empty lists restart at the rows their centroids serve worst (lowest cosine, then lowest index).
        std::vector<int64_t> worst;
        for (int64_t l = 0; l < L; ++l) {
            if (count[static_cast<size_t>(l)] > 0)
                continue;
            if (worst.empty()) {
                worst.resize(static_cast<size_t>(n));
                for (int64_t i = 0; i < n; ++i)
                    worst[static_cast<size_t>(i)] = i;
                std::stable_sort(worst.begin(), worst.end(), [&](int64_t a, int64_t b) {
                    return best[static_cast<size_t>(a)] < best[static_cast<size_t>(b)];
                });
                std::reverse(worst.begin(), worst.end()); // taken from the back
            }
            const int64_t row = worst.back();
            worst.pop_back();
            std::copy(x + row * d, x + (row + 1) * d, c + l * d);
        }
    }
    return {centroids, steps};
}

// IVF search (KnnOptions): same inputs as nearest_common_checked, options resolved.
NearestCommon nearest_common_ivf(const torch::Tensor& E, const std::vector<int64_t>& rare,
                                 const std::vector<int64_t>& common, int64_t k, const KnnOptions& o,
                                 const ProgressFn& progress)
{
    const int64_t R = static_cast<int64_t>(rare.size()), C = static_cast<int64_t>(common.size());
    const int64_t L = o.nlist, P = o.nprobe;
    NearestCommon out;
    out.ids = torch::empty({R, k}, torch::kLong);
    out.cosines = torch::empty({R, k}, torch::kFloat32);
    out.knn = {.kind = KnnKind::IVF, .nlist = L, .nprobe = P};
    report_progress(progress, 0, R);
    if (R == 0)
        return out;
    SplitMix rng(o.seed);
    auto Xn = unit_rows(E.index_select(0, id_tensor(common))).contiguous(); // [C, d]
    // Lists: k-means on at most kTrainPerList seeded rows per list, then every common row's list.
    const int64_t train = std::min(C, kTrainPerList * L);
    auto train_rows = train < C ? Xn.index_select(0, id_tensor(rng.sample(C, train))).contiguous() : Xn;
    auto [centroids, steps] = spherical_kmeans(train_rows, L, rng);
    out.knn.kmeans_iterations = steps;
    const auto assigned = nearest_centroid(Xn, centroids).first;
    std::vector<int64_t> offset(static_cast<size_t>(L + 1), 0), order(static_cast<size_t>(C));
    for (int64_t j = 0; j < C; ++j)
        ++offset[static_cast<size_t>(assigned[static_cast<size_t>(j)] + 1)];
    for (int64_t l = 0; l < L; ++l)
        offset[static_cast<size_t>(l + 1)] += offset[static_cast<size_t>(l)];
    {
        auto fill = offset;
        for (int64_t j = 0; j < C; ++j) // ascending columns within each list
            order[static_cast<size_t>(fill[static_cast<size_t>(assigned[static_cast<size_t>(j)])]++)] = j;
    }
    const auto listed = Xn.index_select(0, id_tensor(order)).contiguous(); // list-contiguous rows
    Xn = train_rows = torch::Tensor(); // one copy of the unit rows from here on

    const int64_t kept = std::min(C, k + kRerankExtra);
    const Reranker rerank(E, common);
    const auto rare_t = id_tensor(rare);
    const auto ct = centroids.t();
    int64_t* ids = out.ids.data_ptr<int64_t>();
    float* cosines = out.cosines.data_ptr<float>();
    std::vector<int64_t> short_rows; // fewer than k candidates in their lists: searched exactly
    for (int64_t r0 = 0; r0 < R; r0 += kIvfBlockRows) {
        const int64_t b = std::min(kIvfBlockRows, R - r0);
        const auto Q = unit_rows(E.index_select(0, rare_t.narrow(0, r0, b))).contiguous();
        const auto probe = std::get<1>(torch::topk(torch::matmul(Q, ct), P, 1)).contiguous(); // [b, P]
        const int64_t* pr = probe.data_ptr<int64_t>();
        // The block's rows by probed list.
        std::vector<int64_t> qoff(static_cast<size_t>(L + 1), 0), queries(static_cast<size_t>(b * P));
        for (int64_t i = 0; i < b * P; ++i)
            ++qoff[static_cast<size_t>(pr[i] + 1)];
        for (int64_t l = 0; l < L; ++l)
            qoff[static_cast<size_t>(l + 1)] += qoff[static_cast<size_t>(l)];
        {
            auto fill = qoff;
            for (int64_t i = 0; i < b * P; ++i)
                queries[static_cast<size_t>(fill[static_cast<size_t>(pr[i])]++)] = i / P;
        }
        std::vector<float> best_val(static_cast<size_t>(b * kept));
        std::vector<int64_t> best_col(static_cast<size_t>(b * kept)), filled(static_cast<size_t>(b), 0);
        for (int64_t l = 0; l < L; ++l) {
            const int64_t q0 = qoff[static_cast<size_t>(l)], nq = qoff[static_cast<size_t>(l + 1)] - q0;
            const int64_t m0 = offset[static_cast<size_t>(l)], nm = offset[static_cast<size_t>(l + 1)] - m0;
            if (nq == 0 || nm == 0)
                continue;
            const auto qidx = torch::from_blob(queries.data() + q0, {nq}, torch::kLong);
            const auto sims =
                torch::matmul(Q.index_select(0, qidx), listed.narrow(0, m0, nm).t()).contiguous();
            const float* S = sims.data_ptr<float>();
            // A row probes a list once, so the rows of one list update disjoint candidates.
            at::parallel_for(0, nq, 16, [&](int64_t lo, int64_t hi) {
                for (int64_t q = lo; q < hi; ++q) {
                    const int64_t i = queries[static_cast<size_t>(q0 + q)];
                    float* bv = best_val.data() + i * kept;
                    int64_t* bc = best_col.data() + i * kept;
                    int64_t& f = filled[static_cast<size_t>(i)];
                    for (int64_t j = 0; j < nm; ++j) {
                        const float s = S[q * nm + j];
                        const int64_t col = order[static_cast<size_t>(m0 + j)];
                        // (value, then lower column): lists arrive in list order, not column order.
                        auto better = [&](int64_t p) { return s > bv[p] || (s == bv[p] && col < bc[p]); };
                        if (f == kept && !better(kept - 1))
                            continue;
                        int64_t p = f < kept ? f++ : kept - 1;
                        for (; p > 0 && better(p - 1); --p) {
                            bv[p] = bv[p - 1];
                            bc[p] = bc[p - 1];
                        }
                        bv[p] = s;
                        bc[p] = col;
                    }
                }
            });
        }
        at::parallel_for(0, b, 16, [&](int64_t lo, int64_t hi) {
            std::vector<std::pair<double, int64_t>> ranked;
            for (int64_t i = lo; i < hi; ++i)
                if (filled[static_cast<size_t>(i)] >= k)
                    rerank.rank(rare[static_cast<size_t>(r0 + i)], best_col.data() + i * kept,
                                filled[static_cast<size_t>(i)], k, ranked, ids + (r0 + i) * k,
                                cosines + (r0 + i) * k);
        });
        for (int64_t i = 0; i < b; ++i)
            if (filled[static_cast<size_t>(i)] < k)
                short_rows.push_back(r0 + i);
        report_progress(progress, r0 + b, R);
    }
    if (!short_rows.empty()) {
        std::vector<int64_t> ids_short;
        for (const int64_t r : short_rows)
            ids_short.push_back(rare[static_cast<size_t>(r)]);
        const auto exact = nearest_common_checked(E, ids_short, common, k, {});
        const auto rows = id_tensor(short_rows);
        out.ids.index_copy_(0, rows, exact.ids);
        out.cosines.index_copy_(0, rows, exact.cosines);
    }
    return out;
}

} // namespace

// The search `o` asks for, timed; IVF also searches a seeded sample of rare rows
// exactly and reports recall@k.
NearestCommon nearest_common_search(const torch::Tensor& E, const std::vector<int64_t>& rare,
                                    const std::vector<int64_t>& common, int64_t k, const KnnOptions& options,
                                    const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    if (options.kind == KnnKind::Exact) {
        auto out = nearest_common_checked(E, rare, common, k, progress);
        out.knn.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return out;
    }
    const auto o = resolved_knn_options(options, static_cast<int64_t>(common.size()));
    auto out = nearest_common_ivf(E, rare, common, k, o, progress);
    const auto t1 = std::chrono::steady_clock::now();
    out.knn.seconds = std::chrono::duration<double>(t1 - t0).count();
    const int64_t R = static_cast<int64_t>(rare.size());
    const int64_t n = std::min(R, o.recall_sample);
    out.knn.recall_sample = n;
    if (n > 0) {
        // A stream of its own (seed + 1), so the sample does not depend on k-means.
        SplitMix rng(o.seed ^ 0x5EED5EED5EED5EEDULL);
        const auto slots = rng.sample(R, n);
        std::vector<int64_t> sample_ids;
        for (const int64_t s : slots)
            sample_ids.push_back(rare[static_cast<size_t>(s)]);
        const auto exact = nearest_common_checked(E, sample_ids, common, k, {});
        const auto approx = out.ids.index_select(0, id_tensor(slots)).contiguous();
        const int64_t* a = approx.data_ptr<int64_t>();
        const int64_t* e = exact.ids.data_ptr<int64_t>();
        int64_t found = 0;
        for (int64_t i = 0; i < n; ++i)
            for (int64_t p = 0; p < k; ++p)
                found += std::find(a + i * k, a + (i + 1) * k, e[i * k + p]) != a + (i + 1) * k ? 1 : 0;
        out.knn.recall_at_k = static_cast<double>(found) / static_cast<double>(n * k);
    }
    out.knn.recall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    return out;
}

} // namespace embedlab::methods

namespace embedlab {

using methods::check_k_common;
using methods::float_table;
using methods::nearest_common_search;

// --- neighbours ----------------------------------------------------------------

constexpr Named<KnnKind> kKnnKinds[]{{KnnKind::Exact, "exact"}, {KnnKind::IVF, "ivf"}};

const char* knn_kind_name(KnnKind kind)
{
    return name_of(kKnnKinds, kind);
}

KnnKind parse_knn_kind(const std::string& name)
{
    return value_named(kKnnKinds, name, "knn '" + name + "' must be exact or ivf");
}

KnnOptions resolved_knn_options(const KnnOptions& options, int64_t common_count)
{
    KnnOptions o = options;
    const int64_t C = std::max<int64_t>(common_count, 1);
    if (o.nlist < 0 || o.nlist > C)
        throw InputError("nlist " + std::to_string(o.nlist) + " is outside 1..|V_C| = " + std::to_string(C) +
                         " (IVF lists)");
    // 2 sqrt(C) lists (~550 of ~140 rows at |V_C| = 76k), a 16th of them probed: on
    // tinygpt2's trained table recall@5 0.97 (README, LLE); 4 sqrt(C) lists found a
    // little more per row compared (0.975 against 0.966) for four times the k-means.
    if (o.nlist == 0)
        o.nlist = std::clamp<int64_t>(std::llround(2.0 * std::sqrt(static_cast<double>(C))), 1, C);
    if (o.nprobe < 0 || o.nprobe > o.nlist)
        throw InputError("nprobe " + std::to_string(o.nprobe) + " is outside 1..nlist = " +
                         std::to_string(o.nlist) + " (lists searched per rare row)");
    if (o.nprobe == 0)
        o.nprobe = std::max<int64_t>(1, (o.nlist + 15) / 16);
    if (o.recall_sample < 0)
        throw InputError("the recall sample must be 0 or more rare rows, got " +
                         std::to_string(o.recall_sample));
    return o;
}

NearestCommon nearest_common(const torch::Tensor& table, const std::vector<int64_t>& rare,
                             const std::vector<int64_t>& common, int64_t k, const ProgressFn& progress)
{
    return nearest_common(table, rare, common, k, KnnOptions{}, progress);
}

NearestCommon nearest_common(const torch::Tensor& table, const std::vector<int64_t>& rare,
                             const std::vector<int64_t>& common, int64_t k, const KnnOptions& knn,
                             const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto E = float_table(table);
    const int64_t V = E.size(0);
    check_k_common(k, static_cast<int64_t>(common.size()));
    auto sorted = common;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
        if (sorted[i] < 0 || sorted[i] >= V)
            throw InputError("V_C holds token id " + std::to_string(sorted[i]) +
                             ", outside the vocabulary (V = " + std::to_string(V) + ")");
        if (i > 0 && sorted[i] == sorted[i - 1])
            throw InputError("token id " + std::to_string(sorted[i]) + " appears twice in V_C");
    }
    for (const int64_t r : rare)
        if (r < 0 || r >= V)
            throw InputError("V_R holds token id " + std::to_string(r) +
                             ", outside the vocabulary (V = " + std::to_string(V) + ")");
    return nearest_common_search(E, rare, sorted, k, knn, progress);
}

} // namespace embedlab
