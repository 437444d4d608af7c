// Vocabulary trimming (trim.hpp, issue 60): the kept set recounted independently
// from the files, identical tokenization of in-domain texts per tokenizer family,
// texts with dropped tokens still encoding to the same text, the trimmed directory's
// logits equal to the original's at the kept ids (tied and untied heads), the
// record's dropped-mass figure recomputed, refusals with their exact messages, an
// interrupted run leaving nothing, the CLI, and transformers.js on the rewritten
// tokenizer.json when it is installed.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli_support.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/tokenizer.hpp"
#include "embedlab/trim.hpp"
#include "embedlab/wordpiece.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

namespace {

namespace fs = std::filesystem;
using namespace embedlab;
using namespace embedlab::test;
using Json = nlohmann::json;

fs::path source()
{
    return EMBEDLAB_SOURCE_DIR;
}
fs::path gpt2_dir()
{
    return source() / "resources/models/tinygpt2-f16";
}
fs::path bert_dir()
{
    return source() / "tests/data/encoders/bert-cls";
}
fs::path distilbert_mlm_dir()
{
    return source() / "tests/data/encoders/distilbert-mlm";
}
fs::path tinyllama_dir()
{
    return shared_dir() / "models/tinyllama";
}

constexpr size_t kFreqBytes = 60000; // of the 79 kB held-out text

// The frequency text (the held-out stories' first 60 kB, to a line's end) and the sentences after it.
struct Corpus {
    TempDir dir;
    fs::path freq;
    std::vector<std::string> lines;
    Corpus()
    {
        const std::string text = read_text(source() / "resources/texts/tinystories-heldout.txt");
        freq = dir / "freq.txt";
        const size_t cut = text.find('\n', kFreqBytes) + 1;
        write_file(freq, text.substr(0, cut));
        for (size_t pos = cut; pos < text.size() && lines.size() < 400;) {
            size_t end = text.find('\n', pos);
            if (end == std::string::npos)
                end = text.size();
            // Sentence by sentence: short texts, most of them of kept tokens only.
            const std::string line = text.substr(pos, end - pos);
            for (size_t from = 0; from < line.size();) {
                size_t stop = line.find_first_of(".!?", from);
                stop = stop == std::string::npos ? line.size() : stop + 1;
                if (stop > from + 1)
                    lines.push_back(line.substr(from, stop - from));
                from = stop;
            }
            pos = end + 1;
        }
    }
};

const Corpus& corpus()
{
    static const Corpus c;
    return c;
}

// Texts far from the stories: rare words, accents, symbols, scripts the stories lack.
const std::vector<std::string>& foreign_texts()
{
    static const std::vector<std::string> texts{
        "Photosynthesis converts electromagnetic radiation within chloroplasts.",
        "Zürich's naïve café served crème brûlée; Ångström measured 42.195 km.",
        "The Byzantine emperor Justinian codified Roman law in 529 AD.",
        "∀x ∈ ℝ: x² ≥ 0 ☃ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 👩‍🔬 日本語のテキスト",
        "def f(x):\n\treturn {'key': [1, 2, 3]}  # comment",
        "Thermodynamics, electroencephalography and xylophones."};
    return texts;
}

TrimReport trim(const fs::path& model, const fs::path& out, TrimOptions o)
{
    if (o.freq_text.empty())
        o.freq_text = corpus().freq;
    return trim_model(model, out, o);
}

TrimOptions with_coverage(double c)
{
    TrimOptions o;
    o.coverage = c;
    return o;
}

std::vector<int32_t> renumbered(const std::vector<int32_t>& ids, const std::vector<int32_t>& kept)
{
    std::vector<int32_t> out;
    for (int32_t id : ids) {
        const auto it = std::lower_bound(kept.begin(), kept.end(), id);
        out.push_back(it != kept.end() && *it == id ? static_cast<int32_t>(it - kept.begin()) : -1);
    }
    return out;
}

bool all_kept(const std::vector<int32_t>& ids, const std::vector<int32_t>& kept)
{
    return std::all_of(ids.begin(), ids.end(),
                       [&](int32_t id) { return std::binary_search(kept.begin(), kept.end(), id); });
}

// --- An independent reading of GPT-2's files: bytes_to_unicode, vocab.json, merges.txt.

std::string utf8(int cp)
{
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

// GPT-2's encoder.py bytes_to_unicode(), as written there.
std::vector<std::string> gpt2_byte_tokens()
{
    std::vector<int> printable;
    for (int b = '!'; b <= '~'; ++b)
        printable.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b)
        printable.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b)
        printable.push_back(b);
    std::vector<std::string> out(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
        const bool direct = std::find(printable.begin(), printable.end(), b) != printable.end();
        out[static_cast<size_t>(b)] = utf8(direct ? b : 256 + n++);
    }
    return out;
}

