#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "embedlab/compress.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/partial_sparse.hpp"
#include "test_support.hpp"

using namespace embedlab;

namespace {

torch::Tensor sparse_random_table(int64_t V, int64_t d, uint64_t seed = 3)
{
    torch::manual_seed(seed);
    return torch::randn({V, d}) * torch::linspace(1.5, 0.2, d) + 0.3;
}

// A split given by its sets (counts are not used by the fit).
FrequencySplit make_split(std::vector<int64_t> common, std::vector<int64_t> rare)
{
    FrequencySplit s;
    s.counts.assign(common.size() + rare.size(), 0);
    s.common = std::move(common);
    s.rare = std::move(rare);
    return s;
}

// Even ids common, odd ids rare.
FrequencySplit even_odd_split(int64_t V)
{
    std::vector<int64_t> common, rare;
    for (int64_t v = 0; v < V; ++v)
        (v % 2 == 0 ? common : rare).push_back(v);
    return make_split(common, rare);
}

torch::Tensor ids_of(const std::vector<int64_t>& ids)
{
    return torch::tensor(ids, torch::kLong);
}

// Cosine of each row pair, in float64; zero rows give 0.
torch::Tensor row_cosines(const torch::Tensor& a, const torch::Tensor& b)
{
    const auto x = a.to(torch::kDouble), y = b.to(torch::kDouble);
    const auto den = x.norm(2, 1) * y.norm(2, 1);
    return torch::where(den > 0, (x * y).sum(1) / den, torch::zeros_like(den));
}

double mean_rare_cosine(const PartialSparseTokenEmbedding& emb, const torch::Tensor& table)
{
    const auto rare = emb.fit().rare_ids;
    return row_cosines(emb.lookup(rare), table.index_select(0, rare)).mean().item<double>();
}

// One byte, one token: enough to check what coverage counts.
class ByteTokenizer final : public Tokenizer {
public:
    std::vector<int32_t> encode(std::string_view text) const override
    {
        std::vector<int32_t> ids;
        for (unsigned char c : text)
            ids.push_back(c);
        return ids;
    }
    std::string decode(std::span<const int32_t> ids) const override
    {
        std::string s;
        for (auto id : ids)
            s += static_cast<char>(id);
        return s;
    }
    std::string token_text(int32_t id) const override { return std::string(1, static_cast<char>(id)); }
    int64_t vocab_size() const override { return 256; }
    std::string kind() const override { return "bytes"; }
    bool is_special(int32_t) const override { return false; }
    std::optional<int32_t> unk_id() const override { return std::nullopt; }
    std::optional<int32_t> bos_id() const override { return std::nullopt; }
    std::optional<int32_t> eos_id() const override { return std::nullopt; }
};

} // namespace

// --- split -------------------------------------------------------------------------

TEST(PartialSparse, SplitRanksByCountTiesToLowerIdAndKeepsSpecials)
{
    // Counts: 3 x5, 1 x3, 7 x3, 2 x1, 9 x1; five distinct ids.
    const std::vector<int32_t> ids{3, 7, 1, 3, 9, 3, 1, 7, 2, 3, 7, 1, 3};
    auto s = split_by_frequency(ids, 10, 0.5, {0, 12, -1}); // 12 and -1 lie outside V: ignored
    EXPECT_EQ(s.counts, (std::vector<int64_t>{0, 3, 1, 5, 0, 0, 0, 3, 0, 1}));
    EXPECT_EQ(s.distinct_seen, 5);
    EXPECT_EQ(s.total_tokens, 13);
    EXPECT_EQ(s.keep_ratio, 0.5);
    // ceil(0.5 * 5) = 3: ids 3, 1, 7; plus the special 0.
    EXPECT_EQ(s.common, (std::vector<int64_t>{0, 1, 3, 7}));
    EXPECT_EQ(s.rare, (std::vector<int64_t>{2, 4, 5, 6, 8, 9}));
    // ceil(0.4 * 5) = 2: 1 and 7 tie at 3, the lower id wins.
    s = split_by_frequency(ids, 10, 0.4, {});
    EXPECT_EQ(s.common, (std::vector<int64_t>{1, 3}));
    // ceil(0.8 * 5) = 4: 2 and 9 tie at 1, the lower id wins.
    s = split_by_frequency(ids, 10, 0.8, {});
    EXPECT_EQ(s.common, (std::vector<int64_t>{1, 2, 3, 7}));
    EXPECT_EQ(s.rare, (std::vector<int64_t>{0, 4, 5, 6, 8, 9}));
}

TEST(PartialSparse, SplitKeepRatioOneKeepsEverySeenId)
{
    const std::vector<int32_t> ids{5, 5, 2, 8, 2, 0};
    const auto s = split_by_frequency(ids, 12, 1.0, {11});
    EXPECT_EQ(s.common, (std::vector<int64_t>{0, 2, 5, 8, 11}));
    EXPECT_EQ(s.rare, (std::vector<int64_t>{1, 3, 4, 6, 7, 9, 10}));
    // 0.1 * 30 is 3.0000000000000004 in binary: still 3 ids, not 4.
    std::vector<int32_t> thirty(30);
    std::iota(thirty.begin(), thirty.end(), 0);
    EXPECT_EQ(split_by_frequency(thirty, 40, 0.1, {}).common, (std::vector<int64_t>{0, 1, 2}));
    // A tiny ratio still keeps one id.
    EXPECT_EQ(split_by_frequency(thirty, 40, 1e-9, {}).common, (std::vector<int64_t>{0}));
}

TEST(PartialSparse, SplitRejectsBadRatioEmptyTextAndOutOfRangeIds)
{
    const std::vector<int32_t> ids{1, 2};
    for (double r : {0.0, -0.5, 1.5, std::nan("")})
        EXPECT_THROW(split_by_frequency(ids, 10, r, {}), InputError) << r;
    try {
        split_by_frequency(std::vector<int32_t>{}, 10, 0.5, {});
        FAIL() << "no error for an empty text";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("no tokens"), std::string::npos) << e.what();
    }
    for (int32_t bad : {10, -3}) {
        try {
            split_by_frequency(std::vector<int32_t>{1, bad}, 10, 0.5, {});
            FAIL() << "no error for id " << bad;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
        }
    }
}

