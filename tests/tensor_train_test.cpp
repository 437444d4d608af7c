#include <cmath>
#include <functional>
#include <numeric>

#include "embedlab/accounting.hpp"
#include "embedlab/tensor_train.hpp"
#include "test_support.hpp"

using namespace embedlab;

namespace {

torch::Tensor tt_random_table(int64_t V, int64_t d, uint64_t seed = 5)
{
    torch::manual_seed(seed);
    return torch::randn({V, d}) * torch::linspace(1.5, 0.2, d) + 0.3;
}

// Column-major (Fortran) views, as Oseledets' TT-SVD and eq. (6) use them.
torch::Tensor fortran_matrix(const torch::Tensor& flat, int64_t rows, int64_t cols)
{
    return flat.reshape({cols, rows}).t();
}
torch::Tensor fortran_flat(const torch::Tensor& m)
{
    return m.t().contiguous().reshape({-1});
}

// Reference TT-SVD approximation of one row with plain LAPACK SVDs, written the
// textbook way: X_hat = U_1 (approximation of the remainder), recursively.
torch::Tensor reference_unfolding(const torch::Tensor& M, const std::vector<int64_t>& shape,
                                  const std::vector<int64_t>& ranks, size_t k)
{
    if (k + 1 == shape.size())
        return M; // the last core is the remainder itself
    auto [U, S, Vh] = torch::linalg_svd(M, /*full_matrices=*/false);
    const int64_t r = ranks[k + 1];
    auto C = S.narrow(0, 0, r).unsqueeze(1) * Vh.narrow(0, 0, r); // [r, n]
    const int64_t n = C.size(1), next_rows = r * shape[k + 1];
    auto next = fortran_matrix(fortran_flat(C), next_rows, r * n / next_rows);
    auto approx = reference_unfolding(next, shape, ranks, k + 1);
    return torch::matmul(U.narrow(1, 0, r), fortran_matrix(fortran_flat(approx), r, n));
}

torch::Tensor reference_tt_row(const torch::Tensor& x, const std::vector<int64_t>& shape,
                               const std::vector<int64_t>& ranks)
{
    const auto xd = x.to(torch::kDouble);
    return fortran_flat(
               reference_unfolding(fortran_matrix(xd, shape[0], xd.numel() / shape[0]), shape, ranks, 0))
        .to(torch::kFloat32);
}

} // namespace

TEST(TensorTrain, MatchesTextbookTtSvdRowByRow)
{
    const std::vector<int64_t> shape{4, 3, 5}, ranks{1, 3, 4, 1};
    auto E = tt_random_table(20, 60);
    const auto fit = fit_tensor_train(E, {.shape = shape, .ranks = ranks});
    ASSERT_EQ(fit.cores.size(), 3u);
    EXPECT_EQ(fit.cores[0].sizes(), (std::vector<int64_t>{20, 1, 4, 3}));
    EXPECT_EQ(fit.cores[1].sizes(), (std::vector<int64_t>{20, 3, 3, 4}));
    EXPECT_EQ(fit.cores[2].sizes(), (std::vector<int64_t>{20, 4, 5, 1}));
    TensorTrainTokenEmbedding emb(fit);
    const auto rows = emb.lookup(torch::arange(20, torch::kLong));
    for (int64_t t = 0; t < 20; ++t) {
        const auto ref = reference_tt_row(E[t], shape, ranks);
        EXPECT_LT((rows[t] - ref).norm().item<double>(), 1e-4 * ref.norm().item<double>()) << "row " << t;
        // Truncation really happened: the rows are not reproduced exactly.
        EXPECT_GT((rows[t] - E[t]).norm().item<double>(), 1e-3) << "row " << t;
    }
}