struct Gpt2Files {
    std::map<std::string, int32_t> ids;
    std::map<int32_t, std::vector<int32_t>> parts; // result -> its merges' parts
};

Gpt2Files read_gpt2_files(const fs::path& dir)
{
    Gpt2Files f;
    const Json vocab = Json::parse(read_text(dir / "vocab.json")); // bound: items() of a temporary
    for (const auto& [text, id] : vocab.items())
        f.ids[text] = id.get<int32_t>();
    std::istringstream merges(read_text(dir / "merges.txt"));
    std::string line;
    while (std::getline(merges, line)) {
        if (line.starts_with("#version") || line.empty())
            continue;
        const auto space = line.find(' ');
        const std::string a = line.substr(0, space), b = line.substr(space + 1);
        if (f.ids.count(a) && f.ids.count(b) && f.ids.count(a + b)) {
            f.parts[f.ids[a + b]].push_back(f.ids[a]);
            f.parts[f.ids[a + b]].push_back(f.ids[b]);
        }
    }
    return f;
}

void add_with_parts(const Gpt2Files& f, int32_t id, std::set<int32_t>& into)
{
    if (!into.insert(id).second)
        return;
    if (const auto it = f.parts.find(id); it != f.parts.end())
        for (int32_t part : it->second)
            add_with_parts(f, part, into);
}

struct Recount {
    std::vector<int32_t> order; // by count, then id
    std::map<int32_t, int64_t> counts;
    int64_t total = 0;
};

Recount recount(const fs::path& model)
{
    Recount r;
    for (int32_t id : load_tokenizer_from_directory(model)->encode(read_text(corpus().freq)))
        ++r.counts[id], ++r.total;
    for (const auto& [id, n] : r.counts)
        r.order.push_back(id);
    std::sort(r.order.begin(), r.order.end(), [&](int32_t a, int32_t b) {
        return r.counts[a] != r.counts[b] ? r.counts[a] > r.counts[b] : a < b;
    });
    return r;
}

std::set<int32_t> gpt2_required(const Gpt2Files& f)
{
    std::set<int32_t> required;
    for (const std::string& byte : gpt2_byte_tokens())
        add_with_parts(f, f.ids.at(byte), required);
    add_with_parts(f, f.ids.at("<|endoftext|>"), required);
    return required;
}

TEST(Trim, KeepNIsTheMostFrequentIdsPlusTheRequiredTokensRecounted)
{
    const Gpt2Files files = read_gpt2_files(gpt2_dir());
    const Recount r = recount(gpt2_dir());
    const std::set<int32_t> required = gpt2_required(files);
    ASSERT_EQ(required.size(), 257u); // 256 byte tokens and <|endoftext|>, none merged from others
    for (int64_t keep : {257, 600, 1500}) {
        SCOPED_TRACE("keep " + std::to_string(keep));
        std::set<int32_t> expected = required;
        size_t prefix = 0;
        for (int32_t id : r.order) {
            std::set<int32_t> with = expected;
            add_with_parts(files, id, with);
            if (static_cast<int64_t>(with.size()) > keep)
                break;
            expected = std::move(with);
            ++prefix;
        }
        TempDir out;
        TrimOptions o;
        o.keep = keep;
        const TrimReport report = trim(gpt2_dir(), out / "t", o);
        EXPECT_EQ(report.kept, std::vector<int32_t>(expected.begin(), expected.end()));
        EXPECT_LE(static_cast<int64_t>(report.kept.size()), keep);
        EXPECT_EQ(report.required, 257);
        // The most frequent ids are all there, in a prefix of the order (ties by id).
        for (size_t i = 0; i < prefix; ++i)
            EXPECT_TRUE(std::binary_search(report.kept.begin(), report.kept.end(), r.order[i]));
        if (keep > 257) {
            EXPECT_GT(prefix, 100u);
        }
    }
}

