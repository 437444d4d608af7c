#include "embedlab/low_rank.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

using namespace embedlab;

namespace {

torch::Tensor random_table(int64_t V, int64_t d, uint64_t seed = 3)
{
    torch::manual_seed(seed);
    // Anisotropic rows with an offset mean, like a trained table.
    return torch::randn({V, d}) * torch::linspace(2.0, 0.1, d) + 0.5;
}

// METHODS 1: ||Et - Z P||_F^2 = V * (sum of dropped eigenvalues of C = Et^T Et / V).
TEST(LowRank, PcaReconstructionErrorIsTheDroppedEigenvalues)
{
    const int64_t V = 300, d = 24, k = 7;
    auto E = random_table(V, d);
    const auto fit = fit_low_rank(E, LowRankKind::PCA, k);
    ASSERT_EQ(fit.Z.sizes(), (std::vector<int64_t>{V, k}));
    ASSERT_EQ(fit.P.sizes(), (std::vector<int64_t>{k, d}));
    auto Ed = E.to(torch::kDouble);
    auto recon =
        fit.mu.to(torch::kDouble) + torch::matmul(fit.Z.to(torch::kDouble), fit.P.to(torch::kDouble));
    const double err = (Ed - recon).pow(2).sum().item<double>();
    double dropped = 0;
    for (int64_t i = k; i < d; ++i)
        dropped += fit.eigenvalues[static_cast<size_t>(i)];
    EXPECT_NEAR(err, V * dropped, 1e-4 * V * dropped);
    // Descending spectrum, cumulative share ending at 1.
    for (size_t i = 1; i < fit.eigenvalues.size(); ++i)
        EXPECT_GE(fit.eigenvalues[i - 1], fit.eigenvalues[i]);
    EXPECT_NEAR(fit.explained_variance.back(), 1.0, 1e-12);
    EXPECT_NEAR(fit.explained_variance[k - 1],
                1.0 - dropped / (dropped +
                                 [&] {
                                     double kept = 0;
                                     for (int64_t i = 0; i < k; ++i)
                                         kept += fit.eigenvalues[static_cast<size_t>(i)];
                                     return kept;
                                 }()),
                1e-9);
    // The mean is the row mean: METHODS 1's centring.
    EXPECT_TRUE(torch::allclose(fit.mu, E.mean(0), 1e-5, 1e-5));
}

TEST(LowRank, FullRankReconstructsTheTableForPcaAndSvd)
{
    auto E = random_table(100, 16);
    for (auto kind : {LowRankKind::PCA, LowRankKind::SVD}) {
        LowRankTokenEmbedding emb(fit_low_rank(E, kind, 16));
        auto ids = torch::arange(100, torch::kLong);
        EXPECT_TRUE(torch::allclose(emb.lookup(ids), E, 1e-4, 1e-4));
    }
}

TEST(LowRank, SvdIsUncentredAndStoresNoMean)
{
    auto E = random_table(200, 12);
    const auto svd = fit_low_rank(E, LowRankKind::SVD, 4);
    EXPECT_EQ(svd.mu.abs().sum().item<float>(), 0.0f);
    LowRankTokenEmbedding emb(svd);
    EXPECT_EQ(emb.parameter_count(), 200 * 4 + 4 * 12);
    EXPECT_EQ(LowRankTokenEmbedding(fit_low_rank(E, LowRankKind::PCA, 4)).parameter_count(),
              200 * 4 + 4 * 12 + 12);
    // Uncentred: the best rank-k fit of E itself, so E V_k V_k^T is Z P.
    auto recon = torch::matmul(svd.Z, svd.P);
    auto projected = torch::matmul(torch::matmul(E, svd.P.t()), svd.P);
    EXPECT_TRUE(torch::allclose(recon, projected, 1e-4, 1e-4));
}

// The tied head through the factors equals the head of the reconstructed table.
TEST(LowRank, HeadThroughFactorsEqualsDenseReconstruction)
{
    auto E = random_table(80, 16);
    const auto fit = fit_low_rank(E, LowRankKind::PCA, 5);
    LowRankTokenEmbedding emb(fit);
    auto dense = fit.mu + torch::matmul(fit.Z, fit.P);
    auto h = torch::randn({6, 16});
    EXPECT_TRUE(torch::allclose(emb.project(h), torch::matmul(h, dense.t()), 1e-4, 1e-4));
    auto ids = torch::tensor({{0, 5, 79}}, torch::kLong);
    EXPECT_TRUE(torch::allclose(emb.lookup(ids)[0], dense.index_select(0, ids[0]), 1e-5, 1e-5));
}

TEST(LowRank, ModelRunsOnTheFactorisedEmbedding)
{
    const auto c = test::tiny_config(Architecture::GPT2);
    auto w = test::random_weights(c);
    LanguageModel m(c, w, "tiny");
    auto ids = torch::tensor({{1, 2, 3, 4}}, torch::kLong);
    auto dense_logits = m.logits(ids);
    m.set_token_embedding(
        std::make_shared<LowRankTokenEmbedding>(fit_low_rank(w.at("wte.weight"), LowRankKind::PCA, 16)));
    EXPECT_TRUE(torch::allclose(m.logits(ids), dense_logits, 1e-3, 1e-3)); // k = d: lossless
    EXPECT_EQ(m.parameter_breakdown().token_embedding, 50 * 16 + 16 * 16 + 16);
}

TEST(LowRank, BadRankAndNaNRowsAreInputErrors)
{
    auto E = random_table(50, 8);
    EXPECT_THROW(fit_low_rank(E, LowRankKind::PCA, 0), InputError);
    EXPECT_THROW(fit_low_rank(E, LowRankKind::PCA, 9), InputError);
    E[17][3] = std::numeric_limits<float>::quiet_NaN();
    try {
        fit_low_rank(E, LowRankKind::SVD, 2);
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("first row 17"), std::string::npos) << e.what();
    }
}

} // namespace