TEST(TensorTrain, CapRanksAreLossless)
{
    const std::vector<int64_t> shape{2, 3, 2, 4};
    auto E = tt_random_table(30, 48);
    const auto caps = tt_rank_caps(shape);
    TensorTrainTokenEmbedding emb(fit_tensor_train(E, {.shape = shape, .ranks = caps}));
    EXPECT_TRUE(torch::allclose(emb.lookup(torch::arange(30, torch::kLong)), E, 1e-4, 1e-4));
    EXPECT_EQ(emb.ranks(), caps);
}

// Eq. (6): x[i_1 + i_2 I_1] = a[i_1] b[i_2] is a rank-1 tensor; the big-endian
// ordering of the same outer product is not.
TEST(TensorTrain, TensorisesRowsLittleEndian)
{
    torch::manual_seed(1);
    auto a = torch::randn({2}), b = torch::randn({3});
    auto little = torch::outer(b, a).reshape({1, 6});
    auto big = torch::outer(a, b).reshape({1, 6});
    const std::vector<int64_t> shape{2, 3}, ranks{1, 1, 1};
    TensorTrainTokenEmbedding fit_little(fit_tensor_train(little, {.shape = shape, .ranks = ranks}));
    TensorTrainTokenEmbedding fit_big(fit_tensor_train(big, {.shape = shape, .ranks = ranks}));
    const auto id = torch::zeros({1}, torch::kLong);
    EXPECT_LT((fit_little.lookup(id) - little).abs().max().item<float>(), 1e-6);
    EXPECT_GT((fit_big.lookup(id) - big).abs().max().item<float>(), 1e-2);
}

TEST(TensorTrain, EpsBoundHoldsForEveryRowAndRanksStayUnderCaps)
{
    const std::vector<int64_t> shape{4, 4, 6};
    auto E = tt_random_table(64, 96, 9);
    for (double eps : {0.05, 0.3, 0.6}) {
        const auto fit = fit_tensor_train(E, {.shape = shape, .eps = eps});
        TensorTrainTokenEmbedding emb(fit);
        const auto rows = emb.lookup(torch::arange(64, torch::kLong));
        const auto rel = (rows - E).norm(2, 1) / E.norm(2, 1);
        EXPECT_LE(rel.max().item<double>(), eps * (1 + 1e-4)) << "eps " << eps;
        const auto caps = tt_rank_caps(shape);
        ASSERT_EQ(fit.ranks.size(), caps.size());
        for (size_t k = 0; k < caps.size(); ++k)
            EXPECT_LE(fit.ranks[k], caps[k]);
        ASSERT_EQ(fit.mean_needed_ranks.size(), 2u);
        EXPECT_LE(fit.mean_needed_ranks[0], static_cast<double>(fit.ranks[1]));
        EXPECT_EQ(fit.eps, eps);
    }
    // A looser bound never needs more parameters.
    const auto tight = fit_tensor_train(E, {.shape = shape, .eps = 0.05});
    const auto loose = fit_tensor_train(E, {.shape = shape, .eps = 0.6});
    EXPECT_LT(TensorTrainTokenEmbedding(loose).parameter_count(),
              TensorTrainTokenEmbedding(tight).parameter_count());
}

TEST(TensorTrain, TiedHeadFromCoresEqualsDenseHead)
{
    auto E = tt_random_table(5000, 24); // more rows than one contraction block
    TensorTrainTokenEmbedding emb(fit_tensor_train(E, {.shape = {2, 3, 4}, .ranks = {1, 2, 3, 1}}));
    auto dense = emb.lookup(torch::arange(5000, torch::kLong));
    auto h = torch::randn({7, 24});
    EXPECT_TRUE(torch::allclose(emb.project(h), torch::matmul(h, dense.t()), 1e-4, 1e-4));
    // Lookups keep the ids' shape.
    auto ids = torch::tensor({{3, 4999}, {0, 17}}, torch::kLong);
    auto looked = emb.lookup(ids);
    EXPECT_EQ(looked.sizes(), (std::vector<int64_t>{2, 2, 24}));
    EXPECT_TRUE(torch::equal(looked[0][1], dense[4999]));
}