TEST(Trim, CoverageIsTheShortestPrefixCoveringTheShareRecounted)
{
    const Gpt2Files files = read_gpt2_files(gpt2_dir());
    const Recount r = recount(gpt2_dir());
    for (double c : {0.5, 0.9, 0.99}) {
        SCOPED_TRACE("coverage " + std::to_string(c));
        std::set<int32_t> expected = gpt2_required(files);
        int64_t covered = 0;
        for (int32_t id : r.order) {
            if (static_cast<double>(covered) >= c * static_cast<double>(r.total))
                break;
            add_with_parts(files, id, expected);
            covered += r.counts.at(id);
        }
        TempDir out;
        const TrimReport report = trim(gpt2_dir(), out / "t", with_coverage(c));
        EXPECT_EQ(report.kept, std::vector<int32_t>(expected.begin(), expected.end()));
        EXPECT_GE(report.record["frequency"]["covered"].get<double>(), c);
        EXPECT_EQ(report.record["kept_tokens"].get<int64_t>(), static_cast<int64_t>(expected.size()));
    }
}

// --- Identical tokenization, per family.

struct FamilyCase {
    std::string name;
    fs::path (*dir)();
    bool needs_shared;
    bool exact_decode; // decode gives the text back (not WordPiece's normalised form)
};

class TrimFamily : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(TrimFamily, InDomainTextsTokenizeTheSameAndOthersStillEncode)
{
    const FamilyCase& c = GetParam();
    if (c.needs_shared && !fs::exists(c.dir()))
        GTEST_SKIP() << "needs " << c.dir() << " (../shared)";
    TempDir out;
    const TrimReport report = trim(c.dir(), out / "t", with_coverage(0.99));
    const auto original = load_tokenizer_from_directory(c.dir());
    const auto trimmed = load_tokenizer_from_directory(out / "t");
    const auto K = static_cast<int32_t>(report.kept.size());
    ASSERT_EQ(trimmed->vocab_size(), K);
    int same = 0, other = 0;
    std::vector<std::string> texts = corpus().lines;
    texts.insert(texts.end(), foreign_texts().begin(), foreign_texts().end());
    for (const std::string& text : texts) {
        const auto before = original->encode(text);
        const auto after = trimmed->encode(text);
        if (all_kept(before, report.kept)) {
            EXPECT_EQ(after, renumbered(before, report.kept)) << text;
            ++same;
            continue;
        }
        ++other;
        for (int32_t id : after)
            ASSERT_TRUE(id >= 0 && id < K) << text;
        if (c.exact_decode)
            EXPECT_EQ(trimmed->decode(after), text);
        else
            EXPECT_EQ(trimmed->decode(after), original->decode(before)) << text;
    }
    EXPECT_GT(same, 30);
    EXPECT_GE(other, static_cast<int>(foreign_texts().size()));
}

INSTANTIATE_TEST_SUITE_P(Families, TrimFamily,
                         ::testing::Values(FamilyCase{"gpt2_byte_level_bpe", gpt2_dir, false, true},
                                           FamilyCase{"bert_wordpiece", bert_dir, false, false},
                                           FamilyCase{"tinyllama_sentencepiece", tinyllama_dir, true, true}),
                         [](const auto& info) { return info.param.name; });

// Every file the input had says the same: vocab.json + merges.txt and vocab.txt give
// the ids tokenizer.json gives.
TEST(Trim, EveryRewrittenTokenizerFileAgrees)
{
    TempDir out;
    trim(gpt2_dir(), out / "g", with_coverage(0.99));
    trim(bert_dir(), out / "b", with_coverage(0.99));
    const auto gpt2_json = load_hf_tokenizer_json(out / "g/tokenizer.json");
    const auto gpt2_pair = load_gpt2_bpe(out / "g/vocab.json", out / "g/merges.txt");
    const auto bert_json = load_tokenizer_from_directory(out / "b");
    const auto bert_txt = load_wordpiece_vocab(out / "b/vocab.txt");
    for (const auto& text : foreign_texts()) {
        EXPECT_EQ(gpt2_json->encode(text), gpt2_pair->encode(text)) << text;
        EXPECT_EQ(bert_json->encode(text), bert_txt->encode(text)) << text;
    }
    EXPECT_EQ(Json::parse(read_text(out / "g/config.json"))["vocab_size"],
              Json::parse(read_text(out / "g/trim.json"))["kept_tokens"]);
}

