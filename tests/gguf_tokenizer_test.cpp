// Tokenizers read from a GGUF file's tokenizer.ggml.* (tokenizer/gguf_tokenizer.hpp):
// llama.cpp's byte-level BPE ("gpt2") and WordPiece ("bert") give the ids of the
// Hugging Face tokenizer of the same model, and broken or unknown vocabularies are
// refused with the key at fault. llama.cpp's own bert conversion (minilm-st.gguf) is
// checked against transformers.js in wordpiece_test.cpp.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedlab/model_export.hpp"
#include "embedlab/tokenizer.hpp"
#include "embedlab/wordpiece.hpp"
#include "io/gguf_output.hpp"
#include "test_support.hpp"
#include "tokenizer/byte_level_bpe.hpp"
#include "tokenizer/gguf_tokenizer.hpp"

namespace {

using embedlab::GgufVocabulary;
using embedlab::Tokenizer;
using embedlab::test::input_error_of;
using embedlab::test::read_text;
using embedlab::test::shared_dir;
using embedlab::test::TempDir;
using embedlab::tokenizer_impl::load_gguf_tokenizer;
namespace fs = std::filesystem;
namespace io = embedlab::io;

const char* const bundled_texts[] = {"tinystories-heldout", "wikitext2-test-50k", "wikitext2-test"};

std::vector<int32_t> reference_ids(const std::string& model, const std::string& text)
{
    const auto file = shared_dir() / "reference" / ("tokens-" + model + "-" + text + ".json");
    return nlohmann::json::parse(read_text(file)).at("ids").get<std::vector<int32_t>>();
}

// Id lists compared by their first difference, not printed whole.
::testing::AssertionResult same_ids(const std::vector<int32_t>& actual, const std::vector<int32_t>& expected)
{
    for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i)
        if (actual[i] != expected[i])
            return ::testing::AssertionFailure()
                   << "first difference at " << i << ": " << actual[i] << " vs " << expected[i];
    if (actual.size() != expected.size())
        return ::testing::AssertionFailure() << actual.size() << " ids vs " << expected.size();
    return ::testing::AssertionSuccess();
}

// The tokenizer.ggml.* keys EmbedLab's export writes for `v`
// (export/model_export.cpp's add_vocabulary; bert's framing keys as llama.cpp's
// converter writes them).
io::GgufMetadata vocabulary_metadata(const GgufVocabulary& v, const std::string& arch)
{
    io::GgufMetadata m;
    m.set_string("general.architecture", arch);
    m.set_uint32(arch + ".vocab_size", static_cast<uint32_t>(v.tokens.size()));
    m.set_string("tokenizer.ggml.model", v.model);
    if (!v.pre.empty())
        m.set_string("tokenizer.ggml.pre", v.pre);
    m.set_string_array("tokenizer.ggml.tokens", v.tokens);
    if (!v.scores.empty())
        m.set_float32_array("tokenizer.ggml.scores", v.scores);
    m.set_int32_array("tokenizer.ggml.token_type", v.types);
    if (!v.merges.empty())
        m.set_string_array("tokenizer.ggml.merges", v.merges);
    for (const auto& [key, id] : {std::pair{"bos", v.bos_id}, {"eos", v.eos_id}, {"unknown", v.unk_id}})
        if (id >= 0)
            m.set_uint32(std::string("tokenizer.ggml.") + key + "_token_id", static_cast<uint32_t>(id));
    return m;
}

fs::path write_metadata_gguf(const fs::path& path, const io::GgufMetadata& metadata)
{
    io::write_gguf(path, metadata, {}, /*overwrite=*/false);
    return path;
}

// ---- byte-level BPE ---------------------------------------------------------------

class GgufBpeReference : public ::testing::TestWithParam<std::string> {};