TEST(TensorTrain, ParameterCountMatchesAccountingAndCoresRoundTrip)
{
    const std::vector<int64_t> shape{4, 4, 6}, ranks{1, 3, 5, 1};
    auto E = tt_random_table(40, 96);
    TensorTrainTokenEmbedding emb(fit_tensor_train(E, {.shape = shape, .ranks = ranks}));
    EXPECT_EQ(emb.parameter_count(), account_tensor_train(40, shape, ranks).params_after);
    EXPECT_EQ(emb.parameter_count(), 40 * (1 * 4 * 3 + 3 * 4 * 5 + 5 * 6 * 1));
    TensorTrainTokenEmbedding again(shape, emb.cores());
    const auto ids = torch::arange(40, torch::kLong);
    EXPECT_TRUE(torch::equal(again.lookup(ids), emb.lookup(ids)));
}

TEST(TensorTrain, RanksBeyondTheUnfoldingArePaddedWithZeros)
{
    // r_1 = 1 makes the second unfolding 2 x 4, so r_2 = 4 (its cap) cannot all be used.
    const std::vector<int64_t> shape{2, 2, 2, 2};
    auto E = tt_random_table(10, 16);
    TensorTrainTokenEmbedding padded(fit_tensor_train(E, {.shape = shape, .ranks = {1, 1, 4, 2, 1}}));
    TensorTrainTokenEmbedding plain(fit_tensor_train(E, {.shape = shape, .ranks = {1, 1, 2, 2, 1}}));
    const auto ids = torch::arange(10, torch::kLong);
    EXPECT_TRUE(torch::allclose(padded.lookup(ids), plain.lookup(ids), 1e-5, 1e-5));
}

TEST(TensorTrain, BadInputIsRefusedWithAMessage)
{
    auto E = tt_random_table(10, 24);
    auto message = [&](const TensorTrainOptions& o, const torch::Tensor& t) {
        try {
            fit_tensor_train(t, o);
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message({.shape = {4, 5}, .ranks = {1, 2, 1}}, E).find("product"), std::string::npos);
    EXPECT_NE(message({.shape = {4, 6}, .ranks = {1, 5, 1}}, E).find("5"), std::string::npos);
    EXPECT_NE(message({.shape = {4, 6}, .ranks = {1, 2}}, E), "no error");
    EXPECT_NE(message({.shape = {4, 6}, .eps = 0}, E).find("(0, 1)"), std::string::npos);
    EXPECT_NE(message({.shape = {4, 6}, .eps = 1.0}, E).find("(0, 1)"), std::string::npos);
    EXPECT_NE(message({}, E).find("empty"), std::string::npos);
    auto bad = E.clone();
    bad[7][3] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_NE(message({.shape = {4, 6}, .ranks = {1, 2, 1}}, bad).find("row 7"), std::string::npos);
    TensorTrainTokenEmbedding emb(fit_tensor_train(E, {.shape = {4, 6}, .ranks = {1, 2, 1}}));
    EXPECT_THROW(emb.lookup(torch::tensor({10}, torch::kLong)), InputError);
    EXPECT_THROW(TensorTrainTokenEmbedding({4, 6}, {emb.cores()[0]}), InputError);
}

namespace {

// Each row's own eps ranks, computed the textbook way with LAPACK singular values:
// at each step keep the fewest values whose discarded energy stays within
// delta^2 = eps^2 / (N - 1) ||x||^2 (Oseledets' Algorithm 1, TensorSLM eq. 14).
std::vector<int64_t> reference_row_ranks(const torch::Tensor& x, const std::vector<int64_t>& shape,
                                         double eps)
{
    const auto xd = x.to(torch::kDouble);
    const int64_t N = static_cast<int64_t>(shape.size());
    const double delta2 = eps * eps / static_cast<double>(N - 1) * xd.pow(2).sum().item<double>();
    std::vector<int64_t> ranks{1};
    auto M = fortran_matrix(xd, shape[0], xd.numel() / shape[0]);
    for (int64_t k = 0; k + 1 < N; ++k) {
        auto [U, S, Vh] = torch::linalg_svd(M, /*full_matrices=*/false);
        const int64_t n = S.size(0);
        int64_t r = n;
        double tail = 0;
        for (int64_t j = n - 1; j >= 1; --j) {
            tail += S[j].item<double>() * S[j].item<double>();
            if (tail > delta2)
                break;
            r = j;
        }
        ranks.push_back(r);
        auto C = S.narrow(0, 0, r).unsqueeze(1) * Vh.narrow(0, 0, r);
        const int64_t next_rows = r * shape[k + 1];
        M = fortran_matrix(fortran_flat(C), next_rows, C.numel() / next_rows);
    }
    ranks.push_back(1);
    return ranks;
}

// Rows of very different TT ranks: a third are rank-1 outer products, the rest noise.
torch::Tensor mixed_rank_table(int64_t V, const std::vector<int64_t>& shape)
{
    auto E =
        tt_random_table(V, std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()), 11);
    for (int64_t t = 0; t < V; t += 3) {
        auto row = torch::ones({1});
        for (auto it = shape.rbegin(); it != shape.rend(); ++it) // little-endian: I_1 fastest
            row = torch::outer(row, torch::randn({*it})).reshape({-1});
        E[t] = row;
    }
    return E;
}

} // namespace