// --- The model: logits over the kept tokens are the original's at the kept ids.

void expect_logits_restricted(const fs::path& model, const fs::path& trimmed_dir,
                              const std::vector<int32_t>& kept)
{
    const LoadedModel original = load_model(model);
    const LoadedModel trimmed = load_model(trimmed_dir);
    ASSERT_EQ(trimmed.model->config().vocab_size, static_cast<int64_t>(kept.size()));
    std::vector<int32_t> ids;
    std::string text;
    for (size_t i = 0; i < 6; ++i)
        text += corpus().lines.at(i);
    for (int32_t id : original.tokenizer->encode(text))
        if (std::binary_search(kept.begin(), kept.end(), id) &&
            ids.size() < 24) // the tiny llama's 32 positions
            ids.push_back(id);
    ASSERT_GE(ids.size(), 16u);
    const auto as_tensor = [](const std::vector<int32_t>& v) {
        return torch::tensor(std::vector<int64_t>(v.begin(), v.end()), torch::kLong).unsqueeze(0);
    };
    const torch::Tensor columns = torch::tensor(std::vector<int64_t>(kept.begin(), kept.end()), torch::kLong);
    const torch::Tensor expected = original.model->logits(as_tensor(ids)).index_select(2, columns);
    const torch::Tensor got = trimmed.model->logits(as_tensor(renumbered(ids, kept)));
    ASSERT_EQ(got.sizes(), expected.sizes());
    EXPECT_LT((got - expected).abs().max().item<double>(), 1e-4);
}

TEST(Trim, TiedHeadLogitsAreTheOriginalsAtTheKeptIds)
{
    TempDir out;
    const auto report = trim(gpt2_dir(), out / "t", with_coverage(0.99));
    EXPECT_EQ(report.record["tensors_cut"], Json::array({"wte.weight"}));
    expect_logits_restricted(gpt2_dir(), out / "t", report.kept);
}

TEST(Trim, UntiedHeadLogitsAreTheOriginalsAtTheKeptIds)
{
    // A llama with GPT-2's tokenizer and an untied head, random weights.
    TempDir dir;
    ModelConfig c = tiny_config(Architecture::Llama);
    c.vocab_size = 50257;
    write_tiny_hf_model(dir / "m", c, random_weights(c));
    for (const char* f : {"tokenizer.json", "vocab.json", "merges.txt"})
        fs::copy_file(gpt2_dir() / f, dir / "m" / f);
    const auto report = trim(dir / "m", dir / "t", with_coverage(0.99));
    const auto cut = report.record["tensors_cut"].get<std::vector<std::string>>();
    EXPECT_EQ(std::set<std::string>(cut.begin(), cut.end()),
              (std::set<std::string>{"model.embed_tokens.weight", "lm_head.weight"}));
    expect_logits_restricted(dir / "m", dir / "t", report.kept);
}

TEST(Trim, SentencePieceUntiedModelLogitsAreTheOriginalsAtTheKeptIds)
{
    if (!fs::exists(tinyllama_dir()))
        GTEST_SKIP() << "needs " << tinyllama_dir() << " (../shared)";
    TempDir out;
    const auto report = trim(tinyllama_dir(), out / "t", with_coverage(0.99));
    expect_logits_restricted(tinyllama_dir(), out / "t", report.kept);
}

TEST(Trim, MaskedLmHeadAndItsBiasAreCut)
{
    TempDir out;
    const auto report = trim(distilbert_mlm_dir(), out / "t", with_coverage(0.99));
    const auto cut = report.record["tensors_cut"].get<std::vector<std::string>>();
    EXPECT_EQ(
        std::set<std::string>(cut.begin(), cut.end()),
        (std::set<std::string>{"distilbert.embeddings.word_embeddings.weight", "vocab_projector.bias"}));
    expect_logits_restricted(distilbert_mlm_dir(), out / "t", report.kept);
}