// --- neighbours ----------------------------------------------------------------------

TEST(PartialSparse, NearestCommonMatchesBruteForceAcrossBlocks)
{
    // 2571 rare rows: two similarity blocks. Zero rows on both sides.
    const int64_t V = 3000, d = 16, k = 4;
    auto E = sparse_random_table(V, d, 11);
    E[10].zero_(); // common
    E[11].zero_(); // rare
    std::vector<int64_t> common, rare;
    for (int64_t v = 0; v < V; ++v)
        (v % 7 == 3 || v == 10 ? common : rare).push_back(v);
    std::vector<std::pair<int64_t, int64_t>> calls;
    const auto nn = nearest_common(E, rare, common, k, [&](int64_t done, int64_t total) {
        calls.emplace_back(done, total);
        return true;
    });
    const int64_t R = static_cast<int64_t>(rare.size()), C = static_cast<int64_t>(common.size());
    ASSERT_EQ(nn.ids.sizes(), (std::vector<int64_t>{R, k}));
    ASSERT_EQ(nn.cosines.sizes(), (std::vector<int64_t>{R, k}));
    ASSERT_GE(calls.size(), 3u);
    EXPECT_EQ(calls.back(), std::make_pair(R, R));

    // Full R x C cosine matrix in float64, sorted stably (ties keep the lower id).
    const auto Ed = E.to(torch::kDouble);
    auto unit = [](const torch::Tensor& x) {
        const auto n = x.norm(2, 1, true);
        return x / torch::where(n > 0, n, torch::ones_like(n));
    };
    const auto sims =
        torch::matmul(unit(Ed.index_select(0, ids_of(rare))), unit(Ed.index_select(0, ids_of(common))).t());
    const auto sorted = std::get<0>(sims.sort(/*stable=*/true, 1, /*descending=*/true));
    const auto order = std::get<1>(sims.sort(/*stable=*/true, 1, true));
    const auto ref_ids = ids_of(common).index_select(0, order.narrow(1, 0, k).reshape({-1})).reshape({R, k});
    EXPECT_LT((nn.cosines.to(torch::kDouble) - sorted.narrow(1, 0, k)).abs().max().item<double>(), 1e-5);
    int64_t differing = 0;
    for (int64_t i = 0; i < R; ++i)
        for (int64_t p = 0; p < k; ++p)
            if (nn.ids[i][p].item<int64_t>() != ref_ids[i][p].item<int64_t>()) {
                // Only a float32 near-tie may swap two neighbours.
                ++differing;
                const double s = sorted[i][p].item<double>();
                const bool near_tie = (p > 0 && sorted[i][p - 1].item<double>() - s < 1e-5) ||
                                      (p + 1 < C && s - sorted[i][p + 1].item<double>() < 1e-5);
                EXPECT_TRUE(near_tie) << "rare row " << rare[i] << " neighbour " << p;
            }
    EXPECT_LT(differing, 10);
    // The zero rare row: every cosine is 0, so the lowest common ids come first.
    const auto zero_slot = std::find(rare.begin(), rare.end(), 11) - rare.begin();
    EXPECT_TRUE(torch::equal(nn.ids[zero_slot], ids_of({3, 10, 17, 24})));
    EXPECT_TRUE(torch::equal(nn.cosines[zero_slot], torch::zeros({k})));
}

TEST(PartialSparse, NearestCommonBreaksTiesToTheLowerId)
{
    const int64_t V = 120, d = 8;
    auto E = sparse_random_table(V, d, 2);
    // Identical common rows at both ends of the column range and in the middle.
    const auto dup = torch::randn({d});
    for (int64_t id : {117, 1, 64})
        E[id].copy_(dup);
    E[50].copy_(dup * 2.5); // a rare row in the same direction
    E[51].zero_();          // a zero rare row: all cosines tie at 0
    std::vector<int64_t> common, rare{50, 51};
    for (int64_t v = 0; v < V; ++v)
        if (v != 50 && v != 51)
            common.push_back(v);
    std::reverse(common.begin(), common.end()); // the order given does not matter
    const auto nn = nearest_common(E, rare, common, 3);
    EXPECT_TRUE(torch::equal(nn.ids[0], ids_of({1, 64, 117})));
    EXPECT_TRUE(torch::equal(nn.ids[1], ids_of({0, 1, 2})));
    EXPECT_NEAR(nn.cosines[0][2].item<float>(), 1.0f, 1e-6);
    EXPECT_EQ(nn.cosines[1].abs().max().item<float>(), 0.0f);
    // k = 2 keeps the two lowest of the three equal rows.
    EXPECT_TRUE(torch::equal(nearest_common(E, rare, common, 2).ids[0], ids_of({1, 64})));

    EXPECT_THROW(nearest_common(E, rare, common, 0), InputError);
    EXPECT_THROW(nearest_common(E, rare, common, static_cast<int64_t>(common.size()) + 1), InputError);
    EXPECT_THROW(nearest_common(E, {50, 120}, common, 2), InputError);
}

// Issue 20 item 10: cosines 1 - 5e-9 and 1 - 2e-8 are both 1.0f in float32, where the
// lower id would win; ranked in float64, the truly nearer row wins, with any BLAS thread count.
TEST(NearestCommon, NearTiesAreRankedInDoubleWhateverTheThreads)
{
    const int64_t d = 8;
    auto E = torch::zeros({6, d});
    E[0][0] = 1.0f; // the rare row
    for (int64_t id = 1; id < 6; ++id)
        E[id][1] = 1.0f; // far rows (cosine 0)
    E[2][0] = 1.0f;
    E[2][1] = 2e-4f; // cosine 1 - 2e-8
    E[4][0] = 1.0f;
    E[4][1] = 1e-4f; // cosine 1 - 5e-9: nearer, higher id
    std::vector<int64_t> ids_by_threads[2];
    const int threads = at::get_num_threads();
    for (int t : {1, 2}) {
        at::set_num_threads(t);
        const auto nn = nearest_common(E, {0}, {1, 2, 3, 4, 5}, 2);
        ids_by_threads[t - 1] = {nn.ids[0][0].item<int64_t>(), nn.ids[0][1].item<int64_t>()};
        EXPECT_GT(nn.cosines[0][0].item<float>(), 0.99999f);
    }
    at::set_num_threads(threads);
    EXPECT_EQ(ids_by_threads[0], (std::vector<int64_t>{4, 2}));
    EXPECT_EQ(ids_by_threads[1], ids_by_threads[0]);
}