// Issue 20 item 1: with eps every token keeps the ranks its own TT-SVD needs, and
// is counted (and looked up) with them.
TEST(TensorTrain, PerTokenRanksAreEachRowsOwnAndCountedPerToken)
{
    const std::vector<int64_t> shape{4, 4, 6};
    const int64_t V = 60, N = 3;
    const double eps = 0.4;
    const auto E = mixed_rank_table(V, shape);
    const auto fit = fit_tensor_train(E, {.shape = shape, .eps = eps});
    ASSERT_TRUE(fit.token_ranks.defined());
    ASSERT_EQ(fit.token_ranks.sizes(), (std::vector<int64_t>{V, N - 1}));
    TensorTrainTokenEmbedding emb(fit);
    ASSERT_TRUE(emb.per_token_ranks());
    const auto rows = emb.lookup(torch::arange(V, torch::kLong));
    int64_t values = 0;
    std::vector<int64_t> largest(N + 1, 1);
    std::vector<int32_t> own_ranks;
    for (int64_t t = 0; t < V; ++t) {
        const auto own = reference_row_ranks(E[t], shape, eps);
        for (int64_t k = 1; k < N; ++k) {
            EXPECT_EQ(fit.token_ranks[t][k - 1].item<int32_t>(), own[k]) << "row " << t << " r_" << k;
            largest[k] = std::max(largest[k], own[k]);
            own_ranks.push_back(static_cast<int32_t>(own[k]));
        }
        for (int64_t k = 0; k < N; ++k)
            values += own[k] * shape[k] * own[k + 1];
        // Each row is its own truncated TT-SVD, and meets its bound.
        const auto ref = reference_tt_row(E[t], shape, own);
        EXPECT_LT((rows[t] - ref).norm().item<double>(), 1e-4 * E[t].norm().item<double>()) << "row " << t;
        EXPECT_LE((rows[t] - E[t]).norm().item<double>(), eps * (1 + 1e-4) * E[t].norm().item<double>());
    }
    EXPECT_EQ(fit.ranks, largest); // the cores are padded to each position's largest
    // Stored: each token's own core values plus its N - 1 rank values.
    EXPECT_EQ(emb.parameter_count(), values + V * (N - 1));
    const auto a = account_tensor_train_per_token(V, shape, own_ranks);
    EXPECT_EQ(a.params_after, emb.parameter_count());
    EXPECT_TRUE(a.per_token_ranks);
    EXPECT_NEAR(a.mean_params_per_token, static_cast<double>(values + V * (N - 1)) / V, 1e-12);
    // The rank-1 rows need rank 1 everywhere, so the uniform set pays for them.
    EXPECT_EQ(fit.token_ranks[0][0].item<int32_t>(), 1);
    const auto uniform = fit_tensor_train(E, {.shape = shape, .eps = eps, .uniform_ranks = true});
    EXPECT_FALSE(uniform.token_ranks.defined());
    EXPECT_EQ(uniform.ranks, largest);
    const int64_t uniform_values = TensorTrainTokenEmbedding(uniform).parameter_count();
    EXPECT_EQ(uniform_values, account_tensor_train(V, shape, largest).params_after);
    EXPECT_LT(emb.parameter_count(), uniform_values);
    EXPECT_LT(a.flops_lookup, account_tensor_train(V, shape, largest).flops_lookup);
}

