// Encoders against independent implementations (issue 42 part 2), on the random-weight
// fixtures of tests/data/encoders (README there): a PyTorch forward written from the
// Hugging Face modelling code (float64) for hidden states, pooling and heads, and
// llama.cpp (its own converter's GGUF, its own graph) for hidden states and pooling.
#include <fstream>
#include <numeric>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedlab/encoder.hpp"
#include "embedlab/masked_lm.hpp"
#include "embedlab/tasks.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

fs::path fixture_dir()
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "tests" / "data" / "encoders";
}

const Json& reference()
{
    static const Json j = Json::parse(std::ifstream(fixture_dir() / "reference.json"));
    return j;
}

torch::Tensor tensor_of(const Json& j)
{
    std::vector<double> flat;
    std::vector<int64_t> shape;
    const Json* level = &j;
    while (level->is_array()) {
        shape.push_back(static_cast<int64_t>(level->size()));
        if (level->empty())
            break;
        level = &(*level)[0];
    }
    std::function<void(const Json&)> walk = [&](const Json& x) {
        if (x.is_array())
            for (const auto& e : x)
                walk(e);
        else
            flat.push_back(x.get<double>());
    };
    walk(j);
    return torch::tensor(flat, torch::kFloat64).view(shape);
}

torch::Tensor ids_of(const Json& j)
{
    return tensor_of(j).to(torch::kLong).view({1, -1});
}

// max |a - b| / max |b|: the per-tensor relative difference.
double relative(const torch::Tensor& a, const torch::Tensor& b)
{
    const auto a64 = a.to(torch::kFloat64).reshape(b.sizes()), b64 = b.to(torch::kFloat64);
    return ((a64 - b64).abs().max() / b64.abs().max()).item<double>();
}

// A model with another activation (llama.cpp computes BERT's GELU in the tanh form).
LanguageModel with_activation(const LanguageModel& m, const std::string& activation)
{
    ModelConfig c = m.config();
    c.activation = activation;
    return LanguageModel(c, m.weights(), activation + " copy");
}

class EncoderParity : public ::testing::TestWithParam<std::string> {};

TEST_P(EncoderParity, HiddenStatesPoolingAndHeadsMatchThePyTorchReference)
{
    const auto& f = reference()["fixtures"][GetParam()];
    const auto lm = load_model(fixture_dir() / f["hf_dir"].get<std::string>());
    const auto& m = *lm.model;
    double worst = 0;
    for (const auto& in : f["inputs"]) {
        SCOPED_TRACE(in["name"].get<std::string>());
        const auto ids = ids_of(in["ids"]);
        const auto h = m.hidden_states(ids);
        const auto& t = in["torch"];
        worst = std::max(worst, relative(h[0], tensor_of(t["hidden"])));
        const auto mask = torch::ones_like(ids);
        const auto mean = pool_hidden(h, mask, Pooling::Mean)[0];
        EXPECT_LT(relative(mean, tensor_of(t["mean"])), 2e-5);
        // The model's own pooling (cls for classifiers, normalised mean for minilm-st; the
        // reference pools a masked-LM model by cls, EmbedLab by mean, checked above).
        auto pooled = pool_hidden(h, mask, default_pooling(m.config()))[0];
        if (m.config().normalize_embeddings)
            pooled = pooled / pooled.norm();
        if (m.config().encoder_head != EncoderHead::MaskedLM) {
            EXPECT_LT(relative(pooled, tensor_of(t["pooled"])), 2e-5);
        }
        if (t.contains("pooler_output")) {
            EXPECT_LT(relative(m.pooler_output(h)[0], tensor_of(t["pooler_output"])), 2e-5);
        }
        if (t.contains("logits")) {
            EXPECT_LT(relative(m.classify(h)[0], tensor_of(t["logits"])), 2e-5);
        }
        if (t.contains("mlm")) {
            const auto logits = m.head(h[0]).to(torch::kFloat64);
            EXPECT_LT(relative(logits.narrow(1, 0, 16), tensor_of(t["mlm"]["first16"])), 2e-5);
            EXPECT_LT(relative(logits.logsumexp(1), tensor_of(t["mlm"]["logsumexp"])), 2e-6);
            EXPECT_TRUE(torch::equal(logits.argmax(1), tensor_of(t["mlm"]["argmax"]).to(torch::kLong)));
        }
    }
    EXPECT_LT(worst, 2e-5) << "hidden states vs the PyTorch reference";
    std::printf("%s: hidden states within %.2g of the PyTorch reference (relative, worst input)\n",
                GetParam().c_str(), worst);
}