// Only a head over the vocabulary loses the dropped ids: a sequence classifier's or a
// sentence encoder's outputs keep their shape, and the record says so.
TEST(Trim, TheRecordSaysWhichOutputCoversOnlyTheKeptTokens)
{
    TempDir out;
    const auto said = [&](const fs::path& model, const std::string& name) {
        return trim(model, out / name, with_coverage(0.5)).record["output_distribution"].get<std::string>();
    };
    EXPECT_EQ(said(gpt2_dir(), "g"), "over the kept tokens only (the original's logits at the kept ids)");
    EXPECT_EQ(said(distilbert_mlm_dir(), "m"),
              "masked-LM logits over the kept tokens only (the original's logits at the kept ids)");
    const std::string unchanged =
        "none over tokens: the encoder's outputs (hidden states, pooled embeddings, "
        "class logits) keep their shape";
    EXPECT_EQ(said(bert_dir(), "b"), unchanged);
    EXPECT_EQ(said(source() / "tests/data/encoders/minilm-st", "s"), unchanged);
}

// --- The record's evaluation.

TEST(Trim, RecordsDroppedMassAsTheOriginalsProbabilityOnDroppedIds)
{
    TempDir out;
    // One window of 64: the evaluation's scored positions are 1..63.
    const auto original = load_model(gpt2_dir());
    std::string joined;
    for (size_t i = 0; i < 8; ++i)
        joined += corpus().lines.at(i);
    const std::string text = joined.substr(0, joined.rfind(' ', 400));
    const auto ids = original.tokenizer->encode(text);
    ASSERT_GE(ids.size(), 65u);
    ASSERT_LE(ids.size(), 250u);
    write_file(out / "eval.txt", text);
    TrimOptions o = with_coverage(0.9);
    o.eval_text = out / "eval.txt";
    o.ctx = static_cast<int64_t>(ids.size()) - 1; // one window holds the whole text
    const auto report = trim(gpt2_dir(), out / "t", o);
    const Json e = report.record["evaluation"];

    std::vector<int64_t> dropped;
    for (int64_t id = 0; id < 50257; ++id)
        if (!std::binary_search(report.kept.begin(), report.kept.end(), static_cast<int32_t>(id)))
            dropped.push_back(id);
    const torch::Tensor logits =
        original.model->logits(torch::tensor(std::vector<int64_t>(ids.begin(), ids.end())).unsqueeze(0))[0];
    const torch::Tensor p = torch::softmax(logits.slice(0, 0, logits.size(0) - 1).to(torch::kDouble), -1);
    const double expected = p.index_select(1, torch::tensor(dropped)).sum(1).mean().item<double>();
    EXPECT_NEAR(e["dropped_mass_mean"].get<double>(), expected, 1e-9);
    EXPECT_GT(expected, 0.0);

    int64_t dropped_in_text = 0;
    for (int32_t id : ids)
        dropped_in_text += std::binary_search(report.kept.begin(), report.kept.end(), id) ? 0 : 1;
    EXPECT_DOUBLE_EQ(e["dropped_token_share"].get<double>(),
                     static_cast<double>(dropped_in_text) / static_cast<double>(ids.size()));
    EXPECT_GE(e["changed_token_share"].get<double>(), e["dropped_token_share"].get<double>());
    EXPECT_TRUE(std::isfinite(e["original"]["bits_per_byte"].get<double>()));
    EXPECT_TRUE(std::isfinite(e["trimmed"]["bits_per_byte"].get<double>()));
    EXPECT_NEAR(e["delta_ln_ppl"].get<double>(),
                std::log(e["trimmed"]["ppl"].get<double>()) - std::log(e["original"]["ppl"].get<double>()),
                1e-12);
}

TEST(Trim, AnEvalTextOfKeptTokensChangesNothing)
{
    TempDir out;
    write_file(out / "text.txt", corpus().lines.at(0) + corpus().lines.at(1) + corpus().lines.at(2) + "\n");
    TrimOptions o = with_coverage(1.0);
    o.freq_text = out / "text.txt";
    o.eval_text = out / "text.txt";
    const auto e = trim(gpt2_dir(), out / "t", o).record["evaluation"];
    EXPECT_EQ(e["changed_token_share"].get<double>(), 0.0);
    EXPECT_EQ(e["dropped_token_share"].get<double>(), 0.0);
    EXPECT_EQ(e["tokens_original"], e["tokens_trimmed"]);
    EXPECT_EQ(e["original"]["scored_bytes"], e["trimmed"]["scored_bytes"]);
    EXPECT_GT(e["dropped_mass_mean"].get<double>(), 0.0); // the original spreads mass over all 50,257
}

