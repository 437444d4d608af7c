#include "embedlab/partial_sparse.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <Eigen/Dense>

#include "embedlab/low_rank.hpp"
#include "methods/table_checks.hpp"

namespace embedlab {

namespace {

// Rare rows per similarity block, and a cap on one block's floats (128 MiB), so
// a large V_C shrinks the block instead of growing memory.
constexpr int64_t kBlockRows = 2048;
constexpr int64_t kBlockFloats = int64_t{1} << 25;
// Rows per step of the LLE solves (one progress report each) and of the head rebuild.
constexpr int64_t kRowBlock = 4096;
// Candidates beyond k that the float32 scan keeps for the float64 re-rank.
constexpr int64_t kRerankExtra = 8;

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

void check_k_common(int64_t k, int64_t C)
{
    if (k < 1 || k > C)
        throw InputError("k must be between 1 and |V_C| = " + std::to_string(C) + ", got " +
                         std::to_string(k));
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
    switch (kind) {
    case PartialSparseKind::LLE:
        return "lle";
    case PartialSparseKind::Unk:
        return "lle-unk";
    case PartialSparseKind::PCA:
        return "lle-pca";
    }
    return "lle";
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

// --- neighbours ----------------------------------------------------------------

const char* knn_kind_name(KnnKind kind)
{
    return kind == KnnKind::IVF ? "ivf" : "exact";
}

KnnKind parse_knn_kind(const std::string& name)
{
    if (name == "exact")
        return KnnKind::Exact;
    if (name == "ivf")
        return KnnKind::IVF;
    throw InputError("knn '" + name + "' must be exact or ivf");
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
    if (!f.common_ids.defined() || !f.rare_ids.defined() || f.common_ids.dim() != 1 || f.rare_ids.dim() != 1)
        throw InputError("partial sparse embedding: the V_C and V_R id lists must be vectors");
    f.common_ids = f.common_ids.to(torch::kLong).contiguous();
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
    switch (fit_.kind) {
    case PartialSparseKind::LLE:
        return C * d + R * (2 * k + 1);
    case PartialSparseKind::Unk:
        return C * d + d;
    case PartialSparseKind::PCA:
        return C * d + R * k + k * d + d;
    }
    return C * d;
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
