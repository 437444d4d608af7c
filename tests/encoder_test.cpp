// Encoders (issue 42): the bert / distilbert forward pass's own properties on a
// random model, pooling, framing and the refusals of decoder-only work.
#include <gtest/gtest.h>

#include "embedlab/encoder.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/tasks.hpp"
#include "model/shape_check.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

ModelConfig tiny_bert(EncoderHead head = EncoderHead::None, const std::string& type = "bert")
{
    ModelConfig c;
    c.arch = Architecture::Bert;
    c.model_type = type;
    c.vocab_size = 50;
    c.hidden_size = 16;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 4;
    c.intermediate_size = 32;
    c.max_positions = 24;
    c.norm_eps = 1e-12;
    c.activation = "gelu";
    c.tied_embeddings = true;
    c.type_vocab_size = type == "distilbert" ? 0 : 2;
    c.encoder_head = head;
    c.has_pooler = type == "bert";
    if (head == EncoderHead::Classification)
        c.labels = {"negative", "positive"};
    return c;
}

LanguageModel random_model(const ModelConfig& c, uint64_t seed = 1)
{
    torch::manual_seed(seed);
    WeightMap w;
    for (const auto& e : detail::expected_tensors(c)) {
        const bool norm = e.name.find("LayerNorm.weight") != std::string::npos;
        w[e.name] = norm ? torch::rand(e.shape) + 0.5 : torch::randn(e.shape) * 0.3;
    }
    return LanguageModel(c, std::move(w), "tiny bert");
}

torch::Tensor ids(std::vector<int64_t> v)
{
    return torch::tensor(v, torch::kLong).unsqueeze(0);
}

TEST(Encoder, AttentionReadsBothDirections)
{
    const auto m = random_model(tiny_bert());
    const auto a = m.hidden_states(ids({2, 7, 9, 11, 3}));
    const auto b = m.hidden_states(ids({2, 7, 9, 12, 3})); // only a later token differs
    // A causal model would leave positions 0..2 unchanged.
    EXPECT_GT((a.narrow(1, 0, 3) - b.narrow(1, 0, 3)).abs().max().item<double>(), 1e-3);
}

TEST(Encoder, PaddingUnderTheMaskChangesNoRealToken)
{
    const auto m = random_model(tiny_bert());
    const auto alone = m.hidden_states(ids({2, 7, 9, 3}));
    auto batch = torch::tensor({2, 7, 9, 3, 0, 0, 2, 5, 6, 8, 10, 3}, torch::kLong).view({2, 6});
    auto mask = torch::tensor({1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1}, torch::kLong).view({2, 6});
    const auto padded = m.encoder_hidden_states(batch, {}, mask);
    EXPECT_LT((padded[0].narrow(0, 0, 4) - alone[0]).abs().max().item<double>(), 1e-5);
    // Without the mask the padding is read, and the real tokens change.
    const auto unmasked = m.encoder_hidden_states(batch);
    EXPECT_GT((unmasked[0].narrow(0, 0, 4) - alone[0]).abs().max().item<double>(), 1e-3);
}

TEST(Encoder, SegmentIdsSelectTheirRows)
{
    const auto m = random_model(tiny_bert());
    const auto x = ids({2, 7, 3, 9, 3});
    const auto zeros = torch::zeros_like(x);
    const auto pair = torch::tensor({0, 0, 0, 1, 1}, torch::kLong).unsqueeze(0);
    EXPECT_TRUE(torch::allclose(m.hidden_states(x), m.encoder_hidden_states(x, zeros)));
    EXPECT_GT((m.encoder_hidden_states(x, pair) - m.hidden_states(x)).abs().max().item<double>(), 1e-3);
    try {
        m.encoder_hidden_states(x, torch::full_like(x, 2));
        FAIL() << "segment id 2 of 2 accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("segment id 2"), std::string::npos) << e.what();
    }
}

TEST(Encoder, HeadsFollowTheConfig)
{
    const auto body = random_model(tiny_bert());
    const auto h = body.hidden_states(ids({2, 7, 3}));
    EXPECT_THROW(body.classify(h), InputError);
    try {
        body.logits(ids({2, 7, 3}));
        FAIL() << "a body without a masked-LM head gave logits";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("masked-LM head"), std::string::npos) << e.what();
    }
    EXPECT_EQ(body.pooler_output(h).sizes(), (std::vector<int64_t>{1, 16}));

    const auto mlm = random_model(tiny_bert(EncoderHead::MaskedLM));
    EXPECT_EQ(mlm.logits(ids({2, 7, 3})).sizes(), (std::vector<int64_t>{1, 3, 50}));

    const auto cls = random_model(tiny_bert(EncoderHead::Classification, "distilbert"));
    const auto logits = cls.classify(cls.hidden_states(ids({2, 7, 3})));
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{1, 2}));
    // distilbert reads [CLS] through pre_classifier + ReLU: recompute it by hand.
    const auto& w = cls.weights();
    const auto first = cls.hidden_states(ids({2, 7, 3})).select(1, 0);
    const auto expected = torch::linear(
        torch::relu(torch::linear(first, w.at("pre_classifier.weight"), w.at("pre_classifier.bias"))),
        w.at("classifier.weight"), w.at("classifier.bias"));
    EXPECT_TRUE(torch::allclose(logits, expected, 1e-5, 1e-6));
}