// --- Refusals, before any work.

TEST(Trim, RefusesBadBudgetsAndInputsNamingTheField)
{
    TempDir out;
    const auto refused = [&](const fs::path& model, TrimOptions o) {
        const std::string message = input_error_of([&] { trim(model, out / "t", o); }, "(accepted)");
        EXPECT_FALSE(fs::exists(out / "t")) << message;
        return message;
    };
    EXPECT_EQ(refused(gpt2_dir(), with_coverage(0)),
              "trim: coverage 0 is outside (0, 1] (the share of the frequency text's token occurrences kept "
              "tokens cover)");
    EXPECT_EQ(
        refused(gpt2_dir(), with_coverage(1.5)),
        "trim: coverage 1.5 is outside (0, 1] (the share of the frequency text's token occurrences kept "
        "tokens cover)");
    TrimOptions keep;
    keep.keep = 100;
    EXPECT_EQ(
        refused(gpt2_dir(), keep),
        "trim: keep 100 is below the 257 tokens every trimmed byte-level BPE model keeps (special tokens, "
        "the tokens that encode any text, the listed ones)");
    keep.keep = 50258;
    EXPECT_EQ(refused(gpt2_dir(), keep), "trim: keep 50258 is above the vocabulary's 50257 tokens");
    TrimOptions both = with_coverage(0.9);
    both.keep = 1000;
    EXPECT_EQ(refused(gpt2_dir(), both), "trim: keep and coverage are two budgets; give one");
    EXPECT_EQ(refused(gpt2_dir(), TrimOptions{}),
              "trim: a budget is required: keep N (tokens) or coverage C (share of the text's tokens)");

    write_file(out / "blank.txt", " \t \n \n");
    TrimOptions blank = with_coverage(0.9);
    blank.freq_text = out / "blank.txt";
    EXPECT_EQ(refused(bert_dir(), blank),
              (out / "blank.txt").string() + ": freq_text tokenizes to no tokens");

    write_file(out / "list.txt", "Ġthe\nnot-a-token-anywhere\n");
    TrimOptions listed = with_coverage(0.9);
    listed.keep_tokens = out / "list.txt";
    EXPECT_EQ(refused(gpt2_dir(), listed),
              (out / "list.txt").string() +
                  ": line 2: \"not-a-token-anywhere\" is not a token of the vocabulary (write tokens as the "
                  "vocabulary file spells them)");

    // A Unigram tokenizer.json: no family trim rewrites.
    fs::create_directories(out / "unigram");
    for (const char* f : {"config.json", "model.safetensors"})
        fs::copy_file(bert_dir() / f, out / "unigram" / f);
    write_file(out / "unigram/tokenizer.json", R"({"model": {"type": "Unigram", "vocab": []}})");
    EXPECT_EQ(
        refused(out / "unigram", with_coverage(0.9)),
        (out / "unigram/tokenizer.json").string() +
            ": model type \"Unigram\" is not a tokenizer family trim rewrites (byte-level BPE, WordPiece, "
            "SentencePiece BPE)");
}

TEST(Trim, KeepTokensAreKept)
{
    TempDir out;
    write_file(out / "list.txt", "ĠByzantine\nĠelectroly\n");
    const auto ids = read_gpt2_files(gpt2_dir()).ids;
    TrimOptions o = with_coverage(0.5);
    o.keep_tokens = out / "list.txt";
    const auto report = trim(gpt2_dir(), out / "t", o);
    for (const char* token : {"ĠByzantine", "Ġelectroly"})
        EXPECT_TRUE(std::binary_search(report.kept.begin(), report.kept.end(), ids.at(token))) << token;
}

TEST(Trim, ACancelledRunLeavesNothing)
{
    TempDir out;
    int calls = 0;
    EXPECT_THROW(trim_model(
                     gpt2_dir(), out / "t",
                     [] {
                         TrimOptions o = with_coverage(0.9);
                         o.freq_text = corpus().freq;
                         return o;
                     }(),
                     [&](int64_t, int64_t) { return ++calls < 3; }),
                 Cancelled);
    EXPECT_GE(calls, 3);
    EXPECT_TRUE(fs::is_empty(out.path())) << "left behind: " << fs::directory_iterator(out.path())->path();
}