TEST_P(EncoderParity, SentencePairsAndPaddedBatchesMatchThePyTorchReference)
{
    const auto& f = reference()["fixtures"][GetParam()];
    const auto lm = load_model(fixture_dir() / f["hf_dir"].get<std::string>());
    const auto& m = *lm.model;
    const auto& pair = reference()["pair"];
    const auto types = ids_of(pair["token_type_ids"]);
    // distilbert has no segment rows: Hugging Face's forward takes no token types.
    const auto h = m.config().type_vocab_size > 0 ? m.encoder_hidden_states(ids_of(pair["input_ids"]), types)
                                                  : m.hidden_states(ids_of(pair["input_ids"]));
    EXPECT_LT(relative(h[0], tensor_of(f["pair"]["torch"]["hidden"])), 2e-5);
    // The pair framed by EmbedLab from the texts gives the reference's ids and segments.
    const std::vector<std::string> a{pair["text"].get<std::string>()},
        b{pair["text_pair"].get<std::string>()};
    const auto framed = frame_texts(*lm.tokenizer, m.config(), a, &b);
    EXPECT_TRUE(torch::equal(framed.ids, ids_of(pair["input_ids"])));
    // distilbert has no segment rows (its tokenizer returns no token_type_ids): all 0.
    EXPECT_TRUE(
        torch::equal(framed.token_types, m.config().type_vocab_size > 1 ? types : torch::zeros_like(types)));

    const auto& batch = reference()["batch"];
    const auto ids = tensor_of(batch["input_ids"]).to(torch::kLong),
               mask = tensor_of(batch["attention_mask"]).to(torch::kLong);
    const auto hb = m.encoder_hidden_states(ids, {}, mask);
    const auto& rows = f["batch"]["torch"];
    for (int64_t i = 0; i < 2; ++i) {
        SCOPED_TRACE("batch row " + std::to_string(i));
        const auto length = batch["lengths"][static_cast<size_t>(i)].get<int64_t>();
        const auto want = tensor_of(rows[static_cast<size_t>(i)]["hidden"]).narrow(0, 0, length);
        EXPECT_LT(relative(hb[i].narrow(0, 0, length), want), 2e-5);
        const auto mean = pool_hidden(hb.narrow(0, i, 1), mask.narrow(0, i, 1), Pooling::Mean)[0];
        EXPECT_LT(relative(mean, tensor_of(rows[static_cast<size_t>(i)]["mean"])), 2e-5);
    }
}

