// Trimmed models checked by llama.cpp, a tool EmbedLab did not write (issue 60): a
// trimmed tinyllama (SentencePiece) and tinygpt2-f16 (byte-level BPE), exported as GGUF,
// load in llamacpp-ppl, llama.cpp's own tokenizer gives the ids of EmbedLab's trimmed
// tokenizer, and its perplexity is EmbedLab's to 1e-4. Vocabularies trimmed to their
// required tokens only (no merges left for GPT-2) export and tokenize the same, and so
// does a trimmed WordPiece encoder (llama.cpp's WPM tokenizer). llama.cpp's tokenizer
// is the harness tests/tools/llamacpp_tokenize.cpp (scripts/build-llamacpp-sampler.sh
// builds it); the checks that need llama.cpp skip, saying why, without it.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/model.hpp"
#include "embedlab/model_export.hpp"
#include "embedlab/tokenizer.hpp"
#include "embedlab/trim.hpp"
#include "llama_cpp_tools.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;

const fs::path kSourceDir = EMBEDLAB_SOURCE_DIR;

fs::path llamacpp_tokenize_harness()
{
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    const fs::path build = ec ? fs::path("build") : exe.parent_path().parent_path();
    return build / "test-tools" / "llamacpp-tokenize" / "llamacpp-tokenize";
}

// Why the llama.cpp checks cannot run here; empty when they can.
std::string llamacpp_missing()
{
    if (!test::have_llama_cpp())
        return "no llama.cpp tools in " + test::llama_cpp_dir().string();
    if (!fs::exists(llamacpp_tokenize_harness()))
        return "no llama.cpp tokenizer harness at " + llamacpp_tokenize_harness().string() +
               ": run scripts/build-llamacpp-sampler.sh (needs npm, the registry and ../shared)";
    return "";
}

std::string output_of(const std::string& command)
{
    std::string out;
    FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
    if (!pipe)
        return out;
    char buffer[65536];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
        out.append(buffer, n);
    EXPECT_EQ(::pclose(pipe), 0) << command;
    return out;
}

// llama.cpp's ids of each text under the GGUF's vocabulary.
std::vector<std::vector<int32_t>> llamacpp_token_ids(const fs::path& gguf,
                                                     const std::vector<std::string>& texts)
{
    test::TempDir dir;
    std::string command =
        test::quote(llamacpp_tokenize_harness().string()) + " " + test::quote(gguf.string());
    for (size_t i = 0; i < texts.size(); ++i) {
        const fs::path file = dir / ("text" + std::to_string(i) + ".txt");
        test::write_file(file, texts[i]);
        command.append(" ").append(test::quote(file.string()));
    }
    std::istringstream lines(output_of(command));
    std::vector<std::vector<int32_t>> ids;
    for (std::string line; std::getline(lines, line);) {
        std::istringstream numbers(line);
        ids.emplace_back();
        for (int32_t id; numbers >> id;)
            ids.back().push_back(id);
    }
    EXPECT_EQ(ids.size(), texts.size()) << command;
    return ids;
}

// llamacpp-ppl's perplexity of `gguf` on `ids` (the project protocol, no BOS added).
double llamacpp_perplexity(const fs::path& gguf, const std::vector<int32_t>& ids, int64_t ctx)
{
    test::TempDir dir;
    std::string listed;
    for (int32_t id : ids)
        listed.append(std::to_string(id)).append(" ");
    test::write_file(dir / "ids.txt", listed);
    const std::string out =
        output_of(test::llama_cpp_command("llamacpp-ppl") + " " + test::quote(gguf.string()) + " " +
                  test::quote((dir / "ids.txt").string()) + " " + std::to_string(ctx) + " " +
                  test::llama_cpp_threads());
    const auto brace = out.rfind('{');
    if (brace == std::string::npos) {
        ADD_FAILURE() << "llamacpp-ppl printed no result: " << out;
        return -1;
    }
    return nlohmann::json::parse(out.substr(brace)).at("ppl").get<double>();
}