// --- The command line.

TEST(Trim, CliWritesTheDirectoryAndRefusesWithTheEnginesMessage)
{
    TempDir out;
    const Json j = json_of(cli({"trim", gpt2_dir().string(), "--freq-text", corpus().freq.string(), "--keep",
                                "900", "--out", (out / "t").string(), "--json"}));
    EXPECT_LE(j["kept_tokens"].get<int64_t>(), 900);
    EXPECT_EQ(load_tokenizer_from_directory(out / "t")->vocab_size(), j["kept_tokens"].get<int64_t>());
    expect_refused(cli({"trim", gpt2_dir().string(), "--freq-text", corpus().freq.string(), "--coverage", "2",
                        "--out", (out / "u").string()}),
                   "trim: coverage 2 is outside (0, 1]");
    expect_refused(cli({"trim", gpt2_dir().string(), "--freq-text", corpus().freq.string(), "--keep", "900",
                        "--out", (out / "t").string()}),
                   "--force");
    EXPECT_FALSE(fs::exists(out / "u"));
}

// --- transformers.js on the rewritten tokenizer.json (scripts/setup.sh --with-tests
// installs it; the test skips with the reason without it).

TEST(Trim, TransformersJsGivesTheSameIdsOnTheRewrittenTokenizerJson)
{
    const char* env = std::getenv("EMBEDLAB_TJS_MODULES");
    // scripts/setup.sh --with-tests installs it into <build>/test-tools/transformers.
    const fs::path modules = env ? fs::path(env)
                                 : fs::read_symlink("/proc/self/exe").parent_path().parent_path() /
                                       "test-tools/transformers/node_modules";
    if (!fs::exists(modules / "@huggingface/transformers"))
        GTEST_SKIP() << "transformers.js is not installed at " << modules
                     << " (scripts/setup.sh --with-tests installs it, or set "
                        "EMBEDLAB_TJS_MODULES)";
    TempDir out;
    std::vector<std::string> texts(corpus().lines.begin(), corpus().lines.begin() + 40);
    texts.insert(texts.end(), foreign_texts().begin(), foreign_texts().end());
    write_file(out / "texts.json", Json(texts).dump());
    write_file(out / "run.mjs", R"(
import fs from "node:fs"; import path from "node:path"; import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
const [modules, dir, textsFile] = process.argv.slice(2);
const req = createRequire(path.join(modules, "x.js"));
const { env, AutoTokenizer } = await import(pathToFileURL(req.resolve("@huggingface/transformers")).href);
env.allowRemoteModels = false; env.allowLocalModels = true; env.localModelPath = path.dirname(dir) + path.sep;
const tok = await AutoTokenizer.from_pretrained(path.basename(dir));
const texts = JSON.parse(fs.readFileSync(textsFile, "utf8"));
console.log(JSON.stringify(texts.map((t) => tok.encode(t, { add_special_tokens: false }))));
)");
    for (const auto& [name, dir] : {std::pair{"g", gpt2_dir()}, std::pair{"b", bert_dir()}}) {
        trim(dir, out / name, with_coverage(0.99));
        // transformers.js needs a tokenizer_config.json (Hugging Face's Python does not);
        // the fixture has none, so the trimmed directory has none either.
        if (!fs::exists(out / name / "tokenizer_config.json"))
            write_file(out / name / "tokenizer_config.json", "{}");
        const std::string cmd = "node " + quote((out / "run.mjs").string()) + " " + quote(modules.string()) +
                                " " + quote((out / name).string()) + " " +
                                quote((out / "texts.json").string()) + " > " +
                                quote((out / "ids.json").string());
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
        const Json got = Json::parse(read_text(out / "ids.json"));
        const auto ours = load_tokenizer_from_directory(out / name);
        for (size_t i = 0; i < texts.size(); ++i)
            EXPECT_EQ(got[i].get<std::vector<int32_t>>(), ours->encode(texts[i])) << name << ": " << texts[i];
    }
}

} // namespace
