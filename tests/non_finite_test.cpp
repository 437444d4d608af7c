// Issue 57 item 3: a model whose finite weights overflow is refused, with the likely
// cause, by every evaluation that reports a number (generation, embeddings, tasks,
// STS-B, divergence, masked-LM scoring), as perplexity refuses it. Before the fix
// each of these returned NaN, null or a meaningless number (ids 0, accuracy 0.5).
#include <gtest/gtest.h>

#include "embedlab/encoder.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/generate.hpp"
#include "embedlab/masked_lm.hpp"
#include "embedlab/model.hpp"
#include "embedlab/non_finite.hpp"
#include "embedlab/tasks.hpp"
#include "embedlab/text_divergence.hpp"
#include "embedlab/tokenizer.hpp"
#include "overflow_models.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;
using test::expect_input_error;
using test::TempDir;

const std::string kCause = "its weights or config values";

std::unique_ptr<LanguageModel> tiny_llama(const std::string& overflow_part = "")
{
    const auto c = test::tiny_config(Architecture::Llama);
    auto w = test::random_weights(c);
    return std::make_unique<LanguageModel>(c, overflow_part.empty() ? w : test::overflowing(w, overflow_part),
                                           "tiny");
}

torch::Tensor as_ids(const std::vector<int32_t>& ids)
{
    return torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong).unsqueeze(0);
}

fs::path write(const fs::path& path, const std::string& text)
{
    test::write_file(path, text);
    return path;
}

TEST(NonFinite, TheOverflowingTinyModelComputesNaNFromFiniteWeights)
{
    const auto model = tiny_llama("down_proj");
    for (const auto& [name, t] : model->weights())
        ASSERT_TRUE(all_finite(t)) << name;
    EXPECT_FALSE(all_finite(model->logits(as_ids(test::spread_ids(8, 50)))));
    EXPECT_TRUE(all_finite(tiny_llama()->logits(as_ids(test::spread_ids(8, 50)))));
}

TEST(NonFinite, TheHelperNamesTheFirstBadRowAndValue)
{
    auto rows = torch::ones({4, 3});
    EXPECT_NO_THROW(require_finite_rows(rows, 1, "the model", "a non-finite embedding of text", "none"));
    rows[2][1] = std::numeric_limits<float>::infinity();
    rows[3][0] = std::numeric_limits<float>::quiet_NaN();
    try {
        require_finite_rows(rows, 11, "the model", "a non-finite embedding of text",
                            "no embedding is reported");
        FAIL() << "no NonFiniteError";
    } catch (const NonFiniteError& e) {
        EXPECT_STREQ(
            e.what(),
            "the model's forward pass gave a non-finite embedding of text 13 (inf): its weights or "
            "config values (a rotary base, norm epsilon or scaling factor far out of the usual range) "
            "overflow; no embedding is reported for a model that computes NaN or infinity");
    }
}

TEST(NonFinite, PerplexityKeepsItsMessageAsANonFiniteError)
{
    const auto model = tiny_llama("down_proj");
    const auto ids = test::spread_ids(20, 50);
    EXPECT_THROW(evaluate_perplexity(*model, ids, {.ctx = 8}), NonFiniteError);
    expect_input_error([&] { evaluate_perplexity(*model, ids, {.ctx = 8}); }, "non-finite loss");
}

// Was: ids [0, 0, 0] and log-probabilities NaN (null in JSON).
TEST(NonFinite, GenerateRefusesAModelOrReferenceThatOverflows)
{
    const auto bad = tiny_llama("down_proj"), good = tiny_llama();
    const auto prompt = test::spread_ids(5, 50, 7, 3);
    GenerationOptions o;
    o.max_tokens = 3;
    EXPECT_EQ(generate(*good, nullptr, prompt, o).tokens.size(), 3u);
    expect_input_error([&] { generate(*bad, nullptr, prompt, o); },
                       "the model's forward pass gave non-finite logits for generated token 1 (");
    expect_input_error([&] { generate(*bad, nullptr, prompt, o); }, kCause);
    o.sampling.temperature = 0.8; // sampling too
    EXPECT_THROW(generate(*bad, nullptr, prompt, o), NonFiniteError);
    // Was: "mean KL -nan".
    expect_input_error([&] { generate(*good, nullptr, prompt, o, {}, bad.get()); },
                       "the reference model's forward pass gave non-finite logits for generated token 1");
}

// Was: KL, top-1 agreement and their statistics NaN.
TEST(NonFinite, DivergenceRefusesEitherModelOverflowing)
{
    const auto bad = tiny_llama("down_proj"), good = tiny_llama();
    const auto ids = test::spread_ids(20, 50);
    EXPECT_NO_THROW(evaluate_divergence(*good, *good, ids, {.ctx = 8}));
    expect_input_error([&] { evaluate_divergence(*bad, *good, ids, {.ctx = 8}); },
                       "the model's forward pass gave non-finite logits in window 1");
    expect_input_error([&] { evaluate_divergence(*good, *bad, ids, {.ctx = 8}); },
                       "the reference model's forward pass gave non-finite logits in window 1");
    expect_input_error([&] { text_divergence(*bad, *good, nullptr, ids, {.ctx = 8}); },
                       "no divergence is reported");
}

struct Loaded {
    TempDir dir;
    LoadedModel lm;
};

std::unique_ptr<Loaded> overflowing_encoder(const std::string& name, const std::string& part)
{
    auto l = std::make_unique<Loaded>();
    l->lm = load_model(test::write_overflowing_encoder(l->dir / name, name, part));
    return l;
}