// Issue 20 item 9: the manifest's rare-row cosines are computed in blocks of 4,096 rows;
// across two blocks they are the rows' own cosines.
TEST(PartialSparse, RareCosineStatisticsSpanBlocks)
{
    const int64_t V = 9000;
    const auto E = sparse_random_table(V, 8, 4);
    auto split = std::make_shared<FrequencySplit>(even_odd_split(V)); // 4,500 rare rows
    const auto c = compress_table(E, {.method = "lle", .split = split, .k = 3});
    const auto& stats = c.fit["rare_cosine"];
    EXPECT_EQ(stats["rows"], 4500);
    const auto* emb = dynamic_cast<const PartialSparseTokenEmbedding*>(c.embedding.get());
    ASSERT_NE(emb, nullptr);
    EXPECT_NEAR(stats["mean"].get<double>(), mean_rare_cosine(*emb, E), 1e-6);
    int64_t counted = 0;
    for (const auto& n : stats["histogram"])
        counted += n.get<int64_t>();
    EXPECT_EQ(counted, 4500);
}

// --- LLE -----------------------------------------------------------------------------

TEST(PartialSparse, LleWeightsSumToOneAndCommonRowsStayExact)
{
    const int64_t V = 400, d = 24;
    const auto E = sparse_random_table(V, d, 4);
    const auto split = even_odd_split(V);
    const auto fit = fit_partial_sparse(E, split, {.kind = PartialSparseKind::LLE, .k = 5});
    EXPECT_EQ(fit.weights.sizes(), (std::vector<int64_t>{200, 5}));
    EXPECT_LT((fit.weights.sum(1) - 1).abs().max().item<float>(), 1e-5);
    EXPECT_TRUE(torch::allclose(fit.norms, E.index_select(0, fit.rare_ids).norm(2, 1)));
    EXPECT_GE(fit.seconds, 0);
    // The stored neighbours are those of nearest_common.
    EXPECT_TRUE(torch::equal(fit.neighbour_ids, nearest_common(E, split.rare, split.common, 5).ids));
    PartialSparseTokenEmbedding emb(fit);
    const auto common = ids_of(split.common);
    EXPECT_TRUE(torch::equal(emb.lookup(common), E.index_select(0, common)));
    // Rare rows keep their norm exactly (up to float rounding).
    const auto rare_rows = emb.lookup(fit.rare_ids);
    EXPECT_TRUE(torch::allclose(rare_rows.norm(2, 1), fit.norms, 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(emb.rare_rows(0, 200), rare_rows));
    EXPECT_TRUE(torch::allclose(emb.rare_rows(7, 3), rare_rows.narrow(0, 7, 3)));
    EXPECT_THROW(emb.rare_rows(199, 2), InputError);
    EXPECT_EQ(emb.kind(), "lle");
}

// The fit's per-row solve and the public lle_weights (used by `neighbours`) agree.
TEST(PartialSparse, FitWeightsMatchLleWeightsRowByRow)
{
    const int64_t V = 120, d = 10, k = 4;
    const auto E = sparse_random_table(V, d, 15);
    for (double reg : {1e-3, 0.5}) {
        const auto fit = fit_partial_sparse(E, even_odd_split(V), {.k = k, .reg = reg});
        for (int64_t r = 0; r < fit.rare_ids.size(0); ++r) {
            const auto alpha =
                lle_weights(E[fit.rare_ids[r].item<int64_t>()], E.index_select(0, fit.neighbour_ids[r]), reg);
            EXPECT_TRUE(torch::allclose(fit.weights[r].to(torch::kDouble), alpha, 1e-5, 1e-6))
                << "rare slot " << r << " reg " << reg;
        }
    }
}

TEST(PartialSparse, LleRebuildsARowInItsNeighboursAffineHull)
{
    // Unit rows on the circle r (cos phi, sin phi) + z0 e_2: any point of that
    // circle is an affine combination of three others, so LLE is exact.
    const int64_t d = 6;
    const double r = 0.8, z0 = 0.6;
    auto on_circle = [&](double phi, double scale) {
        auto x = torch::zeros({d});
        x[0] = r * std::cos(phi) * scale;
        x[1] = r * std::sin(phi) * scale;
        x[2] = z0 * scale;
        return x;
    };
    auto E = torch::zeros({8, d});
    E[0] = on_circle(0.0, 3.0);
    E[1] = on_circle(0.2, 0.5);
    E[2] = on_circle(0.45, 7.0);
    E[3] = on_circle(0.27, 2.5); // rare
    // Far common rows in other directions.
    E[4][3] = 1;
    E[5][4] = 2;
    E[6][5] = 1;
    E[7][3] = -1;
    const auto fit = fit_partial_sparse(E, make_split({0, 1, 2, 4, 5, 6, 7}, {3}),
                                        {.kind = PartialSparseKind::LLE, .k = 3, .reg = 1e-10});
    EXPECT_TRUE(torch::equal(std::get<0>(fit.neighbour_ids[0].sort()), ids_of({0, 1, 2})));
    EXPECT_NEAR(fit.weights.sum().item<double>(), 1.0, 1e-6);
    PartialSparseTokenEmbedding emb(fit);
    const auto y = emb.lookup(ids_of({3}))[0];
    EXPECT_GT(row_cosines(y.unsqueeze(0), E[3].unsqueeze(0)).item<double>(), 1 - 1e-6);
    EXPECT_LT((y - E[3]).norm().item<double>(), 1e-4 * E[3].norm().item<double>());
    // y lies beyond the arc's chord: one weight is negative (affine, not convex).
    EXPECT_LT(fit.weights.min().item<float>(), 0);
}

TEST(PartialSparse, LleRegularisedTwoNeighbourCaseMatchesHandComputation)
{
    // y^n = e0, neighbours x^n = (e0 + e1)/sqrt2 (id 1, nearer) and e1 (id 0).
    auto E = torch::zeros({3, 3});
    E[0][1] = 2;
    E[1][0] = 3;
    E[1][1] = 3;
    E[2][0] = 5;
    const double reg = 0.1, s = 1 / std::sqrt(2.0);
    const auto fit =
        fit_partial_sparse(E, make_split({0, 1}, {2}), {.kind = PartialSparseKind::LLE, .k = 2, .reg = reg});
    ASSERT_TRUE(torch::equal(fit.neighbour_ids[0], ids_of({1, 0})));
    // D rows: y^n - x_1^n = (1 - s, -s, 0), y^n - x_0^n = (1, -1, 0).
    const double g11 = (1 - s) * (1 - s) + s * s, g22 = 2, g12 = (1 - s) + s;
    const double add = reg * (g11 + g22);
    const double a = g11 + add, b = g22 + add;
    // G^-1 1 for [[a, g12], [g12, b]] is proportional to (b - g12, a - g12).
    const double w1 = b - g12, w2 = a - g12;
    const double alpha1 = w1 / (w1 + w2), alpha2 = w2 / (w1 + w2);
    EXPECT_NEAR(alpha1, 1.1411, 1e-4); // the numbers, worked by hand
    EXPECT_NEAR(alpha2, -0.1411, 1e-4);
    EXPECT_NEAR(fit.weights[0][0].item<double>(), alpha1, 1e-6);
    EXPECT_NEAR(fit.weights[0][1].item<double>(), alpha2, 1e-6);
    EXPECT_NEAR(fit.norms[0].item<double>(), 5.0, 1e-6);
    // y_hat = 5 (alpha1 x_1^n + alpha2 x_0^n) / ||.||.
    const double hx = alpha1 * s, hy = alpha1 * s + alpha2, hn = std::hypot(hx, hy);
    const auto row = PartialSparseTokenEmbedding(fit).lookup(ids_of({2}))[0];
    EXPECT_NEAR(row[0].item<double>(), 5 * hx / hn, 1e-5);
    EXPECT_NEAR(row[1].item<double>(), 5 * hy / hn, 1e-5);
    EXPECT_EQ(row[2].item<double>(), 0.0);

    // Neighbours in y's own direction: G = 0, trace 0, so reg I (or, with no
    // reg, the least-squares fallback) gives uniform weights and y itself.
    auto F = torch::zeros({3, 2});
    F[0][0] = 1;
    F[1][0] = 4;
    F[2][0] = 2;
    for (double r : {1e-3, 0.0}) {
        const auto f = fit_partial_sparse(F, make_split({0, 1}, {2}), {.k = 2, .reg = r});
        EXPECT_TRUE(torch::allclose(f.weights, torch::full({1, 2}, 0.5f))) << "reg " << r;
        EXPECT_TRUE(torch::allclose(PartialSparseTokenEmbedding(f).lookup(ids_of({2})), F[2].unsqueeze(0)));
    }
}

TEST(PartialSparse, ZeroNormRowsGiveZeroRowsAndNoNaN)
{
    const int64_t V = 60, d = 8;
    auto E = sparse_random_table(V, d, 6);
    E[0].zero_(); // common
    E[1].zero_(); // rare
    E[3].zero_(); // rare
    const auto split = even_odd_split(V);
    for (auto kind : {PartialSparseKind::LLE, PartialSparseKind::Unk, PartialSparseKind::PCA}) {
        const auto fit =
            fit_partial_sparse(E, split, {.kind = kind, .k = kind == PartialSparseKind::PCA ? d : 4});
        PartialSparseTokenEmbedding emb(fit);
        const auto all = emb.lookup(torch::arange(V, torch::kLong));
        EXPECT_TRUE(torch::isfinite(all).all().item<bool>()) << emb.kind();
        EXPECT_TRUE(torch::isfinite(emb.project(torch::randn({3, d}))).all().item<bool>()) << emb.kind();
        EXPECT_EQ(all[0].abs().max().item<float>(), 0.0f) << emb.kind();
        if (kind == PartialSparseKind::LLE) {
            EXPECT_EQ(all[1].abs().max().item<float>(), 0.0f);
            EXPECT_EQ(all[3].abs().max().item<float>(), 0.0f);
            EXPECT_TRUE(torch::allclose(fit.weights[0], torch::full({4}, 0.25f)));
            EXPECT_EQ(fit.norms[0].item<float>(), 0.0f);
        }
        if (kind == PartialSparseKind::PCA) {
            EXPECT_LT(all[1].abs().max().item<float>(), 1e-5);
        }
    }
}

TEST(PartialSparse, LleBeatsUnkOnAStructuredTable)
{
    // Rows are random mixtures of two of six prototypes plus a little noise,
    // with random norms: a rare row's common neighbours explain it well.
    const int64_t V = 800, d = 32, P = 6;
    torch::manual_seed(21);
    const auto protos = torch::randn({P, d});
    const auto pick = torch::randint(0, P, {V, 2}, torch::kLong);
    const auto mix = torch::rand({V, 1});
    auto E = mix * protos.index_select(0, pick.select(1, 0)) +
             (1 - mix) * protos.index_select(0, pick.select(1, 1));
    E = (E + 0.05 * torch::randn({V, d})) * (0.5 + 1.5 * torch::rand({V, 1}));
    const auto split = even_odd_split(V);
    const double lle =
        mean_rare_cosine(PartialSparseTokenEmbedding(fit_partial_sparse(E, split, {.k = 5})), E);
    const double unk = mean_rare_cosine(
        PartialSparseTokenEmbedding(fit_partial_sparse(E, split, {.kind = PartialSparseKind::Unk})), E);
    const double pca2 = mean_rare_cosine(
        PartialSparseTokenEmbedding(fit_partial_sparse(E, split, {.kind = PartialSparseKind::PCA, .k = 2})),
        E);
    EXPECT_GT(lle, 0.95);
    EXPECT_LT(unk, 0.6);
    EXPECT_GT(lle, pca2);
}

// --- baselines -------------------------------------------------------------------------

TEST(PartialSparse, UnkUsesTheUnkRowOrTheMeanOfCommonRows)
{
    const int64_t V = 50, d = 6;
    const auto E = sparse_random_table(V, d, 8);
    const auto split = even_odd_split(V);
    PartialSparseTokenEmbedding with_unk(
        fit_partial_sparse(E, split, {.kind = PartialSparseKind::Unk, .unk_id = 7}));
    EXPECT_EQ(with_unk.kind(), "lle-unk");
    const auto rare = with_unk.lookup(ids_of({1, 3, 49}));
    for (int64_t i = 0; i < 3; ++i)
        EXPECT_TRUE(torch::equal(rare[i], E[7]));
    EXPECT_TRUE(torch::equal(with_unk.lookup(ids_of({8})), E.narrow(0, 8, 1)));

    PartialSparseTokenEmbedding no_unk(
        fit_partial_sparse(E, split, {.kind = PartialSparseKind::Unk, .unk_id = -1}));
    const auto mean = E.index_select(0, ids_of(split.common)).mean(0);
    EXPECT_TRUE(torch::allclose(no_unk.lookup(ids_of({5}))[0], mean, 1e-6, 1e-6));
    EXPECT_FALSE(torch::allclose(mean, E.mean(0), 1e-3, 1e-3)); // not the mean of all rows
}

TEST(PartialSparse, PcaBaselineMatchesLowRankPcaAndIsExactAtFullRank)
{
    const int64_t V = 300, d = 12;
    const auto E = sparse_random_table(V, d, 9);
    const auto split = even_odd_split(V);
    const auto rare = ids_of(split.rare);
    PartialSparseTokenEmbedding full(fit_partial_sparse(E, split, {.kind = PartialSparseKind::PCA, .k = d}));
    EXPECT_EQ(full.kind(), "lle-pca");
    EXPECT_LT((full.lookup(rare) - E.index_select(0, rare)).abs().max().item<float>(), 1e-4);
    // k < d: the rare rows are those of METHODS 1's PCA of the whole table.
    const auto fit = fit_partial_sparse(E, split, {.kind = PartialSparseKind::PCA, .k = 4});
    LowRankTokenEmbedding pca(fit_low_rank(E, LowRankKind::PCA, 4));
    PartialSparseTokenEmbedding emb(fit);
    EXPECT_TRUE(torch::allclose(emb.lookup(rare), pca.lookup(rare), 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(fit.mean, E.mean(0), 1e-5, 1e-5));
    EXPECT_GT((emb.lookup(rare) - E.index_select(0, rare)).abs().max().item<float>(), 1e-2);
    EXPECT_TRUE(torch::equal(emb.lookup(ids_of(split.common)), E.index_select(0, ids_of(split.common))));
}

// --- accounting and the head ------------------------------------------------------------

// Ids are stored at the width V needs: int16 up to V = 32768 (ids 0..32767), else int32.
TEST(PartialSparse, IndicesTakeTheWidthTheVocabularyNeeds)
{
    EXPECT_EQ(index_dtype(50), torch::kInt16);
    EXPECT_EQ(index_dtype(32000), torch::kInt16); // tinyllama
    EXPECT_EQ(index_dtype(32768), torch::kInt16);
    EXPECT_EQ(index_dtype(32769), torch::kInt32);
    EXPECT_EQ(index_bytes_for(32000), 2);
    EXPECT_EQ(index_bytes_for(50257), 4); // gpt2
}

TEST(PartialSparse, ParameterCounts)
{
    const auto E = sparse_random_table(50, 8, 10);
    std::vector<int64_t> common, rare;
    for (int64_t v = 0; v < 50; ++v)
        (v < 20 ? common : rare).push_back(v);
    const auto split = make_split(common, rare);
    // C d = 160 and the C = 20 common ids (issue 36: every stored index counts); R = 30.
    const PartialSparseTokenEmbedding lle(fit_partial_sparse(E, split, {.k = 3}));
    EXPECT_EQ(lle.parameter_count(), 160 + 20 + 30 * 7);
    EXPECT_EQ(lle.index_values(), 20 + 30 * 3);
    EXPECT_EQ(PartialSparseTokenEmbedding(fit_partial_sparse(E, split, {.kind = PartialSparseKind::Unk}))
                  .parameter_count(),
              160 + 20 + 8);
    EXPECT_EQ(
        PartialSparseTokenEmbedding(fit_partial_sparse(E, split, {.kind = PartialSparseKind::PCA, .k = 4}))
            .parameter_count(),
        160 + 20 + 30 * 4 + 4 * 8 + 8);
    EXPECT_STREQ(partial_sparse_method_name(PartialSparseKind::LLE), "lle");
    EXPECT_STREQ(partial_sparse_method_name(PartialSparseKind::Unk), "lle-unk");
    EXPECT_STREQ(partial_sparse_method_name(PartialSparseKind::PCA), "lle-pca");
}

TEST(PartialSparse, ProjectEqualsLookupOfAllIdsTimesHidden)
{
    const int64_t V = 90, d = 10;
    const auto E = sparse_random_table(V, d, 12);
    const auto split = even_odd_split(V);
    const auto h = torch::randn({5, d});
    for (auto kind : {PartialSparseKind::LLE, PartialSparseKind::Unk, PartialSparseKind::PCA}) {
        PartialSparseTokenEmbedding emb(fit_partial_sparse(E, split, {.kind = kind, .k = 3}));
        const auto table = emb.lookup(torch::arange(V, torch::kLong));
        const auto logits = emb.project(h);
        ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{5, V}));
        EXPECT_TRUE(torch::allclose(logits, torch::matmul(h, table.t()), 1e-5, 1e-5)) << emb.kind();
        // Any id shape; out-of-range ids are refused.
        const auto ids = torch::tensor({{4, 1, 89}, {0, 7, 7}}, torch::kLong);
        const auto rows = emb.lookup(ids);
        ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{2, 3, d}));
        EXPECT_TRUE(
            torch::allclose(rows.reshape({6, d}), table.index_select(0, ids.reshape({-1})), 1e-6, 1e-6));
        EXPECT_THROW(emb.lookup(ids_of({3, V})), InputError);
        EXPECT_THROW(emb.lookup(ids_of({-1})), InputError);
    }
}