TEST_P(EncoderParity, HiddenStatesMatchLlamaCpp)
{
    const auto& f = reference()["fixtures"][GetParam()];
    const auto lm = load_model(fixture_dir() / f["hf_dir"].get<std::string>());
    // llama.cpp's BERT graph computes GELU in the tanh form, read from an F16 table
    // (inputs and outputs rounded to F16); the Hugging Face model's is the erf form.
    // With llama.cpp's own GELU ("gelu_ggml_f16") EmbedLab agrees with llama.cpp to
    // 0.4-1.8e-4 in norm, 1.2-3.1e-4 at the worst element: the rest of the graph
    // matches and the GELU is the difference. Not lower: rounding to F16 is a step
    // function, so float32 round-off moves a few GELU inputs across an F16 step (one
    // F16 step, 5e-4 relative, on that element; the float64 PyTorch reference gets
    // 0.6-1.3e-4). The tanh form alone gets closer than the model's own.
    const auto tanh_gelu = with_activation(*lm.model, "gelu_pytorch_tanh");
    const auto ggml_gelu = with_activation(*lm.model, "gelu_ggml_f16");
    double own = 0, tanh_form = 0, ggml = 0, ggml_norm = 0, mean = 0, cls = 0;
    for (const auto& in : f["inputs"]) {
        const auto ids = ids_of(in["ids"]);
        const auto& ref = in["llamacpp"];
        const auto h = lm.model->hidden_states(ids);
        own = std::max(own, relative(h[0], tensor_of(ref["hidden"])));
        const auto ht = tanh_gelu.hidden_states(ids);
        tanh_form = std::max(tanh_form, relative(ht[0], tensor_of(ref["hidden"])));
        const auto hg = ggml_gelu.hidden_states(ids)[0].to(torch::kFloat64);
        const auto want = tensor_of(ref["hidden"]).to(torch::kFloat64).reshape(hg.sizes());
        ggml = std::max(ggml, relative(hg, want));
        ggml_norm = std::max(ggml_norm, ((hg - want).norm() / want.norm()).item<double>());
        mean = std::max(
            mean, relative(pool_hidden(ht, torch::ones_like(ids), Pooling::Mean)[0], tensor_of(ref["mean"])));
        cls = std::max(cls, relative(ht[0][0], tensor_of(ref["cls"])));
    }
    std::printf(
        "%s vs llama.cpp (relative, worst of 5 inputs): hidden %.2g (model's erf GELU), %.2g (tanh GELU), "
        "%.2g (llama.cpp's F16-table GELU; %.2g in Frobenius norm); mean %.2g, cls %.2g\n",
        GetParam().c_str(), own, tanh_form, ggml, ggml_norm, mean, cls);
    EXPECT_LT(tanh_form, own);
    EXPECT_LT(ggml, tanh_form);
    EXPECT_LT(ggml_norm, 2.5e-4);
    EXPECT_LT(own, 1.5e-3);
    EXPECT_LT(mean, 1e-3);
    EXPECT_LT(cls, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EncoderParity,
                         ::testing::Values("bert-cls", "distilbert-cls", "distilbert-mlm", "minilm-st"),
                         test::ParamName());

TEST(EncoderGguf, LlamaCppConversionLoadsAsItsHuggingFaceSource)
{
    const auto hf = load_model(fixture_dir() / "minilm-st");
    const auto gguf = load_model(fixture_dir() / "minilm-st.gguf");
    EXPECT_TRUE(gguf.model->config().is_encoder());
    EXPECT_EQ(gguf.model->config().pooling, "mean"); // bert.pooling_type
    EXPECT_EQ(gguf.tokenizer->kind(), hf.tokenizer->kind());
    for (const auto& in : reference()["inputs"]) {
        const auto text = in["text"].get<std::string>();
        EXPECT_EQ(gguf.tokenizer->encode(text), hf.tokenizer->encode(text)) << text;
        const auto ids = ids_of(in["ids"]);
        EXPECT_LT(relative(gguf.model->hidden_states(ids), hf.model->hidden_states(ids)), 1e-6);
    }
    // llama-quantize's Q8_0: close, not equal.
    const auto q8 = load_model(fixture_dir() / "minilm-st-q8_0.gguf");
    const auto ids = ids_of(reference()["inputs"][0]["ids"]);
    const double diff = relative(q8.model->hidden_states(ids), hf.model->hidden_states(ids));
    EXPECT_GT(diff, 1e-6);
    EXPECT_LT(diff, 5e-2);
}

TEST(EncoderEmbed, SentenceTransformersPoolingAndNormalize)
{
    const auto lm = load_model(fixture_dir() / "minilm-st");
    std::vector<std::string> texts;
    for (const auto& in : reference()["inputs"])
        texts.push_back(in["text"].get<std::string>());
    const auto e = embed_texts(*lm.model, *lm.tokenizer, texts, {.batch_size = 2});
    EXPECT_EQ(e.pooling, Pooling::Mean);
    EXPECT_TRUE(e.normalized);
    for (size_t i = 0; i < texts.size(); ++i)
        EXPECT_LT(relative(e.values[static_cast<int64_t>(i)],
                           tensor_of(reference()["fixtures"]["minilm-st"]["inputs"][i]["torch"]["pooled"])),
                  2e-5)
            << texts[i];
    // Asked for explicitly, without --normalize: CLS, as it is.
    const auto cls = embed_texts(*lm.model, *lm.tokenizer, texts, {.pooling = Pooling::Cls});
    EXPECT_FALSE(cls.normalized);
    EXPECT_LT(relative(cls.values[0], lm.model->hidden_states(ids_of(reference()["inputs"][0]["ids"]))[0][0]),
              1e-6);
}

} // namespace
} // namespace embedlab

