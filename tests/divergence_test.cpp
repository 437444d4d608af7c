// evaluate_divergence against a direct computation: the windows of METHODS.md 0,
// KL(P_reference || P_model) in that direction, float64, and top-1 agreement.
#include <cmath>

#include <gtest/gtest.h>

#include "embedlab/error.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/model.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

namespace embedlab {
namespace {

LoadedModel bundled()
{
    return load_model(std::filesystem::path(EMBEDLAB_SOURCE_DIR) / "resources/models/stories260K.gguf",
                      {.need_tokenizer = false});
}

std::vector<int32_t> some_ids(int64_t n, int64_t vocab)
{
    return test::spread_ids(n, vocab);
}

TEST(Divergence, AModelAgainstItselfIsZeroAndAgreesEverywhere)
{
    const auto lm = bundled();
    const auto ids = some_ids(100, lm.model->config().vocab_size);
    const auto d = evaluate_divergence(*lm.model, *lm.model, ids, {.ctx = 16});
    EXPECT_EQ(d.kl_mean, 0.0);
    EXPECT_EQ(d.kl_max, 0.0);
    EXPECT_EQ(d.top1_agreement, 1.0);
    EXPECT_EQ(d.delta_ln_ppl, 0.0);
    EXPECT_EQ(d.tokens, 99);
    // float64 log-softmax here, float32 logsumexp in evaluate_perplexity.
    EXPECT_NEAR(d.ppl, evaluate_perplexity(*lm.model, ids, {.ctx = 16}).ppl, 1e-6 * d.ppl);
}

// A perturbed embedding against the original, recomputed here window by window.
TEST(Divergence, MatchesADirectComputationInTheReferenceToModelDirection)
{
    const auto original = bundled();
    auto perturbed = bundled();
    torch::manual_seed(3);
    const auto& table = *dense_table(&perturbed.model->token_embedding());
    perturbed.model->set_token_embedding(
        std::make_shared<DenseTokenEmbedding>(table + 0.5 * torch::randn_like(table)));
    const int64_t ctx = 16;
    const auto ids = some_ids(70, original.model->config().vocab_size); // windows of 17, the last shorter
    const auto d = evaluate_divergence(*perturbed.model, *original.model, ids, {.ctx = ctx});

    double kl = 0, reverse = 0;
    int64_t n = 0, agree = 0;
    for (const auto& w : perplexity_windows(static_cast<int64_t>(ids.size()), ctx, ctx)) {
        std::vector<int64_t> window(ids.begin() + w.start, ids.begin() + w.start + w.length - 1);
        const auto input = torch::tensor(window, torch::kLong).unsqueeze(0);
        const auto p = torch::log_softmax(perturbed.model->logits(input)[0].to(torch::kDouble), -1);
        const auto q = torch::log_softmax(original.model->logits(input)[0].to(torch::kDouble), -1);
        for (int64_t t = w.first_scored; t < w.length - 1; ++t) {
            kl += (q[t].exp() * (q[t] - p[t])).sum().item<double>();
            reverse += (p[t].exp() * (p[t] - q[t])).sum().item<double>();
            agree += p[t].argmax().item<int64_t>() == q[t].argmax().item<int64_t>();
            ++n;
        }
    }
    ASSERT_EQ(d.tokens, n);
    EXPECT_NEAR(d.kl_mean, kl / static_cast<double>(n), 1e-9);
    EXPECT_GT(std::abs(d.kl_mean - reverse / static_cast<double>(n)), 1e-6)
        << "the direction must matter here";
    EXPECT_DOUBLE_EQ(d.top1_agreement, static_cast<double>(agree) / static_cast<double>(n));
    EXPECT_LT(d.top1_agreement, 1.0);
    EXPECT_GT(d.kl_mean, 0.0);
    EXPECT_LE(d.kl_median, d.kl_p99);
    EXPECT_LE(d.kl_p99, d.kl_max);
    EXPECT_EQ(d.window_kl_mean.size(), static_cast<size_t>(d.windows));
    EXPECT_NEAR(std::log(d.ppl) - std::log(d.reference_ppl), d.delta_ln_ppl, 1e-12);
}

TEST(Divergence, DifferentVocabulariesAreRefused)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto a = bundled();
    const auto b = load_model(test::shared_dir() / "models" / "zoo" / "qwen3", {.need_tokenizer = false});
    const auto ids = some_ids(40, 512);
    try {
        evaluate_divergence(*a.model, *b.model, ids, {.ctx = 16});
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(
                      "the reference model has a vocabulary of 32000 tokens and the model 512"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
} // namespace embedlab