// --- bad input ------------------------------------------------------------------------

TEST(PartialSparse, FitRejectsBadOptionsAndSplits)
{
    const int64_t V = 20, d = 4;
    auto E = sparse_random_table(V, d, 13);
    const auto split = even_odd_split(V);
    EXPECT_THROW(fit_partial_sparse(E, split, {.k = 0}), InputError);
    EXPECT_THROW(fit_partial_sparse(E, split, {.k = 11}), InputError); // |V_C| = 10
    EXPECT_NO_THROW(fit_partial_sparse(E, split, {.k = 10}));
    EXPECT_THROW(fit_partial_sparse(E, split, {.kind = PartialSparseKind::PCA, .k = 5}), InputError);
    EXPECT_THROW(fit_partial_sparse(E, split, {.reg = -1}), InputError);
    std::vector<int64_t> everything(V);
    std::iota(everything.begin(), everything.end(), 0);
    EXPECT_THROW(fit_partial_sparse(E, make_split({}, everything), {.kind = PartialSparseKind::Unk}),
                 InputError);
    EXPECT_THROW(fit_partial_sparse(E, even_odd_split(V + 2), {}), InputError);
    EXPECT_THROW(
        fit_partial_sparse(
            E, make_split({0, 1, 1}, {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}), {}),
        InputError);
    auto bad = E.clone();
    bad[3][1] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THROW(fit_partial_sparse(bad, split, {}), InputError);
    // A cancelled fit throws Cancelled.
    EXPECT_THROW(fit_partial_sparse(E, split, {}, [](int64_t, int64_t) { return false; }), Cancelled);
}