// EmbedLab's own GGUF export of each gpt2 model, loaded without --tokenizer: the ids
// of Hugging Face's tokenizer (shared/reference) on every bundled text, the ids and
// special tokens of the model directory's tokenizer, and text back from the ids.
TEST_P(GgufBpeReference, ExportedModelEncodesAsItsHuggingFaceTokenizer)
{
    EMBEDLAB_REQUIRE_SHARED();
    const std::string model = GetParam();
    const fs::path dir = shared_dir() / "models" / model;
    TempDir tmp;
    const fs::path gguf = tmp / (model + ".gguf");
    embedlab::export_gguf(embedlab::load_model(dir), gguf, {});

    const auto loaded = embedlab::load_model(gguf);
    ASSERT_TRUE(loaded.tokenizer);
    const Tokenizer& tok = *loaded.tokenizer;
    const auto hf = embedlab::load_tokenizer_from_directory(dir);
    EXPECT_EQ(tok.kind(), hf->kind());
    EXPECT_EQ(tok.vocab_size(), hf->vocab_size());
    EXPECT_EQ(tok.bos_id(), hf->bos_id());
    EXPECT_EQ(tok.eos_id(), hf->eos_id());
    EXPECT_EQ(tok.unk_id(), hf->unk_id());
    EXPECT_EQ(tok.bos_id(), 50256);
    EXPECT_TRUE(tok.is_special(50256));
    EXPECT_FALSE(tok.is_special(262));
    EXPECT_EQ(tok.token_text(50256), "<|endoftext|>");
    for (const char* name : bundled_texts) {
        const std::string text = read_text(shared_dir() / "data" / (std::string(name) + ".txt"));
        const auto ids = tok.encode(text);
        EXPECT_TRUE(same_ids(ids, reference_ids(model, name))) << name;
        EXPECT_TRUE(same_ids(ids, hf->encode(text))) << name;
        EXPECT_EQ(tok.decode(ids), text) << name;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, GgufBpeReference, ::testing::Values("tinygpt2", "tinygpt2-f16"),
                         embedlab::test::ParamName());

// A copy of tinygpt2's tokenizer whose tokenizer.json splits digits first
// (Digits(individual_digits) then ByteLevel, as SmolLM and StarCoder): EmbedLab writes
// it as llama.cpp's "smollm" and reads it back with the same split.
TEST(GgufBpe, SmollmPreTokenizerSplitsDigitsAsTheHuggingFaceFile)
{
    EMBEDLAB_REQUIRE_SHARED();
    TempDir tmp;
    auto json = nlohmann::json::parse(read_text(shared_dir() / "models/tinygpt2/tokenizer.json"));
    json["pre_tokenizer"] = {{"type", "Sequence"},
                             {"pretokenizers",
                              {{{"type", "Digits"}, {"individual_digits", true}},
                               {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
    fs::create_directory(tmp / "digits");
    embedlab::test::write_file(tmp / "digits/tokenizer.json", json.dump());
    const auto hf = embedlab::load_tokenizer_from_directory(tmp / "digits");
    const auto vocab = hf->gguf_vocabulary();
    ASSERT_TRUE(vocab);
    EXPECT_EQ(vocab->pre, "smollm");

    const auto tok =
        load_gguf_tokenizer(write_metadata_gguf(tmp / "digits.gguf", vocabulary_metadata(*vocab, "gpt2")));
    const std::string text = read_text(shared_dir() / "data/wikitext2-test-50k.txt");
    EXPECT_TRUE(same_ids(tok->encode(text), hf->encode(text)));
    // The split is what differs from gpt-2's: "2024" is one piece there.
    GgufVocabulary gpt2 = *vocab;
    gpt2.pre = "gpt-2";
    const auto plain =
        load_gguf_tokenizer(write_metadata_gguf(tmp / "plain.gguf", vocabulary_metadata(gpt2, "gpt2")));
    EXPECT_EQ(tok->encode(" 2024").size(), 5u);
    EXPECT_LT(plain->encode(" 2024").size(), 5u);
    EXPECT_EQ(plain->encode(text),
              embedlab::load_tokenizer_from_directory(shared_dir() / "models/tinygpt2")->encode(text));
}

// Llama 3's and Qwen2's Split regexes as their tokenizer.json files hold them.
const std::string llama3_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string qwen2_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// tinygpt2's vocabulary and merges behind Llama 3's pre-tokenizer (Split, then
// ByteLevel without its regex, whole words first: ignore_merges) or Qwen2's (NFC first).
fs::path split_variant(const fs::path& dir, bool qwen2)
{
    auto json = nlohmann::json::parse(read_text(shared_dir() / "models/tinygpt2/tokenizer.json"));
    json["normalizer"] = qwen2 ? nlohmann::json{{"type", "NFC"}} : nlohmann::json();
    json["pre_tokenizer"] = {{"type", "Sequence"},
                             {"pretokenizers",
                              {{{"type", "Split"},
                                {"pattern", {{"Regex", qwen2 ? qwen2_regex : llama3_regex}}},
                                {"behavior", "Isolated"},
                                {"invert", false}},
                               {{"type", "ByteLevel"},
                                {"add_prefix_space", false},
                                {"trim_offsets", true},
                                {"use_regex", false}}}}};
    json["model"]["ignore_merges"] = !qwen2;
    fs::create_directories(dir);
    embedlab::test::write_file(dir / "tokenizer.json", json.dump());
    return dir;
}

struct SplitCase {
    std::string text;
    std::vector<int32_t> llama3, qwen2;
};

// transformers.js 4.3.2's ids for split_variant's two tokenizer.json files; llama.cpp
// (shared/tools/llama.cpp's libllama, vocab only) gives the same ids for their GGUF
// forms ("llama-bpe" and "qwen2"), except on the last text for qwen2: llama.cpp does
// not normalise to NFC.
const SplitCase split_cases[] = {
    {"I'M here, YOU'RE there; we'Ll see. They'VE gone, it'S fine, 'd 'D",
     {40, 6,    44, 994,  11,   7013, 6,   2200, 612, 26,   356, 6,   43, 75,  766,
      13, 1119, 6,  6089, 3750, 11,   340, 6,    50,  3734, 11,  705, 67, 705, 35},
     {40, 6,    44, 994,  11,   7013, 6,   2200, 612, 26,   356, 6,   43, 75,  766,
      13, 1119, 6,  6089, 3750, 11,   340, 6,    50,  3734, 11,  705, 67, 705, 35}},
    {"Numbers: 1234567 12 3 2024-11-29 3.14159 ٣٤٥ ½",
     {49601, 25,  220, 10163, 29228, 22,   220, 1065, 220, 18,  220, 19004, 19, 12,  1157, 12,
      1959,  220, 18,  13,    23756, 3270, 220, 149,  96,  149, 97,  149,   98, 220, 23141},
     {49601, 25, 220, 16, 17,  18, 19, 20, 21, 22, 220, 16, 17,  220, 18, 220, 17, 15,  17, 19,  12,   16,
      16,    12, 17,  24, 220, 18, 13, 16, 19, 16, 20,  24, 220, 149, 96, 149, 97, 149, 98, 220, 23141}},
    {"  leading spaces\n\n\n   \n\t\ttabs\r\nwindows\r\n\r\n  trailing   \n",
     {220, 3756, 9029,  628, 198, 220, 220, 220, 198,   197, 197, 8658, 82,
      201, 198,  28457, 201, 198, 201, 198, 220, 25462, 220, 220, 220,  198},
     {220, 3756, 9029,  628, 198, 220, 220, 220, 198,   197, 197, 8658, 82,
      201, 198,  28457, 201, 198, 201, 198, 220, 25462, 220, 220, 220,  198}},
    {"(parenthesised) [brackets] {braces} --dash-- ...!!! ?!\n\n",
     {7,    8000, 956,  1417,  8,   685,  1671,  25180, 60, 1391, 1671,
      2114, 92,   1377, 42460, 438, 2644, 10185, 5633,  0,  628},
     {7,    8000, 956,  1417,  8,   685,  1671,  25180, 60, 1391, 1671,
      2114, 92,   1377, 42460, 438, 2644, 10185, 5633,  0,  628}},
    {"café naïve Ångström 東京 타워 Москва العربية\u00a0nbsp\u3000ideographic\u2003em",
     {66,    1878,  2634,  41492, 6184,  227,  782, 2536,  9101, 76,    10545, 251,   109,   12859, 105,
      220,   169,   225,   222,   168,   249,  234, 12466, 250,  15166, 21727, 31583, 38857, 16142, 28981,
      44690, 26897, 39848, 22654, 45632, 1849, 77,  24145, 5099, 222,   485,   6826,  447,   225,   368},
     {66,    1878,  2634,  41492, 6184,  227,  782, 2536,  9101, 76,    10545, 251,   109,   12859, 105,
      220,   169,   225,   222,   168,   249,  234, 12466, 250,  15166, 21727, 31583, 38857, 16142, 28981,
      44690, 26897, 39848, 22654, 45632, 1849, 77,  24145, 5099, 222,   485,   6826,  447,   225,   368}},
    {"emoji 😀👍🏽 and ZWJ 👨\u200d👩\u200d👧 !!!\n\nend",
     {368, 31370, 30325, 222,   41840, 235, 8582, 237,   121, 290, 1168,  54,  41, 50169,
      101, 447,   235,   41840, 102,   447, 235,  41840, 100, 220, 10185, 628, 437},
     {368, 31370, 30325, 222,   41840, 235, 8582, 237,   121, 290, 1168,  54,  41, 50169,
      101, 447,   235,   41840, 102,   447, 235,  41840, 100, 220, 10185, 628, 437}},
    {"tail with spaces   ", {13199, 351, 9029, 220, 220, 220}, {13199, 351, 9029, 220, 220, 220}},
    {"x\n \n y", {87, 198, 220, 198, 331}, {87, 198, 220, 198, 331}},
    {"Once upon a time, there was a little girl named Lily.",
     {7454, 2402, 257, 640, 11, 612, 373, 257, 1310, 2576, 3706, 20037, 13},
     {7454, 2402, 257, 640, 11, 612, 373, 257, 1310, 2576, 3706, 20037, 13}},
    {"e\u0301cole combining: NFC composes it",
     {68, 136, 223, 1073, 293, 19771, 25, 24004, 552, 4629, 340},
     {2634, 1073, 293, 19771, 25, 24004, 552, 4629, 340}},
};

// GGUF "llama-bpe" and "qwen2" vocabularies encode as their Hugging Face tokenizer.json
// (contractions in any case, digits in threes or ones, line breaks, Unicode spaces,
// NFC), and so do those tokenizer.json files.
TEST(GgufBpe, Llama3AndQwen2PatternsGiveTheIdsOfTransformersJsAndLlamaCpp)
{
    EMBEDLAB_REQUIRE_SHARED();
    TempDir tmp;
    const auto llama3 = embedlab::load_tokenizer_from_directory(split_variant(tmp / "llama3", false));
    const auto qwen2 = embedlab::load_tokenizer_from_directory(split_variant(tmp / "qwen2", true));
    auto vocab = llama3->gguf_vocabulary();
    ASSERT_TRUE(vocab);
    EXPECT_EQ(vocab->pre, "llama-bpe");
    const auto llama3_gguf =
        load_gguf_tokenizer(write_metadata_gguf(tmp / "llama3.gguf", vocabulary_metadata(*vocab, "llama")));
    std::string why;
    EXPECT_FALSE(qwen2->gguf_vocabulary(&why)); // NFC: llama.cpp would not normalise
    EXPECT_NE(why.find("llama.cpp would tokenize differently"), std::string::npos) << why;
    vocab->pre = "qwen2";
    const auto qwen2_gguf =
        load_gguf_tokenizer(write_metadata_gguf(tmp / "qwen2.gguf", vocabulary_metadata(*vocab, "qwen2")));
    for (const SplitCase& c : split_cases) {
        EXPECT_EQ(llama3->encode(c.text), c.llama3) << c.text;
        EXPECT_EQ(llama3_gguf->encode(c.text), c.llama3) << c.text;
        EXPECT_EQ(qwen2->encode(c.text), c.qwen2) << c.text;
        EXPECT_EQ(qwen2_gguf->encode(c.text), c.qwen2) << c.text;
    }
    for (const char* name : bundled_texts) {
        const std::string text = read_text(shared_dir() / "data" / (std::string(name) + ".txt"));
        EXPECT_TRUE(same_ids(llama3_gguf->encode(text), llama3->encode(text))) << name;
        EXPECT_TRUE(same_ids(qwen2_gguf->encode(text), qwen2->encode(text))) << name;
    }
}

// A small byte-level vocabulary: the 256 byte tokens, "Ġt", "he", "Ġthe" and a control
// token, with the keys a test may drop or change.
struct TinyBpe {
    std::string model = "gpt2";
    std::optional<std::string> pre = "gpt-2";
    std::vector<std::string> tokens;
    std::optional<std::vector<std::string>> merges = std::vector<std::string>{"Ġ t", "h e", "Ġt he"};
    std::optional<std::vector<int32_t>> types;
    std::optional<uint32_t> vocab_size;
    std::vector<std::pair<std::string, uint32_t>> ids;

    TinyBpe()
    {
        for (int b = 0; b < 256; ++b) {
            std::string t;
            const int32_t cp = embedlab::tokenizer_impl::byte_to_code_point(static_cast<unsigned char>(b));
            if (cp < 0x80) {
                t.push_back(static_cast<char>(cp));
            } else {
                t.push_back(static_cast<char>(0xC0 | (cp >> 6)));
                t.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
            }
            tokens.push_back(t);
        }
        for (const char* t : {"Ġt", "he", "Ġthe", "<|endoftext|>"})
            tokens.emplace_back(t);
        types = std::vector<int32_t>(tokens.size(), 1);
        types->back() = 3;
    }

    fs::path write(const fs::path& path) const
    {
        io::GgufMetadata m;
        m.set_string("general.architecture", "gpt2");
        if (vocab_size)
            m.set_uint32("gpt2.vocab_size", *vocab_size);
        m.set_string("tokenizer.ggml.model", model);
        if (pre)
            m.set_string("tokenizer.ggml.pre", *pre);
        m.set_string_array("tokenizer.ggml.tokens", tokens);
        if (types)
            m.set_int32_array("tokenizer.ggml.token_type", *types);
        if (merges)
            m.set_string_array("tokenizer.ggml.merges", *merges);
        for (const auto& [key, id] : ids)
            m.set_uint32(key, id);
        return write_metadata_gguf(path, m);
    }
};

TEST(GgufBpe, TinyVocabularyMergesAndSpecialIds)
{
    TempDir tmp;
    TinyBpe bpe;
    const int32_t eot = 259;
    bpe.ids = {{"tokenizer.ggml.bos_token_id", 259u}, {"tokenizer.ggml.eos_token_id", 259u}};
    const auto tok = load_gguf_tokenizer(bpe.write(tmp / "tiny.gguf"));
    EXPECT_EQ(tok->encode(" the them"), (std::vector<int32_t>{258, 258, 'm'}));
    EXPECT_EQ(tok->decode(tok->encode(" the them")), " the them");
    EXPECT_EQ(tok->bos_id(), eot);
    EXPECT_EQ(tok->eos_id(), eot);
    EXPECT_EQ(tok->unk_id(), std::nullopt);
    EXPECT_TRUE(tok->is_special(eot));
    EXPECT_FALSE(tok->is_special(258));

    // The file's ids win over the usual names: unk as the file says, bos elsewhere;
    // none given, <|endoftext|> is bos and eos as for Hugging Face's GPT-2.
    bpe.ids = {{"tokenizer.ggml.bos_token_id", 258u}, {"tokenizer.ggml.unknown_token_id", 259u}};
    const auto named = load_gguf_tokenizer(bpe.write(tmp / "named.gguf"));
    EXPECT_EQ(named->bos_id(), 258);
    EXPECT_EQ(named->eos_id(), eot);
    EXPECT_EQ(named->unk_id(), eot);
    bpe.ids = {{"tokenizer.ggml.bos_token_id", 0xFFFFFFFFu}}; // llama.cpp's "none"
    const auto unnamed = load_gguf_tokenizer(bpe.write(tmp / "unnamed.gguf"));
    EXPECT_EQ(unnamed->bos_id(), eot);
    EXPECT_EQ(unnamed->unk_id(), std::nullopt);
}

TEST(GgufBpe, BrokenOrUnknownVocabulariesAreRefusedNamingTheKey)
{
    TempDir tmp;
    const auto error = [&](const TinyBpe& bpe, const std::string& name) {
        const fs::path file = tmp / name;
        return input_error_of([&] { load_gguf_tokenizer(bpe.write(file)); }, "(no InputError)");
    };
    const std::string reads =
        "gpt-2, phi-2, roberta-bpe, starcoder, refact, smollm, llama-bpe, llama3, llama-v3, qwen2";
    const std::string pass = "; pass --tokenizer DIR, the Hugging Face directory of its tokenizer";

    TinyBpe bpe;
    bpe.pre = "deepseek-llm";
    EXPECT_EQ(error(bpe, "deepseek.gguf"),
              (tmp / "deepseek.gguf").string() +
                  ": tokenizer.ggml.pre is 'deepseek-llm', a pre-tokenizer EmbedLab does "
                  "not implement (it reads " +
                  reads + ")" + pass);
    bpe.pre.reset();
    EXPECT_EQ(error(bpe, "nopre.gguf"),
              (tmp / "nopre.gguf").string() +
                  ": no tokenizer.ggml.pre: which pre-tokenizer this byte-level BPE vocabulary needs is not "
                  "recorded (llama.cpp then falls back on its 'default' one); EmbedLab reads " +
                  reads + pass);

    bpe = TinyBpe();
    bpe.merges.reset();
    EXPECT_EQ(error(bpe, "nomerges.gguf"), (tmp / "nomerges.gguf").string() +
                                               ": tokenizer.ggml.model is 'gpt2' but there is no "
                                               "tokenizer.ggml.merges: a byte-level BPE vocabulary cannot "
                                               "encode without its merges");
    bpe.merges = {"Ġ t", "h e", "Ġt hem"};
    EXPECT_EQ(error(bpe, "unknown.gguf"), (tmp / "unknown.gguf").string() +
                                              ": tokenizer.ggml.merges entry 3 'Ġt hem' names 'hem', which "
                                              "tokenizer.ggml.tokens does not list");
    bpe.merges = {"Ġ t", "t h"}; // both parts listed, "th" not
    EXPECT_EQ(error(bpe, "result.gguf"), (tmp / "result.gguf").string() +
                                             ": tokenizer.ggml.merges entry 2 't h' names 'th', which "
                                             "tokenizer.ggml.tokens does not list");
    bpe.merges = {"Ġt"};
    EXPECT_EQ(error(bpe, "onepart.gguf"),
              (tmp / "onepart.gguf").string() +
                  ": tokenizer.ggml.merges entry 1 'Ġt' is not two tokens separated by one space");

    bpe = TinyBpe();
    bpe.vocab_size = 50257;
    EXPECT_EQ(error(bpe, "count.gguf"), (tmp / "count.gguf").string() +
                                            ": tokenizer.ggml.tokens lists 260 tokens but gpt2.vocab_size is "
                                            "50257");
    bpe.vocab_size = 260;
    EXPECT_EQ(error(bpe, "count-ok.gguf"), "(no InputError)");
    bpe.types->pop_back();
    EXPECT_EQ(error(bpe, "types.gguf"), (tmp / "types.gguf").string() +
                                            ": tokenizer.ggml.token_type has 259 entries but "
                                            "tokenizer.ggml.tokens has 260");

    bpe = TinyBpe();
    bpe.model = "t5";
    EXPECT_EQ(error(bpe, "t5.gguf"),
              (tmp / "t5.gguf").string() +
                  ": tokenizer.ggml.model is 't5', a vocabulary EmbedLab does not read from GGUF (it reads "
                  "llama's SentencePiece, gpt2's byte-level BPE and bert's WordPiece)" +
                  pass);
    bpe.model = "llama";
    EXPECT_EQ(error(bpe, "noscores.gguf"),
              (tmp / "noscores.gguf").string() +
                  ": tokenizer.ggml.model is 'llama' but there is no tokenizer.ggml.scores: SentencePiece "
                  "pieces cannot be merged without their scores");

    io::GgufMetadata empty;
    empty.set_string("general.architecture", "gpt2");
    const fs::path none = write_metadata_gguf(tmp / "none.gguf", empty);
    EXPECT_EQ(input_error_of([&] { load_gguf_tokenizer(none); }, "(no InputError)"),
              none.string() +
                  ": the GGUF file has no embedded tokenizer vocabulary (no tokenizer.ggml.tokens)" + pass);
}

// ---- SentencePiece ------------------------------------------------------------------

// The loader reads llama's scored pieces too, as io/gguf.cpp does with the model.
TEST(GgufSentencePiece, ReadsTheVocabularyTheModelLoaderReads)
{
    const fs::path gguf = fs::path(EMBEDLAB_SOURCE_DIR) / "resources/models/stories260K.gguf";
    const auto tok = load_gguf_tokenizer(gguf);
    const auto loaded = embedlab::load_model(gguf);
    EXPECT_EQ(tok->kind(), "gguf-llama");
    EXPECT_EQ(tok->vocab_size(), loaded.tokenizer->vocab_size());
    EXPECT_EQ(tok->bos_id(), loaded.tokenizer->bos_id());
    EXPECT_EQ(tok->unk_id(), loaded.tokenizer->unk_id());
    const std::string text =
        read_text(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt");
    const auto ids = tok->encode(text);
    EXPECT_GT(ids.size(), 1000u);
    EXPECT_TRUE(same_ids(ids, loaded.tokenizer->encode(text)));
}

// ---- WordPiece ----------------------------------------------------------------------

fs::path encoders_dir()
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders";
}

// Every GLUE dev text the WordPiece fixtures were checked on, and the tricky strings.
std::vector<std::string> wordpiece_texts()
{
    const auto expected = nlohmann::json::parse(read_text(encoders_dir() / "wordpiece_expected.json"));
    std::vector<std::string> texts;
    for (const auto& t : expected.at("variants").at("uncased").at("tricky"))
        texts.push_back(t.at("text").get<std::string>());
    const fs::path glue = shared_dir() / "data" / "glue";
    for (const char* file : {"SST-2/dev.tsv", "STS-B/dev.tsv"}) {
        const std::string tsv = read_text(glue / file);
        for (size_t pos = tsv.find('\n') + 1; pos > 0 && pos < tsv.size();) {
            const size_t end = std::min(tsv.find('\n', pos), tsv.size());
            texts.push_back(tsv.substr(pos, end - pos)); // whole rows: every column's text
            pos = end + 1;
        }
    }
    return texts;
}

// EmbedLab's GGUF form of the uncased fixture tokenizer (its export's keys for bert)
// reads back as that tokenizer: ids, framing ids, vocabulary size.
TEST(GgufWordPiece, ExportedVocabularyEncodesAsItsHuggingFaceTokenizer)
{
    EMBEDLAB_REQUIRE_SHARED();
    TempDir tmp;
    const auto hf = embedlab::load_tokenizer_from_directory(encoders_dir() / "tokenizers/uncased");
    const auto vocab = hf->gguf_vocabulary();
    ASSERT_TRUE(vocab);
    io::GgufMetadata m = vocabulary_metadata(*vocab, "bert");
    m.set_uint32("tokenizer.ggml.seperator_token_id", static_cast<uint32_t>(*hf->sep_id()));
    m.set_uint32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*hf->pad_id()));
    m.set_uint32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(*hf->mask_id()));
    const auto tok = load_gguf_tokenizer(write_metadata_gguf(tmp / "uncased.gguf", m));
    EXPECT_EQ(tok->kind(), hf->kind());
    EXPECT_EQ(tok->vocab_size(), hf->vocab_size());
    for (const auto& [name, ours, theirs] : {std::tuple{"unk", tok->unk_id(), hf->unk_id()},
                                             {"cls", tok->cls_id(), hf->cls_id()},
                                             {"sep", tok->sep_id(), hf->sep_id()},
                                             {"pad", tok->pad_id(), hf->pad_id()},
                                             {"mask", tok->mask_id(), hf->mask_id()}})
        EXPECT_EQ(ours, theirs) << name;
    const auto texts = wordpiece_texts();
    ASSERT_GE(texts.size(), 872u + 1500u + 20u); // SST-2 and STS-B dev rows, the tricky strings
    size_t exact = 0;
    for (const std::string& text : texts)
        exact += tok->encode(text) == hf->encode(text);
    EXPECT_EQ(exact, texts.size());
}

// The framing tokens are the ones the file names by id, not the usual names.
TEST(GgufWordPiece, FramingIdsComeFromTheFile)
{
    TempDir tmp;
    const auto hf = embedlab::load_tokenizer_from_directory(encoders_dir() / "tokenizers/uncased");
    const auto vocab = hf->gguf_vocabulary();
    ASSERT_TRUE(vocab);
    io::GgufMetadata m = vocabulary_metadata(*vocab, "bert");
    m.set_uint32("tokenizer.ggml.mask_token_id", 0); // [PAD] as the mask
    m.set_uint32("tokenizer.ggml.cls_token_id", 13); // [SEP] as [CLS], over bos
    const auto tok = load_gguf_tokenizer(write_metadata_gguf(tmp / "ids.gguf", m));
    EXPECT_EQ(tok->mask_id(), 0);
    EXPECT_EQ(tok->cls_id(), 13);
    EXPECT_EQ(tok->sep_id(), hf->sep_id()); // eos, no seperator_token_id
    EXPECT_EQ(tok->pad_id(), hf->pad_id()); // [PAD] by name
}

} // namespace
