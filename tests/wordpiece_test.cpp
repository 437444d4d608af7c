// WordPiece tokenizer tests: hand-checked encodings of a small vocabulary (each
// BertNormalizer / BertPreTokenizer / WordPiece rule), loader errors naming the
// file, the llama.cpp GGUF vocabulary round trip, and id-exact parity with
// transformers.js on GLUE dev texts (tests/data/encoders/wordpiece_expected.json).
#include <chrono>
#include <functional>
#include <iostream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/wordpiece.hpp"
#include "io/gguf_parser.hpp"
#include "test_support.hpp"
#include "tokenizer/gguf_tokenizer.hpp"

namespace {

using embedlab::InputError;
using embedlab::Tokenizer;
using embedlab::WordPieceOptions;
using embedlab::test::write_file;
namespace fs = std::filesystem;

void expect_input_error_naming(const std::function<void()>& call, const std::vector<std::string>& needles)
{
    try {
        call();
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        for (const auto& needle : needles)
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

const std::vector<std::string> small_vocab = {
    "[PAD]", "[UNK]", "[CLS]",  "[SEP]",    "[MASK]", "hello", "world", ",",    "!",  ".",   "un",
    "una",   "##aff", "##able", "##ffable", "cafe",   "café",  "Café",  "Cafe", "中", "文",  "a",
    "##a",   "[",     "]",      "mask",     "«",      "»",     "x",     "—",    "i",  "hel", "##lo",
    "Hello", "σ",     "ς",      "σας",      "'",      "s",     "don",   "t",    "do", "not"};

int32_t id_of(const std::string& token)
{
    const auto it = std::find(small_vocab.begin(), small_vocab.end(), token);
    EXPECT_NE(it, small_vocab.end()) << token;
    return static_cast<int32_t>(it - small_vocab.begin());
}

std::vector<std::string> pieces(const Tokenizer& tok, std::string_view text)
{
    std::vector<std::string> out;
    for (int32_t id : tok.encode(text))
        out.push_back(tok.token_text(id));
    return out;
}

using Pieces = std::vector<std::string>;

std::unique_ptr<Tokenizer> small(WordPieceOptions options = {})
{
    return embedlab::make_wordpiece_tokenizer(small_vocab, std::move(options), "small-vocab");
}

TEST(WordPiece, SpecialIdsAndKind)
{
    const auto tok = small();
    EXPECT_EQ(tok->kind(), "wordpiece");
    EXPECT_EQ(tok->unk_id(), 1);
    EXPECT_EQ(tok->cls_id(), 2);
    EXPECT_EQ(tok->sep_id(), 3);
    EXPECT_EQ(tok->mask_id(), 4);
    EXPECT_EQ(tok->pad_id(), 0);
    EXPECT_EQ(tok->bos_id(), std::nullopt);
    EXPECT_EQ(tok->eos_id(), std::nullopt);
    for (int32_t id = 0; id < 5; ++id)
        EXPECT_TRUE(tok->is_special(id)) << id;
    EXPECT_FALSE(tok->is_special(5));
    EXPECT_EQ(tok->vocab_size(), static_cast<int64_t>(small_vocab.size()));
    EXPECT_EQ(tok->token_text(id_of("##aff")), "##aff");
}

TEST(WordPiece, PunctuationWhitespaceAndLowercase)
{
    const auto tok = small();
    EXPECT_EQ(pieces(*tok, "Hello, World!"), (Pieces{"hello", ",", "world", "!"}));
    EXPECT_EQ(pieces(*tok, "  hello\t\nworld.  "), (Pieces{"hello", "world", "."}));
    // Unicode punctuation (Pi, Pf, Pd) is split off one character at a time.
    EXPECT_EQ(pieces(*tok, "«x»—x"), (Pieces{"«", "x", "»", "—", "x"}));
    EXPECT_EQ(pieces(*tok, "a..a"), (Pieces{"a", ".", ".", "a"}));
    EXPECT_TRUE(tok->encode("").empty());
    EXPECT_TRUE(tok->encode(" \t\n ").empty());
    // U+00A0 and U+3000 are whitespace.
    EXPECT_EQ(pieces(*tok, "hello\xC2\xA0world\xE3\x80\x80x"), (Pieces{"hello", "world", "x"}));
    // U+0130 lowercases to i + U+0307, whose mark strip_accents drops.
    EXPECT_EQ(pieces(*tok, "\xC4\xB0"), (Pieces{"i"}));
    // Per character lowercasing: a word-final capital sigma becomes σ, as the Rust crate.
    EXPECT_EQ(pieces(*tok, "\xCE\xA3"), (Pieces{"σ"}));
}

TEST(WordPiece, AccentsAreStrippedOnlyWhenLowercasingOrAsked)
{
    EXPECT_EQ(pieces(*small(), "Café"), (Pieces{"cafe"}));
    WordPieceOptions cased;
    cased.lowercase = false;
    EXPECT_EQ(pieces(*small(cased), "Café"), (Pieces{"Café"}));
    cased.strip_accents = true;
    EXPECT_EQ(pieces(*small(cased), "Café"), (Pieces{"Cafe"}));
    WordPieceOptions lower_keep;
    lower_keep.strip_accents = false;
    EXPECT_EQ(pieces(*small(lower_keep), "CAFÉ"), (Pieces{"café"}));
    // Decomposed input (e + U+0301) strips the same way.
    EXPECT_EQ(pieces(*small(), "Cafe\xCC\x81"), (Pieces{"cafe"}));
}

TEST(WordPiece, ChineseCharactersAreSplit)
{
    EXPECT_EQ(pieces(*small(), "中文"), (Pieces{"中", "文"}));
    EXPECT_EQ(pieces(*small(), "hello中world"), (Pieces{"hello", "中", "world"}));
    WordPieceOptions no_cjk;
    no_cjk.handle_chinese_chars = false;
    EXPECT_EQ(pieces(*small(no_cjk), "中文"), (Pieces{"[UNK]"}));
}

TEST(WordPiece, GreedyLongestMatchWithContinuations)
{
    const auto tok = small();
    // "una" is longer than "un", so "una" + "##ffable" wins over "un" + "##aff" + "##able".
    EXPECT_EQ(pieces(*tok, "unaffable"), (Pieces{"una", "##ffable"}));
    EXPECT_EQ(pieces(*tok, "hello"), (Pieces{"hello"}));
    EXPECT_EQ(pieces(*tok, "hello helo"), (Pieces{"hello", "[UNK]"}));
    EXPECT_EQ(pieces(*tok, "aaa"), (Pieces{"a", "##a", "##a"}));
    // A piece that fails after a match makes the whole word one [UNK].
    EXPECT_EQ(pieces(*tok, "hellox"), (Pieces{"[UNK]"}));
    EXPECT_EQ(pieces(*tok, "x hello☃ x"), (Pieces{"x", "[UNK]", "x"}));
}

TEST(WordPiece, LongWordsAreOneUnknown)
{
    const auto tok = small();
    EXPECT_EQ(tok->encode(std::string(100, 'a')).size(), 100u);
    EXPECT_EQ(pieces(*tok, std::string(101, 'a')), (Pieces{"[UNK]"}));
    // Characters, not bytes, count: 100 two-byte letters still fit.
    std::string sigmas;
    for (int i = 0; i < 100; ++i)
        sigmas += "σ";
    EXPECT_EQ(tok->encode(sigmas), std::vector<int32_t>{id_of("[UNK]")}); // no "##σ" piece
    WordPieceOptions five;
    five.max_input_chars_per_word = 5;
    EXPECT_EQ(pieces(*small(five), "unaffable hello"), (Pieces{"[UNK]", "hello"}));
}

TEST(WordPiece, ControlCharactersAreDropped)
{
    const auto tok = small();
    EXPECT_EQ(pieces(*tok, "hel\x01lo"), (Pieces{"hello"}));
    EXPECT_EQ(pieces(*tok, "hel\xE2\x80\x8Blo"), (Pieces{"hello"})); // U+200B (Cf)
    EXPECT_EQ(pieces(*tok, std::string("hel\0lo", 6)), (Pieces{"hello"}));
    EXPECT_EQ(pieces(*tok, "hel\xEF\xBF\xBDlo"), (Pieces{"hello"})); // U+FFFD
    EXPECT_EQ(pieces(*tok, "hel\xFFlo"), (Pieces{"hello"}));         // ill-formed byte, as U+FFFD
    WordPieceOptions raw;
    raw.clean_text = false;
    EXPECT_EQ(pieces(*small(raw), "hel\x01lo"), (Pieces{"[UNK]"}));
}

TEST(WordPiece, SpecialTokensInTextAreMatchedWhole)
{
    const auto tok = small();
    EXPECT_EQ(tok->encode("[MASK]"), std::vector<int32_t>{4});
    EXPECT_EQ(pieces(*tok, "hello [MASK]world[SEP]"), (Pieces{"hello", "[MASK]", "world", "[SEP]"}));
    // Matched before lowercasing, so only the exact spelling is special.
    EXPECT_EQ(pieces(*tok, "[mask]"), (Pieces{"[", "mask", "]"}));
    EXPECT_EQ(pieces(*tok, "[Mask]"), (Pieces{"[", "mask", "]"}));
}

TEST(WordPiece, AddedTokenStripFlags)
{
    WordPieceOptions options;
    options.added_tokens = {{"[MASK]", 4, true, true, true}, {"[UNK]", 1, true}};
    const auto tok = small(options);
    EXPECT_EQ(pieces(*tok, "hello  [MASK]  world"), (Pieces{"hello", "[MASK]", "world"}));
    EXPECT_TRUE(tok->is_special(4));
    EXPECT_FALSE(tok->is_special(2)); // [CLS] is not among the given added tokens
    EXPECT_EQ(tok->cls_id(), 2);      // but still named
}

TEST(WordPiece, DecodeGluesContinuationsAndCleansUp)
{
    const auto tok = small();
    // "affable" is "a" + "##ffable"; " ," and " !" are cleaned up.
    EXPECT_EQ(tok->decode(tok->encode("un affable hello , world !")), "un affable hello, world!");
    const std::vector<int32_t> ids = {id_of("una"), id_of("##ffable"), id_of("do"), id_of("not"), id_of(".")};
    // Cleanup runs on each piece alone (as the Rust decoder), so " do not" never meets.
    EXPECT_EQ(tok->decode(ids), "unaffable do not.");
    EXPECT_EQ(tok->decode(std::vector<int32_t>{}), "");
    EXPECT_THROW(tok->decode(std::vector<int32_t>{999}), InputError);
}

TEST(WordPiece, OneMegabyteEncodesQuickly)
{
    const auto tok = small();
    std::string text;
    while (text.size() < (1u << 20))
        text += "Hello, world! Unaffable café 中文 aaaa hellox [MASK] ";
    const auto start = std::chrono::steady_clock::now();
    const auto ids = tok->encode(text);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GT(ids.size(), 200'000u);
    EXPECT_LT(seconds, 3.0);
    RecordProperty("seconds", std::to_string(seconds));
}

// --- loaders ---------------------------------------------------------------------

std::string vocab_lines(const std::vector<std::string>& vocab, const char* newline = "\n")
{
    std::string out;
    for (const auto& t : vocab)
        out += t + newline;
    return out;
}

nlohmann::json small_tokenizer_json()
{
    nlohmann::json vocab = nlohmann::json::object();
    for (size_t i = 0; i < small_vocab.size(); ++i)
        vocab[small_vocab[i]] = i;
    nlohmann::json added = nlohmann::json::array();
    for (int i = 0; i < 5; ++i)
        added.push_back({{"id", i},
                         {"content", small_vocab[static_cast<size_t>(i)]},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer",
             {{"type", "BertNormalizer"},
              {"clean_text", true},
              {"handle_chinese_chars", true},
              {"strip_accents", nullptr},
              {"lowercase", true}}},
            {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
            {"post_processor",
             {{"type", "TemplateProcessing"},
              {"single",
               {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
              {"special_tokens",
               {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
                {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
            {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
            {"model",
             {{"type", "WordPiece"},
              {"unk_token", "[UNK]"},
              {"continuing_subword_prefix", "##"},
              {"max_input_chars_per_word", 100},
              {"vocab", vocab}}}};
}

TEST(WordPieceLoaders, VocabTxtAndConfig)
{
    embedlab::test::TempDir dir;
    write_file(dir / "vocab.txt", vocab_lines(small_vocab));
    const auto tok = embedlab::load_wordpiece_vocab(dir / "vocab.txt");
    EXPECT_EQ(pieces(*tok, "Café unaffable [MASK]"), (Pieces{"cafe", "una", "##ffable", "[MASK]"}));
    EXPECT_EQ(tok->vocab_size(), static_cast<int64_t>(small_vocab.size()));
    // CRLF lines give the same vocabulary.
    write_file(dir / "vocab.txt", vocab_lines(small_vocab, "\r\n"));
    EXPECT_EQ(embedlab::load_wordpiece_vocab(dir / "vocab.txt")->encode("Café unaffable"),
              tok->encode("Café unaffable"));
    // A cased config.
    write_file(dir / "tokenizer_config.json",
               R"({"do_lower_case": false, "mask_token": {"content": "[MASK]", "__type": "AddedToken"}})");
    const auto cased = embedlab::load_wordpiece_vocab(dir / "vocab.txt");
    EXPECT_EQ(pieces(*cased, "Café Hello"), (Pieces{"Café", "Hello"}));
    EXPECT_EQ(cased->mask_id(), 4);
    // The directory loader picks vocab.txt.
    EXPECT_EQ(embedlab::load_tokenizer_from_directory(dir.path())->kind(), "wordpiece");
}

TEST(WordPieceLoaders, TokenizerJson)
{
    embedlab::test::TempDir dir;
    write_file(dir / "tokenizer.json", small_tokenizer_json().dump());
    const auto tok = embedlab::load_tokenizer_from_directory(dir.path());
    EXPECT_EQ(tok->kind(), "wordpiece");
    EXPECT_EQ(pieces(*tok, "Café, unaffable [MASK]"), (Pieces{"cafe", ",", "una", "##ffable", "[MASK]"}));
    EXPECT_EQ(tok->cls_id(), 2);
    EXPECT_EQ(tok->sep_id(), 3);
    EXPECT_EQ(tok->mask_id(), 4);
    // A sequence of plain normalizers and WhitespaceSplit.
    auto json = small_tokenizer_json();
    json["normalizer"] = {
        {"type", "Sequence"},
        {"normalizers", {{{"type", "NFD"}}, {{"type", "Lowercase"}}, {{"type", "StripAccents"}}}}};
    json["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
    const auto seq = embedlab::load_wordpiece_tokenizer_json(json, dir / "tokenizer.json");
    EXPECT_EQ(pieces(*seq, "CAFÉ hello,"), (Pieces{"cafe", "[UNK]"}));
}

TEST(WordPieceLoaders, ErrorsNameTheFile)
{
    embedlab::test::TempDir dir;
    const fs::path vocab = dir / "vocab.txt";
    expect_input_error_naming([&] { embedlab::load_wordpiece_vocab(vocab); }, {vocab.string()});
    write_file(vocab, "");
    expect_input_error_naming([&] { embedlab::load_wordpiece_vocab(vocab); }, {vocab.string(), "empty"});
    write_file(vocab, "hello\nworld\n");
    expect_input_error_naming([&] { embedlab::load_wordpiece_vocab(vocab); }, {vocab.string(), "\"[UNK]\""});
    write_file(vocab, "[UNK]\nhel\xFFlo\n");
    expect_input_error_naming([&] { embedlab::load_wordpiece_vocab(vocab); }, {vocab.string(), "line 2"});
    write_file(vocab, "[UNK]\nhello\n");
    write_file(dir / "tokenizer_config.json", "{\"do_lower_case\": ");
    expect_input_error_naming([&] { embedlab::load_wordpiece_vocab(vocab); },
                              {(dir / "tokenizer_config.json").string(), "not valid JSON"});
    fs::remove(dir / "tokenizer_config.json");

    const fs::path file = dir / "tokenizer.json";
    auto json = small_tokenizer_json();
    json["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
    expect_input_error_naming([&] { embedlab::load_wordpiece_tokenizer_json(json, file); },
                              {file.string(), "normalizer type \"Precompiled\" is not supported"});
    json = small_tokenizer_json();
    json["pre_tokenizer"] = {{"type", "Metaspace"}};
    expect_input_error_naming([&] { embedlab::load_wordpiece_tokenizer_json(json, file); },
                              {file.string(), "pre-tokenizer type \"Metaspace\" is not supported"});
    json = small_tokenizer_json();
    json["model"]["vocab"]["hello2"] = 5;
    expect_input_error_naming([&] { embedlab::load_wordpiece_tokenizer_json(json, file); },
                              {file.string(), "share id 5"});
    json = small_tokenizer_json();
    json["model"]["vocab"] = nlohmann::json::object();
    expect_input_error_naming([&] { embedlab::load_wordpiece_tokenizer_json(json, file); },
                              {file.string(), "empty"});
    json = small_tokenizer_json();
    json["model"]["unk_token"] = "<unk>";
    expect_input_error_naming([&] { embedlab::load_wordpiece_tokenizer_json(json, file); },
                              {file.string(), "\"<unk>\""});
    json = small_tokenizer_json();
    json["model"]["vocab"]["huge"] = 2'000'000'000;
    expect_input_error_naming([&] { embedlab::load_wordpiece_tokenizer_json(json, file); },
                              {file.string(), "invalid id 2000000000"});
    // The directory loader refuses a broken WordPiece tokenizer.json rather than
    // falling back to vocab.txt beside it.
    json = small_tokenizer_json();
    json["normalizer"] = {{"type", "Replace"}};
    write_file(file, json.dump());
    expect_input_error_naming([&] { embedlab::load_tokenizer_from_directory(dir.path()); },
                              {file.string(), "\"Replace\""});
    expect_input_error_naming([&] { embedlab::make_wordpiece_tokenizer({}, {}, "my-source"); },
                              {"my-source", "empty"});
}

TEST(WordPieceLoaders, DirectoryWithoutTokenizerListsVocabTxt)
{
    embedlab::test::TempDir dir;
    write_file(dir / "config.json", "{}");
    expect_input_error_naming([&] { embedlab::load_tokenizer_from_directory(dir.path()); },
                              {dir.path().string(), "vocab.txt"});
}

// --- GGUF ------------------------------------------------------------------------

// llama.cpp's conversion (convert_hf_to_gguf.py, BertModel.set_vocab's phantom()).
std::vector<std::string> to_gguf(const std::vector<std::string>& vocab, std::vector<int32_t>& types)
{
    std::vector<std::string> out;
    types.clear();
    for (size_t i = 0; i < vocab.size(); ++i) {
        const std::string& t = vocab[i];
        const bool control = i < 5;
        types.push_back(control ? 3 : 1);
        out.push_back(control ? t : t.starts_with("##") ? t.substr(2) : "\xE2\x96\x81" + t);
    }
    return out;
}

TEST(WordPieceGguf, PhantomSpaceVocabularyRoundTrips)
{
    std::vector<int32_t> types;
    const auto gguf = to_gguf(small_vocab, types);
    EXPECT_EQ(gguf[id_of("hello")], "\xE2\x96\x81hello");
    EXPECT_EQ(gguf[id_of("##aff")], "aff");
    EXPECT_EQ(gguf[id_of("[CLS]")], "[CLS]");
    EXPECT_EQ(embedlab::wordpiece_vocab_from_gguf_tokens(gguf, types), small_vocab);
    // Without token types, "[...]" tokens without U+2581 are taken as control tokens;
    // "▁[" (a word-initial "[") and "]" ("##]") are not.
    std::vector<std::string> odd = {"[UNK]", "\xE2\x96\x81[", "]", "\xE2\x96\x81[unused0]"};
    EXPECT_EQ(embedlab::wordpiece_vocab_from_gguf_tokens(odd),
              (std::vector<std::string>{"[UNK]", "[", "##]", "[unused0]"}));
    EXPECT_EQ(embedlab::wordpiece_vocab_from_gguf_tokens(gguf), small_vocab);
    const auto tok = embedlab::make_wordpiece_tokenizer(
        embedlab::wordpiece_vocab_from_gguf_tokens(gguf, types), {}, "model.gguf");
    EXPECT_EQ(pieces(*tok, "unaffable"), (Pieces{"una", "##ffable"}));
}

// --- parity with transformers.js -------------------------------------------------

fs::path wordpiece_encoders_dir()
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders";
}

std::string joined(const Tokenizer& tok, const std::vector<int32_t>& ids)
{
    std::string out;
    for (int32_t id : ids)
        out += (out.empty() ? "" : " ") + (id >= 0 && id < tok.vocab_size() ? tok.token_text(id) : "?");
    return out;
}

// Both loaders of one fixture variant: tokenizer.json (through the directory
// loader) and vocab.txt + tokenizer_config.json; for uncased, also llama.cpp's GGUF.
std::vector<std::pair<std::string, std::unique_ptr<Tokenizer>>> variant_tokenizers(const std::string& variant)
{
    const fs::path dir = wordpiece_encoders_dir() / "tokenizers" / variant;
    std::vector<std::pair<std::string, std::unique_ptr<Tokenizer>>> out;
    out.emplace_back(variant + " tokenizer.json", embedlab::load_tokenizer_from_directory(dir));
    out.emplace_back(variant + " vocab.txt", embedlab::load_wordpiece_vocab(dir / "vocab.txt"));
    if (variant == "uncased") // minilm-st's vocabulary, as llama.cpp's converter wrote it to GGUF
        out.emplace_back("uncased minilm-st.gguf", embedlab::tokenizer_impl::load_gguf_tokenizer(
                                                       wordpiece_encoders_dir() / "minilm-st.gguf"));
    return out;
}

// Compares every (text, ids) case; reports the first few mismatches with their text.
void expect_same_ids(const Tokenizer& tok, const std::string& label,
                     const std::vector<std::pair<std::string, std::vector<int32_t>>>& cases, size_t& exact)
{
    int reported = 0;
    exact = 0;
    for (const auto& [text, expected] : cases) {
        const auto ids = tok.encode(text);
        if (ids == expected) {
            ++exact;
            continue;
        }
        if (reported++ < 5)
            ADD_FAILURE() << label << ": \"" << text << "\"\n  got      " << joined(tok, ids)
                          << "\n  expected " << joined(tok, expected);
    }
    EXPECT_EQ(exact, cases.size()) << label << ": " << cases.size() - exact << " texts differ";
}

nlohmann::json expected_json()
{
    return nlohmann::json::parse(
        embedlab::test::read_text(wordpiece_encoders_dir() / "wordpiece_expected.json"));
}

TEST(WordPiece, IdExactOnTrickyStrings)
{
    const auto expected = expected_json();
    for (const std::string variant : {"uncased", "cased"}) {
        const auto& v = expected.at("variants").at(variant);
        std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
        for (const auto& t : v.at("tricky"))
            cases.emplace_back(t.at("text").get<std::string>(), t.at("ids").get<std::vector<int32_t>>());
        ASSERT_GE(cases.size(), 20u);
        for (const auto& [label, tok] : variant_tokenizers(variant)) {
            size_t exact = 0;
            expect_same_ids(*tok, label, cases, exact);
            EXPECT_EQ(tok->unk_id(), v.at("unk_id").get<int32_t>()) << label;
            EXPECT_EQ(tok->cls_id(), v.at("cls_id").get<int32_t>()) << label;
            EXPECT_EQ(tok->sep_id(), v.at("sep_id").get<int32_t>()) << label;
            EXPECT_EQ(tok->mask_id(), v.at("mask_id").get<int32_t>()) << label;
            EXPECT_EQ(tok->pad_id(), v.at("pad_id").get<int32_t>()) << label;
            EXPECT_EQ(tok->vocab_size(), v.at("vocab_size").get<int64_t>()) << label;
            // The pair: [CLS] a [SEP] b [SEP], built from encode() and the framing ids.
            const auto& pair = v.at("pair");
            std::vector<int32_t> ids{*tok->cls_id()};
            for (const char* key : {"text", "text_pair"}) {
                const auto part = tok->encode(pair.at(key).get<std::string>());
                ids.insert(ids.end(), part.begin(), part.end());
                ids.push_back(*tok->sep_id());
            }
            EXPECT_EQ(ids, pair.at("input_ids").get<std::vector<int32_t>>()) << label;
        }
    }
}

TEST(WordPiece, IdExactOnGlueDevTexts)
{
    const fs::path glue = embedlab::test::shared_dir() / "data" / "glue";
    if (!fs::exists(glue / "SST-2" / "dev.tsv") || !fs::exists(glue / "STS-B" / "dev.tsv"))
        GTEST_SKIP() << "needs the GLUE dev sets in ../shared/data/glue (not found at " << glue << ")";
    const auto expected = expected_json();
    for (const std::string variant : {"uncased", "cased"}) {
        std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
        for (const auto& [key, g] : expected.at("variants").at(variant).at("glue").items()) {
            // As tokenize_reference.mjs reads it: lines after the header, empty ones
            // dropped, one tab-separated column.
            const std::string tsv = embedlab::test::read_text(glue / g.at("file").get<std::string>());
            std::vector<std::string> texts;
            size_t pos = tsv.find('\n');
            ASSERT_NE(pos, std::string::npos) << key;
            for (++pos; pos < tsv.size();) {
                size_t end = tsv.find('\n', pos);
                if (end == std::string::npos)
                    end = tsv.size();
                const std::string row = tsv.substr(pos, end - pos);
                pos = end + 1;
                if (row.empty())
                    continue;
                size_t start = 0;
                for (int c = 0; c < g.at("col_index").get<int>(); ++c)
                    start = row.find('\t', start) + 1;
                texts.push_back(row.substr(start, row.find('\t', start) - start));
            }
            const auto ids = g.at("ids").get<std::vector<std::vector<int32_t>>>();
            ASSERT_EQ(texts.size(), ids.size()) << key;
            for (size_t i = 0; i < texts.size(); ++i)
                cases.emplace_back(texts[i], ids[i]);
        }
        ASSERT_EQ(cases.size(), 872u + 1500u + 1500u);
        for (const auto& [label, tok] : variant_tokenizers(variant)) {
            size_t exact = 0;
            expect_same_ids(*tok, label, cases, exact);
            RecordProperty(label, std::to_string(exact) + "/" + std::to_string(cases.size()));
            std::cout << label << ": " << exact << " of " << cases.size() << " texts id-exact\n";
        }
    }
}

} // namespace

namespace {

// The GGUF files llama.cpp's converter wrote for the fixtures: their vocabulary
// converts back to vocab.txt, with and without the token types.
TEST(WordPieceGguf, LlamaCppConvertedVocabularyGivesVocabTxtBack)
{
    for (const char* name : {"minilm-st"}) { // the one GGUF committed (README there)
        const fs::path gguf_file = wordpiece_encoders_dir() / (std::string(name) + ".gguf");
        const auto mapped = embedlab::io::MappedFile::open(gguf_file);
        const auto gguf = embedlab::io::parse_gguf(*mapped);
        const auto* tokens = gguf.find("tokenizer.ggml.tokens");
        const auto* types = gguf.find("tokenizer.ggml.token_type");
        ASSERT_TRUE(tokens && types) << name;
        EXPECT_EQ(gguf.find("tokenizer.ggml.model")->s, "bert") << name;
        std::vector<int32_t> type_ids;
        for (uint64_t k = 0; k < types->count; ++k)
            type_ids.push_back(static_cast<int32_t>(types->element(k).i));

        const auto vocab = embedlab::test::read_text(wordpiece_encoders_dir() / name / "vocab.txt");
        std::vector<std::string> lines;
        for (size_t pos = 0; pos < vocab.size();) {
            const size_t end = vocab.find('\n', pos);
            lines.push_back(vocab.substr(pos, end - pos));
            pos = end == std::string::npos ? vocab.size() : end + 1;
        }
        EXPECT_EQ(embedlab::wordpiece_vocab_from_gguf_tokens(tokens->strings, type_ids), lines) << name;
        EXPECT_EQ(embedlab::wordpiece_vocab_from_gguf_tokens(tokens->strings), lines) << name;
    }
}

} // namespace