TEST(TensorTrain, PerTokenLookupAndHeadNeverReadThePadding)
{
    const std::vector<int64_t> shape{4, 4, 6};
    const auto E = mixed_rank_table(40, shape);
    const auto fit = fit_tensor_train(E, {.shape = shape, .eps = 0.3});
    TensorTrainTokenEmbedding emb(fit);
    // The padded layout of directories written before issue 36, with garbage where a
    // token's ranks end: nothing may change.
    std::vector<torch::Tensor> cores;
    for (const auto& c : emb.cores())
        cores.push_back(c.clone());
    const auto r = fit.token_ranks;
    for (int64_t t = 0; t < 40; ++t) {
        const int64_t r1 = r[t][0].item<int32_t>(), r2 = r[t][1].item<int32_t>();
        cores[0][t].narrow(2, r1, fit.ranks[1] - r1).fill_(1e3);
        cores[1][t].narrow(0, r1, fit.ranks[1] - r1).fill_(-1e3);
        cores[1][t].narrow(2, r2, fit.ranks[2] - r2).fill_(7e2);
        cores[2][t].narrow(0, r2, fit.ranks[2] - r2).fill_(5e2);
    }
    TensorTrainTokenEmbedding noisy(shape, cores, r);
    const auto ids = torch::arange(40, torch::kLong);
    EXPECT_TRUE(torch::equal(noisy.lookup(ids), emb.lookup(ids)));
    const auto h = torch::randn({5, 96});
    EXPECT_TRUE(torch::allclose(noisy.project(h), torch::matmul(h, emb.rebuilt_rows().t()), 1e-4, 1e-4));
    EXPECT_TRUE(torch::equal(noisy.token_ranks(), r));
    // Token ranks must fit the cores and the vocabulary.
    auto too_big = r.clone();
    too_big[3][1] = static_cast<int32_t>(fit.ranks[2] + 1);
    const auto padded = emb.cores();
    try {
        TensorTrainTokenEmbedding bad(shape, padded, too_big);
        FAIL() << "ranks beyond the cores were accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("token 3 has rank r_2"), std::string::npos) << e.what();
    }
    EXPECT_THROW(TensorTrainTokenEmbedding(shape, padded, r.narrow(0, 0, 39)), InputError);
    EXPECT_THROW(TensorTrainTokenEmbedding(shape, padded, r.to(torch::kFloat32)), InputError);
}

