// Training a BERT encoder from scratch by masked-LM (train.hpp's --arch bert, issue 42):
// BERT's masking statistics, a few steps lower the loss with a table and with PETE's
// Fourier embedding, the saved BertForMaskedLM directory loads with its WordPiece
// tokenizer and scores what the trained model scored, and bad options are refused.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "embedlab/eval.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/masked_lm.hpp"
#include "embedlab/resources.hpp"
#include "embedlab/train.hpp"
#include "methods/masked_lm_batch.hpp"
#include "test_support.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

fs::path wordpiece_dir()
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders/tokenizers/uncased";
}

const Tokenizer& wordpiece()
{
    static const auto tok = load_tokenizer_from_directory(wordpiece_dir());
    return *tok;
}

// The bundled sample text in the fixtures' 2,000-id WordPiece vocabulary.
const std::vector<int32_t>& encoder_sample_ids()
{
    static const auto ids = wordpiece().encode(read_text_file(default_sample_text_path()));
    return ids;
}

ScratchOptions bert_options(const std::string& embedding, int64_t steps)
{
    ScratchOptions o;
    o.config = {.name = "custom",
                .vocab = wordpiece().vocab_size(),
                .dim = 32,
                .layers = 1,
                .heads = 2,
                .positions = 64,
                .arch = "bert"};
    o.embedding = parse_scratch_embedding(embedding);
    o.steps = steps;
    o.batch = 8;
    o.seqlen = 62; // about 74 predicted positions per step
    o.lr = 3e-3;
    o.warmup = 2;
    o.seed = 1;
    o.special = {.cls = *wordpiece().cls_id(),
                 .sep = *wordpiece().sep_id(),
                 .mask = *wordpiece().mask_id(),
                 .pad = *wordpiece().pad_id()};
    return o;
}

// The tensor names a safetensors file holds.
std::set<std::string> stored_names(const fs::path& file)
{
    const std::string bytes = test::read_text(file);
    const auto header =
        parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), file.string());
    std::set<std::string> names;
    for (const auto& e : header.entries)
        names.insert(e.name);
    return names;
}

double mean_of(const std::vector<double>& v, size_t from, size_t to)
{
    double s = 0;
    for (size_t i = from; i < to; ++i)
        s += v[i];
    return s / static_cast<double>(to - from);
}

} // namespace

// BERT's recipe: mask_rate of the positions chosen, of those 80% [MASK], 10% a random
// id, 10% unchanged; [CLS] and [SEP] frame every window and are never predicted.
TEST(TrainEncoder, MaskingFollowsBertsEightyTenTen)
{
    auto o = bert_options("table", 1);
    o.batch = 64;
    std::vector<int64_t> windows(static_cast<size_t>(o.batch * (o.seqlen + 1)));
    for (size_t i = 0; i < windows.size(); ++i)
        windows[i] = 100 + static_cast<int64_t>(i % 1500); // never [MASK], [CLS], [SEP]
    std::mt19937_64 rng(7);
    const auto b = embedlab::detail::masked_lm_batch(o, windows, rng);
    ASSERT_EQ(b.inputs.sizes().vec(), (std::vector<int64_t>{64, 64}));
    EXPECT_TRUE((b.inputs.select(1, 0) == o.special.cls).all().item<bool>());
    EXPECT_TRUE((b.inputs.select(1, 63) == o.special.sep).all().item<bool>());
    EXPECT_TRUE((b.labels.select(1, 0) == -100).all().item<bool>());
    EXPECT_TRUE((b.labels.select(1, 63) == -100).all().item<bool>());
    const auto chosen = b.labels != -100;
    const double n = static_cast<double>(chosen.sum().item<int64_t>()), positions = 64.0 * 62.0;
    EXPECT_NEAR(n / positions, 0.15, 0.02);
    // Labels hold the window's ids at their positions.
    const auto originals = torch::tensor(windows).view({64, 63}).narrow(1, 0, 62);
    const auto labels = b.labels.narrow(1, 1, 62), inputs = b.inputs.narrow(1, 1, 62);
    const auto inner = chosen.narrow(1, 1, 62);
    EXPECT_TRUE((labels.masked_select(inner) == originals.masked_select(inner)).all().item<bool>());
    // Unchosen positions are the text itself.
    EXPECT_TRUE((inputs.masked_select(~inner) == originals.masked_select(~inner)).all().item<bool>());
    const double masked =
        static_cast<double>((inputs.masked_select(inner) == o.special.mask).sum().item<int64_t>());
    const double kept = static_cast<double>(
        (inputs.masked_select(inner) == originals.masked_select(inner)).sum().item<int64_t>());
    EXPECT_NEAR(masked / n, 0.8, 0.04);
    EXPECT_NEAR(kept / n, 0.1, 0.035); // a random id equal to the original counts here: 1 in 2,000
    EXPECT_NEAR((n - masked - kept) / n, 0.1, 0.035);

    // Every step predicts something, even at a tiny rate.
    o.mask_rate = 1e-9;
    const auto one = embedlab::detail::masked_lm_batch(o, windows, rng);
    EXPECT_EQ((one.labels != -100).sum().item<int64_t>(), 1);
}