TEST(PartialSparse, ConstructorRejectsABadPartitionOrShapes)
{
    const auto E = sparse_random_table(20, 4, 14);
    const auto fit = fit_partial_sparse(E, even_odd_split(20), {.k = 2});
    EXPECT_NO_THROW(PartialSparseTokenEmbedding{fit});
    auto expect_bad = [](PartialSparseFit f, const char* what) {
        EXPECT_THROW(PartialSparseTokenEmbedding{std::move(f)}, InputError) << what;
    };
    auto f = fit;
    f.rare_ids = fit.rare_ids.clone();
    f.rare_ids[0] = 0; // also in V_C, and id 1 is missing
    expect_bad(f, "duplicate id");
    f = fit;
    f.rare_ids = fit.rare_ids.clone();
    f.rare_ids[0] = 20;
    expect_bad(f, "id out of range");
    f = fit;
    f.rare_ids = fit.rare_ids.narrow(0, 0, 9).clone();
    expect_bad(f, "missing id");
    f = fit;
    f.weights = fit.weights.narrow(1, 0, 1).clone();
    expect_bad(f, "weights shape");
    f = fit;
    f.neighbour_ids = fit.neighbour_ids.clone();
    f.neighbour_ids[0][0] = 1; // a rare id
    expect_bad(f, "neighbour outside V_C");
    f = fit;
    f.common_rows = fit.common_rows.narrow(1, 0, 3).clone();
    expect_bad(f, "common rows shape");
    f = fit;
    f.kind = PartialSparseKind::PCA; // no basis
    expect_bad(f, "pca without its tensors");
}