// The held-out stories split as trim_test.cpp splits them: the first 60 kB (to a line's
// end) are the frequency text, and the in-domain text is the next `bytes` (to a line's end).
struct HeldoutSplit {
    test::TempDir dir;
    fs::path freq;
    std::string in_domain;
    explicit HeldoutSplit(size_t bytes)
    {
        const std::string text = test::read_text(kSourceDir / "resources/texts/tinystories-heldout.txt");
        const size_t cut = text.find('\n', 60000) + 1;
        freq = dir / "freq.txt";
        test::write_file(freq, text.substr(0, cut));
        in_domain = text.substr(cut, text.find('\n', cut + bytes) + 1 - cut);
    }
};

const HeldoutSplit& heldout_split()
{
    static const HeldoutSplit split(4000);
    return split;
}

// Texts with dropped tokens: rare words, accents, symbols, scripts the stories lack (no
// literal special tokens: llama_tokenize runs with parse_special off).
std::vector<std::string> out_of_domain_texts()
{
    return {"Photosynthesis converts electromagnetic radiation within chloroplasts.",
            "Zürich's naïve café served crème brûlée; Ångström measured 42.195 km.",
            "∀x ∈ ℝ: x² ≥ 0 ☃ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 日本語のテキスト", "def f(x):\n\treturn {'key': [1, 2, 3]}  # comment",
            "  leading spaces,   runs   of spaces\n\n\nand newlines"};
}

fs::path tinygpt2_f16_dir()
{
    return kSourceDir / "resources/models/tinygpt2-f16";
}

fs::path tinyllama_shared_dir()
{
    return test::shared_dir() / "models/tinyllama";
}

fs::path minilm_dir()
{
    return kSourceDir / "tests/data/encoders/minilm-st";
}

// Trims `model` into dir/name and exports that as dir/name.gguf; returns the trim report.
TrimReport trim_and_export(const fs::path& model, const fs::path& dir, const std::string& name, TrimOptions o,
                           GgufExportType type)
{
    o.freq_text = heldout_split().freq;
    TrimReport report = trim_model(model, dir / name, o);
    export_gguf(load_model(dir / name), dir / (name + ".gguf"), {.type = type});
    return report;
}

// The trimmed directory's tokenizer, EmbedLab's reading of the exported GGUF and, when it
// is here, llama.cpp's tokenizer give the same ids for every text.
void expect_same_ids_everywhere(const fs::path& trimmed, const fs::path& gguf,
                                const std::vector<std::string>& texts)
{
    const auto ours = load_tokenizer_from_directory(trimmed);
    const LoadedModel from_gguf = load_model(gguf);
    ASSERT_TRUE(from_gguf.tokenizer);
    std::vector<std::vector<int32_t>> expected;
    for (const std::string& text : texts) {
        expected.push_back(ours->encode(text));
        EXPECT_EQ(from_gguf.tokenizer->encode(text), expected.back()) << "EmbedLab's GGUF reading: " << text;
        EXPECT_EQ(from_gguf.tokenizer->decode(expected.back()), ours->decode(expected.back())) << text;
    }
    if (!llamacpp_missing().empty()) {
        std::printf("llama.cpp's tokenizer not compared: %s\n", llamacpp_missing().c_str());
        return;
    }
    const auto theirs = llamacpp_token_ids(gguf, texts);
    for (size_t i = 0; i < texts.size() && i < theirs.size(); ++i)
        EXPECT_EQ(theirs[i], expected[i]) << "llama.cpp: " << texts[i];
}

struct TrimmedDecoder {
    std::string name;
    fs::path (*dir)();
    GgufExportType type; // the stored type: the GGUF holds the trimmed weights unrounded
};

void PrintTo(const TrimmedDecoder& d, std::ostream* os)
{
    *os << d.name;
}

class TrimLlamaCpp : public ::testing::TestWithParam<TrimmedDecoder> {};