// Issue 36 item 1: what is counted is what is stored. Per-token cores hold each
// token's own r_{k-1} x I_k x r_k values and nothing else (they were padded to each
// position's largest rank, in memory and on disk, while only the own values were
// counted); the packed cores look up what the padded ones did.
TEST(TensorTrain, PerTokenCoresHoldOnlyEachTokensOwnValues)
{
    const std::vector<int64_t> shape{4, 4, 6};
    const int64_t V = 60, N = 3;
    const auto E = mixed_rank_table(V, shape);
    const auto fit = fit_tensor_train(E, {.shape = shape, .eps = 0.4});
    ASSERT_TRUE(fit.token_ranks.defined());
    const auto r = fit.token_ranks;
    auto own = [&](int64_t t, int64_t k) -> int64_t {
        return k == 0 || k == N ? 1 : r[t][k - 1].item<int32_t>();
    };
    int64_t stored = 0;
    for (int64_t k = 0; k < N; ++k) {
        int64_t values = 0;
        for (int64_t t = 0; t < V; ++t)
            values += own(t, k) * shape[k] * own(t, k + 1);
        ASSERT_EQ(fit.cores[k].dim(), 1) << "core " << k;
        EXPECT_EQ(fit.cores[k].numel(), values) << "core " << k;
        stored += values;
    }
    TensorTrainTokenEmbedding emb(fit);
    const auto packed = emb.packed_cores();
    int64_t held = r.numel();
    for (int64_t k = 0; k < N; ++k) {
        EXPECT_TRUE(torch::equal(packed[k], fit.cores[k])) << "core " << k;
        held += packed[k].numel();
    }
    // The count is the elements stored: the packed values plus the ranks.
    EXPECT_EQ(emb.parameter_count(), stored + V * (N - 1));
    EXPECT_EQ(emb.parameter_count(), held);
    std::vector<int32_t> ranks(r.data_ptr<int32_t>(), r.data_ptr<int32_t>() + r.numel());
    const auto a = account_tensor_train_per_token(V, shape, ranks);
    EXPECT_EQ(a.params_after, held);
    EXPECT_EQ(a.index_values, V * (N - 1));
    // Token t's core k is its slice of the padded core, row by row.
    const auto padded = emb.cores();
    int64_t offset = 0;
    for (int64_t t = 0; t < V; ++t) {
        const auto mine =
            padded[1][t].narrow(0, 0, own(t, 1)).narrow(2, 0, own(t, 2)).contiguous().reshape({-1});
        EXPECT_TRUE(torch::equal(fit.cores[1].narrow(0, offset, mine.numel()), mine)) << "token " << t;
        offset += mine.numel();
    }
    // Packed and padded (an earlier directory) give the same rows and head.
    const TensorTrainTokenEmbedding from_padded(shape, padded, r);
    const TensorTrainTokenEmbedding from_packed(shape, packed, r);
    const auto ids = torch::arange(V, torch::kLong);
    EXPECT_TRUE(torch::equal(from_padded.lookup(ids), emb.lookup(ids)));
    EXPECT_TRUE(torch::equal(from_packed.lookup(ids), emb.lookup(ids)));
    EXPECT_EQ(from_padded.parameter_count(), held);
    for (int64_t t = 0; t < V; ++t)
        EXPECT_LE((emb.lookup(torch::tensor({t}, torch::kLong))[0] - E[t]).norm().item<double>(),
                  0.4 * (1 + 1e-4) * E[t].norm().item<double>());
    // A packed core of the wrong length, or with a NaN, is refused.
    auto shorter = packed;
    shorter[2] = packed[2].narrow(0, 0, packed[2].numel() - 1);
    EXPECT_NE(test::input_error_of([&] { TensorTrainTokenEmbedding(shape, shorter, r); }, "none")
                  .find("TT packed core 2 has shape"),
              std::string::npos);
    auto nan = packed;
    nan[1] = packed[1].clone();
    nan[1][5] = std::nanf("");
    EXPECT_NE(
        test::input_error_of([&] { TensorTrainTokenEmbedding(shape, nan, r); }, "none").find("non-finite"),
        std::string::npos);
}