// --- coverage -------------------------------------------------------------------------

TEST(PartialSparse, CoverageCountsTokensAndWholeLines)
{
    const ByteTokenizer tok;
    std::vector<int64_t> common{'a', 'b'}, rare;
    for (int64_t v = 0; v < 256; ++v)
        if (v != 'a' && v != 'b')
            rare.push_back(v);
    const auto split = make_split(common, rare);
    // Tokens: a b \n b a \n \n a c \r \n -> 5 of 11 in V_C. Lines "ab", "ba", "ac"
    // (the empty line is skipped, CR LF ends like LF): 2 of 3 covered.
    const auto c = coverage_of(split, tok, "ab\nba\n\nac\r\n");
    EXPECT_EQ(c.tokens, 11);
    EXPECT_DOUBLE_EQ(c.token_coverage, 5.0 / 11.0);
    EXPECT_EQ(c.lines, 3);
    EXPECT_DOUBLE_EQ(c.line_coverage, 2.0 / 3.0);
    const auto none = coverage_of(split, tok, "");
    EXPECT_EQ(none.tokens, 0);
    EXPECT_EQ(none.lines, 0);
    // A last line without a newline counts too.
    EXPECT_EQ(coverage_of(split, tok, "ab\nbb").lines, 2);
    EXPECT_DOUBLE_EQ(coverage_of(split, tok, "ab\nbb").line_coverage, 1.0);
}