// Was: "nan nan ..." for every text.
TEST(NonFinite, EmbedRefusesAnEncoderThatOverflows)
{
    const std::vector<std::string> texts{"a dog runs .", "a man plays the guitar ."};
    const auto good = load_model(test::encoder_fixture("minilm-st"));
    EXPECT_EQ(embed_texts(*good.model, *good.tokenizer, texts, {}).values.size(0), 2);
    const auto bad = overflowing_encoder("minilm-st", "layer.0.output.dense.weight");
    expect_input_error([&] { embed_texts(*bad->lm.model, *bad->lm.tokenizer, texts, {}); },
                       "the model's forward pass gave a non-finite embedding of text 1 (");
    EXPECT_THROW(embed_texts(*bad->lm.model, *bad->lm.tokenizer, texts, {.pooling = Pooling::Max}),
                 NonFiniteError);
}

// Was: accuracy 0.5000 (every NaN score loses to choice 0).
TEST(NonFinite, TaskRefusesAClassifierThatOverflows)
{
    TempDir dir;
    const auto data = read_task_data(
        "sst2", write(dir / "dev.tsv", "sentence\tlabel\na lovely film .\t1\na dull mess .\t0\n"));
    const auto good = load_model(test::encoder_fixture("bert-cls"));
    EXPECT_EQ(evaluate_task(*good.model, *good.tokenizer, data).n, 2);
    const auto bad = overflowing_encoder("bert-cls", "layer.0.output.dense.weight");
    expect_input_error([&] { evaluate_task(*bad->lm.model, *bad->lm.tokenizer, data); },
                       "the model's forward pass gave non-finite classifier logits for example 1 (");
    expect_input_error([&] { evaluate_task(*bad->lm.model, *bad->lm.tokenizer, data); },
                       "the task is not scored");
}

// sst2 zero-shot on a decoder: log-likelihoods of " negative" and " positive".
TEST(NonFinite, TaskRefusesADecoderWhoseLogLikelihoodsAreNaN)
{
    TempDir dir;
    const auto data = read_task_data(
        "sst2", write(dir / "dev.tsv", "sentence\tlabel\na lovely film .\t1\na dull mess .\t0\n"));
    const auto good = load_model(test::write_tiny_llama_with_tokenizer(dir / "good", ""));
    EXPECT_EQ(evaluate_task(*good.model, *good.tokenizer, data).n, 2);
    const auto bad = load_model(test::write_tiny_llama_with_tokenizer(dir / "bad", "down_proj"));
    expect_input_error(
        [&] { evaluate_task(*bad.model, *bad.tokenizer, data); },
        "the model's forward pass gave a non-finite log-likelihood for example 1's choice 1 (nan)");
    // generate with a tokenizer, as the CLI calls it
    GenerationOptions o;
    o.max_tokens = 3;
    EXPECT_THROW(generate(*bad.model, bad.tokenizer.get(), bad.tokenizer->encode("a lovely film"), o),
                 NonFiniteError);
    // and embed on a decoder (token-mean pooling)
    expect_input_error([&] { embed_texts(*bad.model, *bad.tokenizer, {"a lovely film ."}, {}); },
                       "a non-finite embedding of text 1");
}

// Was: Spearman -0.5 from NaN cosines.
TEST(NonFinite, StsbRefusesAnEncoderThatOverflows)
{
    const std::vector<SentencePair> pairs{{"a man plays a guitar .", "a man plays the guitar .", 4.8},
                                          {"a woman slices an onion .", "a dog runs in the park .", 0.2},
                                          {"a cat sleeps .", "a cat is sleeping .", 4.5}};
    const auto good = load_model(test::encoder_fixture("minilm-st"));
    EXPECT_EQ(evaluate_similarity(*good.model, *good.tokenizer, pairs).n, 3);
    const auto bad = overflowing_encoder("minilm-st", "layer.0.output.dense.weight");
    expect_input_error([&] { evaluate_similarity(*bad->lm.model, *bad->lm.tokenizer, pairs); },
                       "the model's forward pass gave a non-finite embedding of pair 1's first sentence (");
    expect_input_error([&] { evaluate_similarity(*bad->lm.model, *bad->lm.tokenizer, pairs); },
                       "no correlation is reported");
}

// eval on a masked-LM encoder: pseudo-perplexity was NaN.
TEST(NonFinite, MaskedLmScoringRefusesAnEncoderThatOverflows)
{
    const auto good = load_model(test::encoder_fixture("distilbert-mlm"));
    const auto ids = good.tokenizer->encode("a man is playing a guitar and a dog runs in the park .");
    const MaskedLmOptions o{.ctx = 16};
    EXPECT_TRUE(std::isfinite(evaluate_masked_lm(*good.model, *good.tokenizer, ids, o).pseudo_ppl));
    const auto bad = overflowing_encoder("distilbert-mlm", "layer.0.ffn.lin2.weight");
    expect_input_error([&] { evaluate_masked_lm(*bad->lm.model, *bad->lm.tokenizer, ids, o); },
                       "the model's forward pass gave non-finite logits in batch 1 (");
    expect_input_error([&] { evaluate_masked_lm(*good.model, *good.tokenizer, ids, o, bad->lm.model.get()); },
                       "the reference model's forward pass gave non-finite logits in batch 1");
}

} // namespace
} // namespace embedlab
