// ONNX export of encoders (issue 42): each fixture family's graph, run in ONNX Runtime on
// a padded batch (sentence pairs with segment ids where the model has them), gives
// EmbedLab's hidden states at every real token, its default sentence embedding and its
// head's logits; a compressed masked-LM encoder's graph computes its head through the
// factors; --with-past is refused.
#include <gtest/gtest.h>

#include "embedlab/encoder.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/onnx_export.hpp"
#include "onnx_runtime.hpp"
#include "test_support.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

fs::path onnx_encoders()
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders";
}

double relative(const torch::Tensor& a, const torch::Tensor& b)
{
    const auto a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64).reshape(a.sizes());
    return ((a64 - b64).abs().max() / b64.abs().max()).item<double>();
}

// ONNX Runtime's outputs for a framed batch.
std::map<std::string, torch::Tensor> run(const fs::path& onnx, const ModelConfig& c, const EncoderBatch& b,
                                         const std::vector<std::string>& outputs)
{
    std::vector<std::pair<std::string, torch::Tensor>> in{
        {"input_ids", b.ids}, {"attention_mask", b.attention_mask.to(torch::kLong)}};
    if (c.type_vocab_size > 0)
        in.emplace_back("token_type_ids", b.token_types.to(torch::kLong));
    return test::run_onnx(onnx, in, outputs).outputs;
}

// Every real token's hidden state, the sentence embedding and the head's logits.
void expect_runtime_matches(const LanguageModel& m, const Tokenizer& tok, const fs::path& onnx)
{
    const auto& c = m.config();
    const std::vector<std::string> texts{"A man is playing a guitar.", "Unbelievably, naïve cafés!"};
    const std::vector<std::string> pairs{"A man plays.", "Nobody came to the café at 9:30 on a rainy day."};
    const auto batch = frame_texts(tok, c, texts, c.type_vocab_size > 0 ? &pairs : nullptr);
    ASSERT_TRUE((batch.attention_mask == 0).any().item<bool>()) << "the batch should be padded";
    std::vector<std::string> outputs{"last_hidden_state", "sentence_embedding"};
    if (c.encoder_head != EncoderHead::None)
        outputs.push_back("logits");
    const auto ort = run(onnx, c, batch, outputs);
    const auto hidden = batch_hidden_states(m, batch);
    const auto real = batch.attention_mask.to(torch::kBool);
    const auto theirs = ort.at("last_hidden_state");
    ASSERT_EQ(theirs.sizes(), hidden.sizes());
    const double h = relative(theirs.index({real}), hidden.index({real}));
    EXPECT_LT(h, 1e-4);
    std::printf("%s: ONNX Runtime vs EmbedLab, hidden %.1e\n", c.type_name().c_str(), h);
    auto pooled = pool_hidden(hidden, batch.attention_mask, default_pooling(c));
    if (c.normalize_embeddings)
        pooled = pooled / pooled.norm(2, -1, true).clamp_min(1e-12);
    EXPECT_LT(relative(ort.at("sentence_embedding"), pooled), 1e-4);
    if (c.encoder_head == EncoderHead::Classification) {
        EXPECT_LT(relative(ort.at("logits"), m.classify(hidden)), 1e-4);
    } else if (c.encoder_head == EncoderHead::MaskedLM) {
        const auto logits =
            m.head(hidden.reshape({-1, c.hidden_size})).view({hidden.size(0), hidden.size(1), -1});
        EXPECT_LT(relative(ort.at("logits").index({real}), logits.index({real})), 1e-4);
    }
}

class EncoderOnnx : public ::testing::TestWithParam<std::string> {};

TEST_P(EncoderOnnx, RuntimeGivesEmbedLabsHiddenStatesPoolingAndHead)
{
    if (!test::have_onnxruntime())
        GTEST_SKIP() << test::onnxruntime_skip_reason();
    const auto lm = load_model(onnx_encoders() / GetParam());
    test::TempDir tmp;
    const auto report = export_onnx(lm, tmp / "m.onnx", {});
    EXPECT_EQ(report.architecture, lm.model->config().type_name());
    expect_runtime_matches(*lm.model, *lm.tokenizer, tmp / "m.onnx");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EncoderOnnx,
                         ::testing::Values("bert-cls", "distilbert-cls", "distilbert-mlm", "minilm-st"),
                         test::ParamName());

TEST(EncoderOnnxCompressed, MaskedLmHeadRunsThroughTheFactors)
{
    if (!test::have_onnxruntime())
        GTEST_SKIP() << test::onnxruntime_skip_reason();
    CompressionRequest r;
    r.model = (onnx_encoders() / "distilbert-mlm").string();
    r.method = "pca";
    r.rank = 8;
    const auto run = run_compression(r);
    const auto& m = run.compressed_model();
    EXPECT_EQ(m.token_embedding().kind(), "pca");
    test::TempDir tmp;
    const auto report = export_onnx(m, tmp / "pca.onnx", {}, {}, {});
    EXPECT_NE(testing::PrintToString(report.notes).find("pca factors"), std::string::npos);
    const auto lm = load_model(onnx_encoders() / "distilbert-mlm");
    expect_runtime_matches(m, *lm.tokenizer, tmp / "pca.onnx");
}

TEST(EncoderOnnxCompressed, WithPastIsForDecoders)
{
    const auto lm = load_model(onnx_encoders() / "minilm-st");
    test::TempDir tmp;
    test::expect_input_error([&] { export_onnx(lm, tmp / "m.onnx", {.with_past = true}); },
                             "--with-past is for decoders");
    EXPECT_FALSE(fs::exists(tmp / "m.onnx"));
}

} // namespace