TEST_P(TrimLlamaCpp, ExportedGgufTokenizesAndScoresAsInEmbedLab)
{
    const TrimmedDecoder& c = GetParam();
    if (!fs::exists(c.dir()))
        GTEST_SKIP() << "needs " << c.dir() << " (../shared)";
    if (const std::string why = llamacpp_missing(); !why.empty())
        GTEST_SKIP() << why;
    test::TempDir dir;
    TrimOptions o;
    o.coverage = 0.99;
    const TrimReport report = trim_and_export(c.dir(), dir.path(), "t", o, c.type);
    ASSERT_LT(report.kept.size(), 5000u);

    std::vector<std::string> texts = out_of_domain_texts();
    texts.insert(texts.begin(), heldout_split().in_domain);
    expect_same_ids_everywhere(dir / "t", dir / "t.gguf", texts);

    const LoadedModel trimmed = load_model(dir / "t");
    const LoadedModel gguf = load_model(dir / "t.gguf");
    const std::vector<int32_t> ids = trimmed.tokenizer->encode(heldout_split().in_domain);
    ASSERT_GT(ids.size(), 800u);
    const int64_t ctx = 128;
    const double ours = evaluate_perplexity(*gguf.model, ids, {.ctx = ctx}).ppl;
    const double theirs = llamacpp_perplexity(dir / "t.gguf", ids, ctx);
    std::printf("%s trimmed to %zu tokens, %zu in-domain ids: EmbedLab %.8g  llama.cpp %.8g  relative %.2e\n",
                c.name.c_str(), report.kept.size(), ids.size(), ours, theirs, theirs / ours - 1);
    EXPECT_NEAR(theirs / ours, 1.0, 1e-4);
    // The GGUF holds the trimmed directory's weights as stored: the same model in EmbedLab.
    EXPECT_NEAR(evaluate_perplexity(*trimmed.model, ids, {.ctx = ctx}).ppl / ours, 1.0, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Decoders, TrimLlamaCpp,
    ::testing::Values(TrimmedDecoder{"tinyllama", tinyllama_shared_dir, GgufExportType::F32},
                      TrimmedDecoder{"tinygpt2_f16", tinygpt2_f16_dir, GgufExportType::F16}),
    [](const auto& info) { return info.param.name; });

// Trimmed to the required tokens alone, a byte-level BPE has no merge left: its GGUF
// still lists them (an empty tokenizer.ggml.merges), which both llama.cpp and EmbedLab
// need to read a gpt2 vocabulary. SentencePiece (byte pieces) and WordPiece (single
// characters) at their minimum export and tokenize the same too.
TEST(TrimLlamaCppMinimal, VocabulariesTrimmedToTheirRequiredTokensExportAndTokenizeTheSame)
{
    struct Case {
        std::string name;
        fs::path model;
        int64_t required;
    };
    std::vector<Case> cases{{"tinygpt2-f16", tinygpt2_f16_dir(), 257}, {"minilm-st", minilm_dir(), 157}};
    if (fs::exists(tinyllama_shared_dir()))
        cases.push_back({"tinyllama", tinyllama_shared_dir(), 259});
    else
        std::printf("tinyllama not checked: no %s (../shared)\n", tinyllama_shared_dir().c_str());
    std::vector<std::string> texts = out_of_domain_texts();
    texts.push_back(heldout_split().in_domain.substr(0, 600));
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        test::TempDir dir;
        TrimOptions o;
        o.keep = c.required;
        const TrimReport report = trim_and_export(c.model, dir.path(), "t", o, GgufExportType::F32);
        ASSERT_EQ(static_cast<int64_t>(report.kept.size()), c.required);
        expect_same_ids_everywhere(dir / "t", dir / "t.gguf", texts);
    }
}

// A trimmed WordPiece encoder's GGUF: llama.cpp's WPM tokenizer gives EmbedLab's ids for
// the in-domain text and the texts with dropped tokens.
TEST(TrimLlamaCppMinimal, TrimmedWordPieceGgufTokenizesTheSameInLlamaCpp)
{
    if (const std::string why = llamacpp_missing(); !why.empty())
        GTEST_SKIP() << why;
    test::TempDir dir;
    TrimOptions o;
    o.coverage = 0.99;
    const TrimReport report = trim_and_export(minilm_dir(), dir.path(), "t", o, GgufExportType::F32);
    EXPECT_LT(report.kept.size(), 2000u);
    std::vector<std::string> texts = out_of_domain_texts();
    texts.push_back(heldout_split().in_domain);
    expect_same_ids_everywhere(dir / "t", dir / "t.gguf", texts);
}

} // namespace
} // namespace embedlab