namespace embedlab {
namespace {

TEST(MaskedLm, PseudoPerplexityMasksEachTokenInTurnWindowByWindow)
{
    const auto lm = load_model(fixture_dir() / "distilbert-mlm");
    const auto& m = *lm.model;
    const auto ids = lm.tokenizer->encode("a sometimes tedious film about a man and his dog .");
    ASSERT_GE(ids.size(), 9u);
    const MaskedLmOptions o{.ctx = 6, .batch = 5}; // windows of 4 ids; batches cut across windows
    const auto r = evaluate_masked_lm(m, *lm.tokenizer, ids, o);
    EXPECT_EQ(r.masked, static_cast<int64_t>(ids.size()));
    // By hand: [CLS] window [SEP], one position masked at a time, -log p(original).
    double nll = 0;
    int64_t right = 0;
    for (size_t start = 0; start < ids.size(); start += 4) {
        const size_t len = std::min<size_t>(4, ids.size() - start);
        std::vector<int64_t> framed{*lm.tokenizer->cls_id()};
        framed.insert(framed.end(), ids.begin() + static_cast<std::ptrdiff_t>(start),
                      ids.begin() + static_cast<std::ptrdiff_t>(start + len));
        framed.push_back(*lm.tokenizer->sep_id());
        for (size_t p = 1; p <= len; ++p) {
            auto input = framed;
            input[p] = *lm.tokenizer->mask_id();
            const auto logits = m.logits(torch::tensor(input).unsqueeze(0))[0][static_cast<int64_t>(p)];
            const auto logp = torch::log_softmax(logits.to(torch::kDouble), -1);
            nll -= logp[framed[p]].item<double>();
            right += logp.argmax().item<int64_t>() == framed[p];
        }
    }
    EXPECT_NEAR(r.nll_per_token, nll / static_cast<double>(ids.size()), 1e-6); // float32, batched
    EXPECT_NEAR(r.pseudo_ppl, std::exp(nll / static_cast<double>(ids.size())), 1e-6 * r.pseudo_ppl);
    EXPECT_DOUBLE_EQ(r.accuracy, static_cast<double>(right) / static_cast<double>(ids.size()));

    // 15% at once, by seed: the same draw twice, another with another seed; KL to itself 0.
    const MaskedLmOptions random{.ctx = 6, .mask_rate = 0.5, .seed = 7};
    const auto a = evaluate_masked_lm(m, *lm.tokenizer, ids, random, &m);
    const auto b = evaluate_masked_lm(m, *lm.tokenizer, ids, random);
    EXPECT_EQ(a.nll_per_token, b.nll_per_token);
    EXPECT_EQ(a.masked,
              2 + 2 + static_cast<int64_t>(std::max<size_t>(1, std::llround(0.5 * (ids.size() - 8)))));
    EXPECT_NEAR(a.kl, 0.0, 1e-12);
    // A body without the head, and a rate of 1, are refused by name.
    const auto body = load_model(fixture_dir() / "minilm-st");
    EXPECT_THROW(evaluate_masked_lm(*body.model, *body.tokenizer, ids, o), InputError);
    EXPECT_THROW(evaluate_masked_lm(m, *lm.tokenizer, ids, {.mask_rate = 1.0}), InputError);
}

// A share masked at once (mask_rate > 0): each window's positions drawn in window order
// from one generator seeded by `seed`, by hand here; the inputs are made a batch at a
// time (issue 57 item 9), so batch sizes that cut across windows change nothing.
TEST(MaskedLm, ARandomMaskDrawsEachWindowInTurnWhateverTheBatch)
{
    const auto lm = load_model(fixture_dir() / "distilbert-mlm");
    const auto& m = *lm.model;
    const auto ids = lm.tokenizer->encode("a sometimes tedious film about a man and his dog , and a cat .");
    ASSERT_GE(ids.size(), 12u);
    std::mt19937_64 rng(11);
    double nll = 0;
    int64_t masked = 0;
    for (size_t start = 0; start < ids.size(); start += 4) {
        const auto len = static_cast<int64_t>(std::min<size_t>(4, ids.size() - start));
        std::vector<int64_t> framed{*lm.tokenizer->cls_id()};
        framed.insert(framed.end(), ids.begin() + static_cast<std::ptrdiff_t>(start),
                      ids.begin() + static_cast<std::ptrdiff_t>(start) + len);
        framed.push_back(*lm.tokenizer->sep_id());
        std::vector<int64_t> chosen(static_cast<size_t>(len));
        std::iota(chosen.begin(), chosen.end(), 1);
        std::shuffle(chosen.begin(), chosen.end(), rng);
        chosen.resize(
            static_cast<size_t>(std::max<int64_t>(1, std::llround(0.5 * static_cast<double>(len)))));
        auto input = framed;
        for (const int64_t p : chosen)
            input[static_cast<size_t>(p)] = *lm.tokenizer->mask_id();
        const auto logp =
            torch::log_softmax(m.logits(torch::tensor(input).unsqueeze(0))[0].to(torch::kDouble), -1);
        for (const int64_t p : chosen)
            nll -= logp[p][framed[static_cast<size_t>(p)]].item<double>();
        masked += static_cast<int64_t>(chosen.size());
    }
    for (const int64_t batch : {1, 2, 3, 64}) {
        const auto r = evaluate_masked_lm(m, *lm.tokenizer, ids,
                                          {.ctx = 6, .mask_rate = 0.5, .seed = 11, .batch = batch});
        EXPECT_EQ(r.masked, masked) << batch;
        EXPECT_NEAR(r.nll_per_token, nll / static_cast<double>(masked), 1e-6) << batch; // float32, batched
    }
}

// sentence-transformers truncates each input to sentence_bert_config.json's max_seq_length
// (its tokenizer call: max_length with truncation 'longest_first', so [CLS] and [SEP]
// count). PyTorch is not needed for the reference: each of these words is one WordPiece
// token, so the text of the first max_seq_length - 2 words is the text truncated by hand,
// and the body on those ids framed [CLS] .. [SEP] is computed here without frame_texts.
std::string words(size_t n, size_t offset = 0)
{
    static const char* const cycle[] = {"a", "man", "dog", "the", "guitar", "word", "dog", "a", "the"};
    std::string out;
    for (size_t i = 0; i < n; ++i)
        out += std::string(i ? " " : "") + cycle[(i + offset) % std::size(cycle)];
    return out;
}

// A copy of minilm-st whose sentence_bert_config.json says max_seq_length `length`.
fs::path minilm_with_max_length(const test::TempDir& dir, const std::string& length)
{
    const fs::path copy = dir / "minilm-st";
    fs::copy(fixture_dir() / "minilm-st", copy, fs::copy_options::recursive);
    std::ofstream(copy / "sentence_bert_config.json", std::ios::trunc)
        << "{\"max_seq_length\": " << length << ", \"do_lower_case\": false}\n";
    return copy;
}

// Mean of the body's hidden states over [CLS] ids [SEP], normalised (minilm-st's own).
torch::Tensor embedding_of_ids(const LoadedModel& lm, const std::vector<int32_t>& ids)
{
    std::vector<int64_t> framed{*lm.tokenizer->cls_id()};
    framed.insert(framed.end(), ids.begin(), ids.end());
    framed.push_back(*lm.tokenizer->sep_id());
    c10::InferenceMode guard;
    const auto pooled = lm.model->encoder_hidden_states(torch::tensor(framed).unsqueeze(0))[0].mean(0);
    return pooled / pooled.norm().clamp_min(1e-12);
}

TEST(EncoderTruncation, ALongTextIsCutToMaxSeqLengthAsSentenceTransformersDoes)
{
    // minilm-st: max_seq_length 128 (sentence_bert_config.json) = its 128 positions. A
    // 300-token text was refused; sentence-transformers embeds its first 126 tokens.
    const auto lm = load_model(fixture_dir() / "minilm-st");
    const std::string text = words(300);
    const auto ids = lm.tokenizer->encode(text);
    ASSERT_EQ(ids.size(), 300u);
    const auto e = embed_texts(*lm.model, *lm.tokenizer, {text, words(5)}, {});
    EXPECT_EQ(e.truncated, 1);
    const auto expected = embedding_of_ids(lm, std::vector<int32_t>(ids.begin(), ids.begin() + 126));
    EXPECT_LT(relative(e.values[0], expected), 1e-5);
    const auto by_text = embed_texts(*lm.model, *lm.tokenizer, {words(126)}, {});
    EXPECT_EQ(by_text.truncated, 0);
    EXPECT_LT(relative(e.values[0], by_text.values[0]), 1e-5);
    // The short text in the same batch is untouched.
    EXPECT_LT(relative(e.values[1], embedding_of_ids(lm, lm.tokenizer->encode(words(5)))), 1e-5);
}

TEST(EncoderTruncation, MaxSeqLengthBelowThePositionsCutsWhatTheModelCouldRead)
{
    // max_seq_length 16 (all-MiniLM-L6-v2: 256 of 512 positions): a text of 20 tokens fits
    // the positions but sentence-transformers reads only its first 14.
    test::TempDir dir;
    const auto lm = load_model(minilm_with_max_length(dir, "16"));
    const auto e = embed_texts(*lm.model, *lm.tokenizer, {words(20), words(14), words(15)}, {});
    EXPECT_EQ(e.truncated, 2); // 14 + [CLS] + [SEP] = 16 fits; 15 does not
    const auto cut = embed_texts(*lm.model, *lm.tokenizer, {words(14)}, {});
    EXPECT_LT(relative(e.values[0], cut.values[0]), 1e-5);
    EXPECT_LT(relative(e.values[2], cut.values[0]), 1e-5);
    const auto ids = lm.tokenizer->encode(words(20));
    EXPECT_LT(
        relative(e.values[0], embedding_of_ids(lm, std::vector<int32_t>(ids.begin(), ids.begin() + 14))),
        1e-5);
    // Without the file's limit (the original fixture) the 20 tokens are all read.
    const auto full = load_model(fixture_dir() / "minilm-st");
    EXPECT_GT(relative(embed_texts(*full.model, *full.tokenizer, {words(20)}, {}).values[0], cut.values[0]),
              1e-3);
}

TEST(EncoderTruncation, PairsAreCutLongestFirstAsHuggingFaceTokenizers)
{
    // max_seq_length 10: 7 ids for a pair after [CLS] a [SEP] b [SEP]. The lengths are
    // tokenizers' own truncate_encodings_longest_first cases (max_length 7 there).
    test::TempDir dir;
    const auto lm = load_model(minilm_with_max_length(dir, "10"));
    const int32_t cls = *lm.tokenizer->cls_id(), sep = *lm.tokenizer->sep_id();
    const std::vector<std::array<size_t, 4>> cases = {// |a|, |b| -> kept of a, kept of b
                                                      {2, 4, 2, 4}, {2, 8, 2, 5}, {4, 2, 4, 2}, {4, 4, 3, 4},
                                                      {4, 8, 3, 4}, {8, 2, 5, 2}, {8, 4, 4, 3}, {8, 8, 3, 4},
                                                      {0, 8, 0, 7}, {8, 0, 7, 0}};
    for (const auto& [na, nb, ka, kb] : cases) {
        const std::vector<std::string> first{words(na)}, second{words(nb, 3)};
        const auto batch = frame_texts(*lm.tokenizer, lm.model->config(), first, &second);
        const auto a = lm.tokenizer->encode(first[0]), b = lm.tokenizer->encode(second[0]);
        std::vector<int64_t> expected{cls};
        expected.insert(expected.end(), a.begin(), a.begin() + static_cast<std::ptrdiff_t>(ka));
        expected.push_back(sep);
        expected.insert(expected.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(kb));
        expected.push_back(sep);
        const auto row = batch.ids[0];
        EXPECT_EQ(std::vector<int64_t>(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel()),
                  expected)
            << na << " + " << nb;
        EXPECT_EQ(batch.truncated, na + nb > 7 ? 1 : 0) << na << " + " << nb;
        EXPECT_EQ(batch.token_types[0].sum().item<int64_t>(), static_cast<int64_t>(kb + 1))
            << na << " + " << nb;
    }
    // A single text keeps max_seq_length - 2 ids.
    const auto one = frame_texts(*lm.tokenizer, lm.model->config(), {words(12)});
    EXPECT_EQ(one.ids.size(1), 10);
    EXPECT_EQ(one.truncated, 1);
}

TEST(EncoderTruncation, StsbEmbedsTheTruncatedSentences)
{
    test::TempDir dir;
    const auto lm = load_model(minilm_with_max_length(dir, "16"));
    const std::vector<SentencePair> long_pairs{
        {words(25), words(6, 2), 4.0}, {words(3, 1), words(30, 4), 1.0}, {words(5), words(7, 5), 2.5}};
    std::vector<SentencePair> cut = long_pairs;
    cut[0].first = words(14);
    cut[1].second = words(14, 4);
    const auto a = evaluate_similarity(*lm.model, *lm.tokenizer, long_pairs);
    const auto b = evaluate_similarity(*lm.model, *lm.tokenizer, cut);
    ASSERT_EQ(a.cosines.size(), 3u);
    for (size_t i = 0; i < 3; ++i)
        EXPECT_NEAR(a.cosines[i], b.cosines[i], 1e-6) << i;
}

TEST(EncoderTruncation, AMaxSeqLengthThatIsNoTokenCountIsRefused)
{
    test::TempDir dir;
    test::expect_input_error([&] { load_model(minilm_with_max_length(dir, "\"long\"")); },
                             "sentence_bert_config.json: max_seq_length \"long\" is not a whole number");
    // null: sentence-transformers infers its own; nothing is cut here.
    test::TempDir other;
    const auto lm = load_model(minilm_with_max_length(other, "null"));
    EXPECT_EQ(embed_texts(*lm.model, *lm.tokenizer, {words(40)}, {}).truncated, 0);
}

} // namespace
} // namespace embedlab