class TrainEncoderEmbedding : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainEncoderEmbedding, MaskedLmLowersTheLossAndReloadsAsBertForMaskedLm)
{
    const auto& ids = encoder_sample_ids();
    ASSERT_GT(ids.size(), 3000u);
    const std::vector<int32_t> train(ids.begin(), ids.end() - 600), held(ids.end() - 600, ids.end());
    const auto r = train_from_scratch(bert_options(GetParam(), 30), train);
    ASSERT_EQ(r.loss_curve.size(), 30u);
    EXPECT_LT(mean_of(r.loss_curve, 25, 30), mean_of(r.loss_curve, 0, 5) - 0.5) << GetParam();
    EXPECT_NEAR(r.loss_curve.front(), std::log(2000.0), 0.3); // uniform over the vocabulary at the start
    const auto& c = r.model->config();
    EXPECT_TRUE(c.is_encoder());
    EXPECT_EQ(c.encoder_head, EncoderHead::MaskedLM);
    const bool fourier = GetParam() != "table";
    EXPECT_EQ(r.model->token_embedding().kind(), fourier ? "fourier" : "dense");

    test::TempDir tmp;
    const auto record = save_trained_model(r, tmp / "m", {.tokenizer_dir = wordpiece_dir()});
    EXPECT_EQ(record["config"]["arch"], "bert");
    EXPECT_EQ(record["options"]["objective"], "mlm");
    const auto config = nlohmann::json::parse(test::read_text(tmp / "m" / "config.json"));
    EXPECT_EQ(config["architectures"][0], "BertForMaskedLM");
    EXPECT_EQ(config["pad_token_id"], 0);
    EXPECT_TRUE(fs::exists(tmp / "m" / "vocab.txt"));
    EXPECT_EQ(fs::exists(tmp / "m" / "embedlab.json"), fourier);
    // transformers' names; the tied decoder is stored only beside a dense table.
    const auto stored = stored_names(tmp / "m" / "model.safetensors");
    EXPECT_TRUE(stored.count("bert.encoder.layer.0.attention.self.query.weight"));
    EXPECT_TRUE(stored.count("cls.predictions.transform.dense.weight"));
    EXPECT_EQ(stored.count("cls.predictions.decoder.weight"), fourier ? 0u : 1u);
    EXPECT_EQ(stored.count("bert.embeddings.word_embeddings.weight"), fourier ? 0u : 1u);

    const auto back = load_model(tmp / "m");
    EXPECT_EQ(back.model->config().encoder_head, EncoderHead::MaskedLM);
    EXPECT_EQ(back.model->token_embedding().kind(), fourier ? "fourier" : "dense");
    EXPECT_EQ(back.model->parameter_breakdown().total(), r.total_parameters);
    EXPECT_EQ(back.tokenizer->mask_id(), wordpiece().mask_id());
    const MaskedLmOptions m{.ctx = 34};
    const auto in_memory = evaluate_masked_lm(*r.model, wordpiece(), held, m);
    const auto loaded = evaluate_masked_lm(*back.model, *back.tokenizer, held, m);
    EXPECT_EQ(loaded.masked, 600);
    EXPECT_NEAR(loaded.pseudo_ppl, in_memory.pseudo_ppl, 1e-6 * in_memory.pseudo_ppl);
    EXPECT_LT(loaded.pseudo_ppl, 2000.0); // better than uniform
}

INSTANTIATE_TEST_SUITE_P(Embeddings, TrainEncoderEmbedding, ::testing::Values("table", "fourier:linear"),
                         test::ParamName());

TEST(TrainEncoder, BadCombinationsAreRefusedByName)
{
    const std::vector<int32_t> ids(4000, 500);
    auto o = bert_options("table", 1);
    o.objective = "clm";
    test::expect_input_error([&] { check_scratch_options(o, 4000); },
                             "--arch bert trains with --objective mlm");
    o = bert_options("table", 1);
    o.special.mask = -1;
    test::expect_input_error([&] { check_scratch_options(o, 4000); }, "needs the tokenizer's [MASK] token");
    o = bert_options("table", 1);
    o.seqlen = 63; // + [CLS] and [SEP] > 64 positions
    test::expect_input_error([&] { check_scratch_options(o, 4000); }, "seqlen 63 + [CLS] and [SEP] exceeds");
    o = bert_options("table", 1);
    o.mask_rate = 0;
    test::expect_input_error([&] { check_scratch_options(o, 4000); }, "--mask-rate must be in (0, 1]");
    ScratchOptions gpt;
    gpt.config = scratch_config("tiny", 50257);
    gpt.steps = 1;
    gpt.objective = "mlm";
    test::expect_input_error([&] { check_scratch_options(gpt, 100000); }, "mlm is for --arch bert");
    test::expect_input_error([] { scratch_config("tiny", 2000, "t5"); }, "unknown arch 't5'");
}