// Issue 21: compress moves the fit's cores into the embedding, which rearranges them
// in place instead of holding a second copy; the embedding is the same either way.
TEST(TensorTrain, MovedFitGivesTheSameEmbeddingAsACopiedOne)
{
    const std::vector<int64_t> shape{4, 4, 6};
    const auto E = mixed_rank_table(50, shape);
    for (const bool uniform : {false, true}) {
        auto fit = fit_tensor_train(E, {.shape = shape, .eps = 0.3, .uniform_ranks = uniform});
        const TensorTrainTokenEmbedding copied(fit);
        const auto cores = copied.cores();
        const TensorTrainTokenEmbedding moved(std::move(fit));
        EXPECT_TRUE(fit.cores.empty());
        const auto ids = torch::arange(50, torch::kLong);
        EXPECT_TRUE(torch::equal(moved.lookup(ids), copied.lookup(ids)));
        EXPECT_EQ(moved.parameter_count(), copied.parameter_count());
        EXPECT_EQ(moved.ranks(), copied.ranks());
        EXPECT_EQ(moved.per_token_ranks(), !uniform);
        ASSERT_EQ(moved.cores().size(), cores.size());
        for (size_t k = 0; k < cores.size(); ++k)
            EXPECT_TRUE(torch::equal(moved.cores()[k], cores[k])) << "core " << k;
        const auto h = torch::randn({3, 96});
        EXPECT_TRUE(torch::equal(moved.project(h), copied.project(h)));
    }
    // A moved-in core with a NaN is refused as a copied one is.
    auto fit = fit_tensor_train(E, {.shape = shape, .ranks = {1, 3, 4, 1}});
    std::vector<torch::Tensor> cores;
    for (const auto& c : fit.cores)
        cores.push_back(c.clone());
    cores[1][7][0][1][2] = std::nanf("");
    try {
        TensorTrainTokenEmbedding bad(shape, std::move(cores));
        FAIL() << "a NaN core was accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("TT core 1 has non-finite values"), std::string::npos)
            << e.what();
    }
}

// at::parallel_for ran serially until the engine's files got OpenMP: a fit (each mode's
// sweeps) and a lookup split over 2 threads equal the 1-thread ones bit for bit.
TEST(TensorTrain, FitAndLookupAreTheSameOnOneAndTwoThreads)
{
    const std::vector<int64_t> shape{4, 4, 6};
    const auto E = tt_random_table(3000, 96, 17); // sweeps of 4,096 tokens, 64 a chunk at least
    const auto ids = torch::randperm(3000, torch::kLong).narrow(0, 0, 700);
    const std::vector<TensorTrainOptions> modes{{.shape = shape, .eps = 0.4},
                                                {.shape = shape, .eps = 0.4, .uniform_ranks = true},
                                                {.shape = shape, .ranks = {1, 3, 5, 1}}};
    const int threads = at::get_num_threads();
    for (size_t m = 0; m < modes.size(); ++m) {
        std::vector<TensorTrainFit> fits;
        std::vector<torch::Tensor> rows;
        for (const int thread_count : {1, 2}) {
            at::set_num_threads(thread_count);
            fits.push_back(fit_tensor_train(E, modes[m]));
            rows.push_back(TensorTrainTokenEmbedding(fits.back()).lookup(ids));
        }
        at::set_num_threads(threads);
        const auto& [one, two] = std::tie(fits[0], fits[1]);
        EXPECT_EQ(two.ranks, one.ranks) << "mode " << m;
        EXPECT_EQ(two.mean_needed_ranks, one.mean_needed_ranks) << "mode " << m;
        EXPECT_EQ(two.token_ranks.defined(), one.token_ranks.defined()) << "mode " << m;
        if (one.token_ranks.defined()) {
            EXPECT_TRUE(torch::equal(two.token_ranks, one.token_ranks)) << "mode " << m;
        }
        ASSERT_EQ(two.cores.size(), one.cores.size());
        for (size_t k = 0; k < one.cores.size(); ++k)
            EXPECT_TRUE(torch::equal(two.cores[k], one.cores[k])) << "mode " << m << " core " << k;
        EXPECT_TRUE(torch::equal(rows[1], rows[0])) << "mode " << m;
        // And the lookup is the fit's: within the eps bound of the table.
        const auto gap = (rows[0] - E.index_select(0, ids)).norm(2, 1) / E.index_select(0, ids).norm(2, 1);
        EXPECT_LT(gap.max().item<double>(), m < 2 ? 0.4 * (1 + 1e-4) : 1.0) << "mode " << m;
    }
}