// Per example (LLE paper Tables 5, 6): each example encoded alone; an example counts
// as covered when every one of its tokens is in V_C.
TEST(PartialSparse, CoverageOfExamplesCountsPerExample)
{
    const ByteTokenizer tok;
    std::vector<int64_t> common{'a', 'b', ' '}, rare;
    for (int64_t v = 0; v < 256; ++v)
        if (v != 'a' && v != 'b' && v != ' ')
            rare.push_back(v);
    const auto split = make_split(common, rare);
    // "ab ba" 5 of 5; "ac" 1 of 2; "b\nb" 2 of 3 (a newline inside an example is a
    // token of that example, not a line break); "" no tokens, covered.
    const auto c = coverage_of_examples(split, tok, {"ab ba", "ac", "b\nb", ""});
    EXPECT_EQ(c.examples, 4);
    EXPECT_EQ(c.tokens, 10);
    EXPECT_DOUBLE_EQ(c.token_coverage, 8.0 / 10.0);
    EXPECT_DOUBLE_EQ(c.example_coverage, 2.0 / 4.0);
    const auto none = coverage_of_examples(split, tok, {});
    EXPECT_EQ(none.examples, 0);
    EXPECT_DOUBLE_EQ(none.example_coverage, 0.0);
}

// --- approximate neighbour search (IVF; issue 21 item 4) ---------------------------

namespace {

// Rows around 24 directions, so k-means lists mean something; a few exact duplicates.
torch::Tensor clustered_table(int64_t V, int64_t d, uint64_t seed)
{
    torch::manual_seed(seed);
    const auto centres = torch::randn({24, d}) * 3;
    auto E = centres.index_select(0, torch::arange(V) % 24) + 0.6 * torch::randn({V, d});
    for (int64_t id : {40, 41, 1000})
        E[id].copy_(E[7]);
    return E;
}

std::string error_of(const std::function<void()>& f)
{
    return test::input_error_of(f, "");
}

} // namespace

TEST(NearestCommonIvf, EveryListProbedIsTheExactSearch)
{
    const int64_t V = 2400, d = 24, k = 5;
    const auto E = clustered_table(V, d, 21);
    const auto split = even_odd_split(V);
    const auto exact = nearest_common(E, split.rare, split.common, k);
    EXPECT_EQ(exact.knn.kind, KnnKind::Exact);
    for (const int64_t nlist : {1, 7, 40}) {
        const auto ivf = nearest_common(E, split.rare, split.common, k,
                                        {.kind = KnnKind::IVF, .nlist = nlist, .nprobe = nlist, .seed = 5});
        EXPECT_TRUE(torch::equal(ivf.ids, exact.ids)) << "nlist " << nlist;
        EXPECT_TRUE(torch::allclose(ivf.cosines, exact.cosines)) << "nlist " << nlist;
        EXPECT_EQ(ivf.knn.kind, KnnKind::IVF);
        EXPECT_EQ(ivf.knn.nlist, nlist);
        EXPECT_EQ(ivf.knn.recall_at_k, 1.0);
        EXPECT_EQ(ivf.knn.recall_sample, 1000);
    }
    // Ties to the lower id: rows 40 and 1000 equal row 7, whose nearest commons they are.
    const auto ivf =
        nearest_common(E, {7}, {40, 1000, 2, 4, 6, 8}, 2, {.kind = KnnKind::IVF, .nlist = 2, .nprobe = 2});
    EXPECT_TRUE(torch::equal(ivf.ids[0], ids_of({40, 1000})));
}

TEST(NearestCommonIvf, ReportsRecallAndIsDeterministicForASeed)
{
    const int64_t V = 3000, d = 24, k = 4;
    const auto E = clustered_table(V, d, 22);
    const auto split = even_odd_split(V);
    const KnnOptions options{.kind = KnnKind::IVF, .nlist = 48, .nprobe = 3, .seed = 9, .recall_sample = 300};
    const auto a = nearest_common(E, split.rare, split.common, k, options);
    const auto b = nearest_common(E, split.rare, split.common, k, options);
    EXPECT_TRUE(torch::equal(a.ids, b.ids));
    EXPECT_EQ(a.knn.recall_at_k, b.knn.recall_at_k);
    EXPECT_EQ(a.knn.recall_sample, 300);
    EXPECT_GT(a.knn.recall_at_k, 0.0);
    EXPECT_LE(a.knn.recall_at_k, 1.0);
    EXPECT_GE(a.knn.kmeans_iterations, 1);
    // The reported recall is the share of the exact neighbours found; over all rows here.
    const auto exact = nearest_common(E, split.rare, split.common, k);
    const auto all =
        nearest_common(E, split.rare, split.common, k,
                       {.kind = KnnKind::IVF, .nlist = 48, .nprobe = 3, .seed = 9, .recall_sample = V});
    int64_t found = 0;
    for (int64_t i = 0; i < exact.ids.size(0); ++i)
        for (int64_t p = 0; p < k; ++p)
            found += (all.ids[i] == exact.ids[i][p]).any().item<bool>() ? 1 : 0;
    EXPECT_DOUBLE_EQ(all.knn.recall_at_k,
                     static_cast<double>(found) / static_cast<double>(exact.ids.numel()));
    EXPECT_TRUE(torch::equal(all.ids, a.ids)); // the sample does not change the search
    // Defaults resolve from |V_C|; the fit records the search and compress_table reports it.
    const auto resolved = resolved_knn_options({.kind = KnnKind::IVF}, 1500);
    EXPECT_EQ(resolved.nlist, 77); // round(2 sqrt(1500))
    EXPECT_EQ(resolved.nprobe, 5); // ceil(77 / 16)
    const auto fit = fit_partial_sparse(E, split, {.k = k, .knn = options});
    EXPECT_TRUE(torch::equal(fit.neighbour_ids, a.ids));
    EXPECT_EQ(fit.knn.recall_at_k, a.knn.recall_at_k);
    const auto c = compress_table(
        E, {.method = "lle", .split = std::make_shared<FrequencySplit>(split), .k = k, .knn = options});
    const auto& j = c.fit["knn"];
    EXPECT_EQ(j["kind"], "ivf");
    EXPECT_EQ(j["nlist"], 48);
    EXPECT_EQ(j["nprobe"], 3);
    EXPECT_EQ(j["recall_sample"], 300);
    EXPECT_DOUBLE_EQ(j["recall_at_k"].get<double>(), a.knn.recall_at_k);
    EXPECT_EQ(spec_json(c.spec)["knn"], "ivf");
    const auto plain =
        compress_table(E, {.method = "lle", .split = std::make_shared<FrequencySplit>(split), .k = k});
    EXPECT_EQ(plain.fit["knn"]["kind"], "exact");
    EXPECT_FALSE(plain.fit["knn"].contains("recall_at_k"));
}

