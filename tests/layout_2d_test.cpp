// t-SNE (layout_2d.hpp) on known configurations: well-separated Gaussian
// clusters stay separated (each point's 2-D neighbours are from its cluster),
// rows outside the sample land with their cluster, the perplexity calibration
// hits the target entropy, a seed gives the same layout, bad options are refused.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "embedlab/error.hpp"
#include "embedlab/layout_2d.hpp"

namespace {

struct Clusters {
    std::vector<float> rows;
    std::vector<int> label;
    int64_t n = 0, d = 0;
};

// `k` clusters of `per` points in d dimensions: centres N(0, 8^2) per coordinate,
// points N(centre, 1): centres ~ 8 sqrt(2d) apart, clusters ~ sqrt(2d) wide.
Clusters clusters(int k, int per, int d, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> unit(0, 1);
    Clusters c;
    c.n = k * per;
    c.d = d;
    std::vector<float> centre(static_cast<size_t>(k * d));
    for (auto& v : centre)
        v = 8 * unit(rng);
    for (int i = 0; i < c.n; ++i) {
        const int cl = i % k; // interleaved, so a sample of the ids takes every cluster
        c.label.push_back(cl);
        for (int j = 0; j < d; ++j)
            c.rows.push_back(centre[cl * d + j] + unit(rng));
    }
    return c;
}

// Share of points whose `m` nearest points in the layout are all of their own cluster.
double neighbour_purity(const embedlab::TsneResult& r, const std::vector<int>& label, int m,
                        const std::vector<int64_t>& among)
{
    int pure = 0;
    for (int64_t i : among) {
        std::vector<std::pair<double, int64_t>> d;
        for (int64_t j : among)
            if (j != i)
                d.push_back({std::pow(r.x[i] - r.x[j], 2) + std::pow(r.y[i] - r.y[j], 2), j});
        std::partial_sort(d.begin(), d.begin() + m, d.end());
        bool all = true;
        for (int t = 0; t < m; ++t)
            all = all && label[d[t].second] == label[i];
        pure += all;
    }
    return static_cast<double>(pure) / static_cast<double>(among.size());
}

// Share of points nearer their own cluster's 2-D centroid (over `centroid_of`) than any other.
double centroid_purity(const embedlab::TsneResult& r, const std::vector<int>& label, int k,
                       const std::vector<int64_t>& centroid_of, const std::vector<int64_t>& points)
{
    std::vector<double> cx(k), cy(k), count(k);
    for (int64_t i : centroid_of) {
        cx[label[i]] += r.x[i];
        cy[label[i]] += r.y[i];
        ++count[label[i]];
    }
    for (int c = 0; c < k; ++c) {
        cx[c] /= count[c];
        cy[c] /= count[c];
    }
    int right = 0;
    for (int64_t i : points) {
        int best = 0;
        for (int c = 1; c < k; ++c)
            if (std::hypot(r.x[i] - cx[c], r.y[i] - cy[c]) < std::hypot(r.x[i] - cx[best], r.y[i] - cy[best]))
                best = c;
        right += best == label[i];
    }
    return static_cast<double>(right) / static_cast<double>(points.size());
}

std::vector<int64_t> all_ids(int64_t n)
{
    std::vector<int64_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    return v;
}

TEST(Tsne, WellSeparatedGaussianClustersStaySeparated)
{
    const auto c = clusters(5, 80, 50, 1);
    const embedlab::TsneOptions o{.perplexity = 20, .iterations = 500, .seed = 3};
    const auto r = embedlab::tsne_layout(c.rows.data(), c.n, c.d, o);
    ASSERT_EQ(r.x.size(), static_cast<size_t>(c.n));
    EXPECT_EQ(r.sample, all_ids(c.n)) << "fewer rows than the sample: all of them";
    EXPECT_DOUBLE_EQ(r.options.learning_rate, 50.0) << "max(400 / 12 / 4, 50)";
    EXPECT_GE(neighbour_purity(r, c.label, 10, all_ids(c.n)), 0.99);
    EXPECT_EQ(centroid_purity(r, c.label, 5, all_ids(c.n), all_ids(c.n)), 1.0);
    // The clusters are apart: the nearest two centroids farther than a cluster's spread.
    EXPECT_GT(r.kl, 0.0);
    EXPECT_LT(r.kl, 2.0);
    // Exact repulsion (theta 0) finds the same kind of layout with a similar KL.
    auto exact = o;
    exact.theta = 0;
    const auto e = embedlab::tsne_layout(c.rows.data(), c.n, c.d, exact);
    EXPECT_EQ(centroid_purity(e, c.label, 5, all_ids(c.n), all_ids(c.n)), 1.0);
    EXPECT_NEAR(e.kl, r.kl, 0.15 * r.kl + 0.05);
}

TEST(Tsne, RowsOutsideTheSampleLandWithTheirCluster)
{
    const auto c = clusters(4, 500, 80, 2); // 2000 rows, 80-D: reduced to 50 PCs first
    const embedlab::TsneOptions o{.perplexity = 30, .iterations = 400, .seed = 5, .sample = 400};
    int64_t last = -1;
    bool advanced = false;
    const auto r = embedlab::tsne_layout(c.rows.data(), c.n, c.d, o, [&](int64_t done, int64_t total) {
        advanced = advanced || done > last;
        last = done;
        return done <= total;
    });
    EXPECT_TRUE(advanced);
    ASSERT_EQ(r.sample.size(), 400u);
    EXPECT_TRUE(std::is_sorted(r.sample.begin(), r.sample.end()));
    EXPECT_EQ(std::set<int64_t>(r.sample.begin(), r.sample.end()).size(), 400u);
    std::vector<int64_t> rest;
    for (int64_t i = 0, s = 0; i < c.n; ++i)
        if (s < 400 && r.sample[s] == i)
            ++s;
        else
            rest.push_back(i);
    EXPECT_EQ(centroid_purity(r, c.label, 4, r.sample, r.sample), 1.0);
    EXPECT_GE(centroid_purity(r, c.label, 4, r.sample, rest), 0.99);
    for (size_t i = 0; i < r.x.size(); ++i)
        ASSERT_TRUE(std::isfinite(r.x[i]) && std::isfinite(r.y[i])) << i;
    // A cancel stops it.
    EXPECT_THROW(
        embedlab::tsne_layout(c.rows.data(), c.n, c.d, o, [](int64_t done, int64_t) { return done < 100; }),
        embedlab::Cancelled);
}

TEST(Tsne, PerplexityCalibrationHitsTheTargetEntropy)
{
    std::mt19937 rng(4);
    std::normal_distribution<float> unit(0, 1);
    const int64_t n = 300, d = 10;
    std::vector<float> rows(static_cast<size_t>(n * d));
    for (auto& v : rows)
        v = unit(rng) * (1 + (&v - rows.data()) % 7); // uneven scales per column
    for (const double perplexity : {5.0, 20.0, 50.0}) {
        const auto a = embedlab::tsne_affinities(rows.data(), n, d, perplexity);
        ASSERT_EQ(a.k, static_cast<int64_t>(3 * perplexity));
        for (int64_t i = 0; i < n; ++i) {
            double sum = 0, h = 0;
            for (int64_t j = 0; j < a.k; ++j) {
                const double p = a.p[i * a.k + j];
                sum += p;
                if (p > 0)
                    h -= p * std::log(p);
            }
            ASSERT_NEAR(sum, 1.0, 1e-9) << i;
            ASSERT_NEAR(h, std::log(perplexity), 1e-4) << "row " << i << " perplexity " << perplexity;
            ASSERT_GT(a.beta[i], 0);
            // The first neighbour is the nearest row, and the nearest has the largest p.
            double best = 1e300;
            int64_t nearest = -1;
            for (int64_t j = 0; j < n; ++j) {
                if (j == i)
                    continue;
                double dist = 0;
                for (int64_t c = 0; c < d; ++c)
                    dist += std::pow(rows[i * d + c] - rows[j * d + c], 2);
                if (dist < best) {
                    best = dist;
                    nearest = j;
                }
            }
            ASSERT_EQ(a.neighbours[i * a.k], nearest);
            ASSERT_GE(a.p[i * a.k], a.p[i * a.k + a.k - 1]);
        }
    }
}

TEST(Tsne, TheSameSeedGivesTheSameLayout)
{
    const auto c = clusters(3, 60, 20, 7);
    embedlab::TsneOptions o{.perplexity = 10, .iterations = 150, .seed = 11, .sample = 120};
    const auto a = embedlab::tsne_layout(c.rows.data(), c.n, c.d, o);
    const auto b = embedlab::tsne_layout(c.rows.data(), c.n, c.d, o);
    EXPECT_EQ(a.x, b.x);
    EXPECT_EQ(a.y, b.y);
    EXPECT_EQ(a.sample, b.sample);
    o.seed = 12;
    const auto other = embedlab::tsne_layout(c.rows.data(), c.n, c.d, o);
    EXPECT_NE(other.x, a.x);
    EXPECT_NE(other.sample, a.sample);
}

// at::parallel_for ran serially until layout_2d.cpp got OpenMP: the affinities and the
// forces split over 2 threads (chunks of at least 128 and 256 points) give the 1-thread
// layout bit for bit (the normaliser Z is summed in point order after the forces).
TEST(Tsne, OneAndTwoThreadsGiveTheSameLayout)
{
    const auto c = clusters(3, 200, 20, 5);
    const embedlab::TsneOptions o{.perplexity = 20, .iterations = 120, .seed = 3, .sample = 600};
    const int threads = at::get_num_threads();
    at::set_num_threads(1);
    const auto one = embedlab::tsne_layout(c.rows.data(), c.n, c.d, o);
    at::set_num_threads(2);
    const auto two = embedlab::tsne_layout(c.rows.data(), c.n, c.d, o);
    at::set_num_threads(threads);
    EXPECT_EQ(two.x, one.x);
    EXPECT_EQ(two.y, one.y);
    EXPECT_EQ(two.kl, one.kl);
    EXPECT_GT(std::abs(one.x[0] - one.x[1]) + std::abs(one.y[0] - one.y[1]), 0.0); // a real layout
}

TEST(Tsne, RefusesBadOptionsWithWhatToChange)
{
    auto c = clusters(2, 20, 5, 9);
    auto message = [&](const embedlab::TsneOptions& o) -> std::string {
        try {
            embedlab::tsne_layout(c.rows.data(), c.n, c.d, o);
        } catch (const embedlab::InputError& e) {
            return e.what();
        }
        return "";
    };
    // 40 rows: perplexity 15 needs more than 45.
    const std::string big = message({.perplexity = 15, .iterations = 10});
    EXPECT_NE(big.find("perplexity 15 is too large for 40 sampled rows"), std::string::npos) << big;
    EXPECT_NE(big.find("below 13.3"), std::string::npos) << big;
    EXPECT_NE(message({.perplexity = 0}).find("perplexity must be a positive"), std::string::npos);
    EXPECT_NE(message({.perplexity = 5, .iterations = 0}).find("iterations must be at least 1"),
              std::string::npos);
    EXPECT_NE(message({.perplexity = 5, .sample = 1}).find("sample must be at least 2"), std::string::npos);
    EXPECT_NE(message({.perplexity = 5, .theta = -1}).find("theta"), std::string::npos);
    c.rows[3 * c.d + 2] = std::nanf("");
    const std::string nan = message({.perplexity = 5, .iterations = 10});
    EXPECT_NE(nan.find("row 3 has a NaN or infinite value at column 2"), std::string::npos) << nan;
    EXPECT_THROW(embedlab::tsne_affinities(c.rows.data(), c.n, c.d, 5), embedlab::InputError);
}

} // namespace

// A benchmark, not a check (run with --gtest_also_run_disabled_tests): the
// workbench's default, 5,000 sampled rows of a 150k x 64 table.
TEST(Tsne, DISABLED_FiveThousandSampledRowsOfAHundredAndFiftyThousand)
{
    const auto c = clusters(20, 7500, 64, 13);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r =
        embedlab::tsne_layout(c.rows.data(), c.n, c.d, {.seed = 1}, [&](int64_t done, int64_t total) {
            if (done <= 10 || done % 250 == 0 || done >= total - 10)
                std::printf("%lld/%lld at %.2f s\n", static_cast<long long>(done),
                            static_cast<long long>(total),
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            return true;
        });
    std::printf("t-SNE of 5,000 of %lld rows: %.2f s, KL %.3f\n", static_cast<long long>(c.n),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), r.kl);
    EXPECT_EQ(r.x.size(), static_cast<size_t>(c.n));
}