TEST(Encoder, DecoderOnlyWorkIsRefusedByName)
{
    const auto mlm = random_model(tiny_bert(EncoderHead::MaskedLM));
    const std::vector<int32_t> text(40, 7);
    try {
        evaluate_perplexity(mlm, text, PerplexityOptions{.ctx = 8});
        FAIL() << "perplexity of an encoder";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("encoder"), std::string::npos) << e.what();
    }
    KvCache cache;
    EXPECT_THROW(mlm.hidden_states(ids({2, 3}), cache), InputError);
}

TEST(Encoder, PoolingOverTheMask)
{
    // hidden [1, 3, 2], the last position padding.
    const auto h = torch::tensor({1.0f, 2.0f, 3.0f, -4.0f, 100.0f, 100.0f}).view({1, 3, 2});
    const auto mask = torch::tensor({1, 1, 0}, torch::kLong).view({1, 3});
    EXPECT_TRUE(torch::equal(pool_hidden(h, mask, Pooling::Cls), torch::tensor({1.0f, 2.0f}).view({1, 2})));
    EXPECT_TRUE(
        torch::allclose(pool_hidden(h, mask, Pooling::Mean), torch::tensor({2.0f, -1.0f}).view({1, 2})));
    EXPECT_TRUE(torch::equal(pool_hidden(h, mask, Pooling::Max), torch::tensor({3.0f, 2.0f}).view({1, 2})));
    EXPECT_EQ(parse_pooling("mean"), Pooling::Mean);
    EXPECT_FALSE(parse_pooling("weightedmean").has_value());
    auto classifier = tiny_bert(EncoderHead::Classification);
    EXPECT_EQ(default_pooling(classifier), Pooling::Cls);
    classifier.pooling = "max";
    EXPECT_EQ(default_pooling(classifier), Pooling::Max);
    EXPECT_EQ(default_pooling(tiny_bert()), Pooling::Mean);
}

TEST(Encoder, RetrievalAgreementCountsSharedNeighbours)
{
    torch::manual_seed(3);
    const auto a = torch::randn({40, 8}, torch::kDouble);
    EXPECT_DOUBLE_EQ(retrieval_agreement(a, a, 10), 1.0);
    // A rotation and a scale keep every cosine: the same neighbours.
    const auto q = std::get<0>(torch::linalg_qr(torch::randn({8, 8}, torch::kDouble)));
    EXPECT_DOUBLE_EQ(retrieval_agreement(a, torch::matmul(a, q) * 3.0, 10), 1.0);
    // Unrelated embeddings share about k / (n - 1) of them by chance.
    EXPECT_LT(retrieval_agreement(a, torch::randn({40, 8}, torch::kDouble), 10), 0.5);
    // Two rows each: row 0's one neighbour is row 1 in both.
    EXPECT_DOUBLE_EQ(retrieval_agreement(a.narrow(0, 0, 2), a.narrow(0, 2, 2), 1), 1.0);
    EXPECT_THROW(retrieval_agreement(a, a, 40), InputError);
    EXPECT_THROW(retrieval_agreement(a, a.narrow(0, 0, 39), 5), InputError);
}

TEST(Encoder, ParameterBreakdownCountsEveryTensorOnce)
{
    const auto c = tiny_bert(EncoderHead::Classification);
    const auto m = random_model(c);
    int64_t stored = 0;
    for (const auto& [name, t] : m.weights())
        stored += t.numel();
    const auto b = m.parameter_breakdown();
    EXPECT_EQ(b.total(), stored);
    EXPECT_EQ(b.token_embedding, 50 * 16);
    EXPECT_EQ(b.position_embedding, 24 * 16 + 2 * 16); // positions and segment rows
    EXPECT_EQ(b.attention, 2 * 4 * (16 * 16 + 16));
    EXPECT_EQ(b.mlp, 2 * (32 * 16 + 32 + 16 * 32 + 16));
    EXPECT_EQ(b.output_head, (16 * 16 + 16) + (2 * 16 + 2)); // pooler + classifier
}

} // namespace
} // namespace embedlab