TEST(NearestCommonIvf, RejectsBadOptionsNamingThem)
{
    const int64_t V = 40;
    const auto E = sparse_random_table(V, 6, 8);
    const auto split = even_odd_split(V); // |V_C| = 20
    auto fit_error = [&](KnnOptions o) {
        o.kind = KnnKind::IVF;
        return error_of([&] { fit_partial_sparse(E, split, {.k = 3, .knn = o}); });
    };
    EXPECT_NE(fit_error({.nlist = 21}).find("nlist 21 is outside 1..|V_C| = 20"), std::string::npos);
    EXPECT_NE(fit_error({.nlist = -1}).find("nlist"), std::string::npos);
    EXPECT_NE(fit_error({.nlist = 4, .nprobe = 5}).find("nprobe 5 is outside 1..nlist = 4"),
              std::string::npos);
    EXPECT_NE(fit_error({.nlist = 4, .nprobe = -2}).find("nprobe"), std::string::npos);
    EXPECT_EQ(fit_error({.nlist = 20, .nprobe = 1}), "");
    EXPECT_NE(error_of([] { parse_knn_kind("hnsw"); }).find("knn 'hnsw' must be exact or ivf"),
              std::string::npos);
    EXPECT_EQ(parse_knn_kind("ivf"), KnnKind::IVF);
    EXPECT_STREQ(knn_kind_name(KnnKind::Exact), "exact");
}

TEST(NearestCommonIvf, RequestJsonCarriesTheSearch)
{
    const auto j = nlohmann::ordered_json::parse(
        R"({"model": "m", "method": "lle", "freq_text": "f.txt", "keep_ratio": 0.5, "k": 5,)"
        R"( "knn": "ivf", "nlist": 64, "nprobe": 8, "seed": 3})");
    const auto r = request_from_json(j);
    EXPECT_EQ(r.knn, "ivf");
    EXPECT_EQ(r.nlist, 64);
    EXPECT_EQ(r.nprobe, 8);
    EXPECT_EQ(request_json(r), j);
    EXPECT_EQ(request_json(request_from_json(request_json(r))), j);
    EXPECT_NE(describe_request(r).find("ivf 64/8"), std::string::npos);
    // Exact is the default and is left out.
    auto exact = j;
    exact.erase("nlist");
    exact.erase("nprobe");
    exact["knn"] = "exact";
    EXPECT_FALSE(request_json(request_from_json(exact)).contains("knn"));
    auto message = [&](const std::string& key, const nlohmann::ordered_json& value,
                       const std::string& method = "lle") {
        auto bad = j;
        bad["method"] = method;
        bad[key] = value;
        return error_of([&] { request_from_json(bad); });
    };
    EXPECT_NE(message("knn", "hnsw").find("knn 'hnsw' must be exact or ivf"), std::string::npos);
    EXPECT_NE(message("nprobe", 65).find("nprobe 65 must be 0 (automatic) or 1..nlist = 64"),
              std::string::npos);
    EXPECT_NE(message("nlist", -3).find("nlist -3"), std::string::npos);
    EXPECT_NE(message("knn", "exact").find("nlist applies to knn ivf"), std::string::npos);
    EXPECT_NE(message("nlist", 64, "lle-pca").find("knn does not apply to method lle-pca"),
              std::string::npos);
    EXPECT_NE(message("nlist", "many").find("nlist\" must be an integer"), std::string::npos);
}

// at::parallel_for ran serially until the engine's files got OpenMP: both searches, the
// LLE solves and the rare rows' rebuild split over 2 threads equal the 1-thread ones bit
// for bit.
TEST(PartialSparse, SearchFitAndLookupAreTheSameOnOneAndTwoThreads)
{
    const int64_t V = 6000;
    const auto E = sparse_random_table(V, 32, 23);
    const auto split = even_odd_split(V); // 3,000 rare rows against 3,000 common
    const int threads = at::get_num_threads();
    for (const auto kind : {KnnKind::Exact, KnnKind::IVF}) {
        const KnnOptions knn{.kind = kind, .seed = 4, .recall_sample = 200};
        std::vector<NearestCommon> found;
        std::vector<PartialSparseFit> fits;
        std::vector<torch::Tensor> rows;
        for (const int thread_count : {1, 2}) {
            at::set_num_threads(thread_count);
            found.push_back(nearest_common(E, split.rare, split.common, 5, knn));
            fits.push_back(fit_partial_sparse(E, split, {.k = 5, .knn = knn}));
            rows.push_back(PartialSparseTokenEmbedding(fits.back()).lookup(torch::arange(V)));
        }
        at::set_num_threads(threads);
        const std::string name = knn_kind_name(kind);
        EXPECT_TRUE(torch::equal(found[1].ids, found[0].ids)) << name;
        EXPECT_TRUE(torch::equal(found[1].cosines, found[0].cosines)) << name;
        EXPECT_EQ(found[1].knn.recall_at_k, found[0].knn.recall_at_k) << name;
        EXPECT_EQ(found[1].knn.kmeans_iterations, found[0].knn.kmeans_iterations) << name;
        EXPECT_TRUE(torch::equal(fits[1].neighbour_ids, fits[0].neighbour_ids)) << name;
        EXPECT_TRUE(torch::equal(fits[1].weights, fits[0].weights)) << name;
        EXPECT_TRUE(torch::equal(fits[1].norms, fits[0].norms)) << name;
        EXPECT_TRUE(torch::equal(rows[1], rows[0])) << name;
        // The search is the fit's, and the common rows stay exact.
        EXPECT_TRUE(torch::equal(fits[0].neighbour_ids, found[0].ids)) << name;
        EXPECT_TRUE(torch::equal(rows[0].index_select(0, ids_of(split.common)),
                                 E.index_select(0, ids_of(split.common))))
            << name;
    }
}
