#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/eval.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

using namespace embedlab;

namespace {

// Every target 1..n-1 is scored exactly once, whatever ctx and stride.
TEST(PerplexityWindows, ScoreEachTargetExactlyOnce)
{
    for (int64_t n : {2, 3, 10, 129, 130, 1000})
        for (int64_t ctx : {1, 4, 128})
            for (int64_t stride : {int64_t{1}, ctx / 2 + 1, ctx}) {
                if (stride > ctx)
                    continue;
                std::vector<int> scored(n, 0);
                for (const auto& w : perplexity_windows(n, ctx, stride)) {
                    ASSERT_LE(w.length, ctx + 1);
                    ASSERT_LE(w.start + w.length, n);
                    for (int64_t t = w.first_scored; t < w.length - 1; ++t)
                        ++scored[w.start + 1 + t];
                }
                EXPECT_EQ(scored[0], 0);
                for (int64_t i = 1; i < n; ++i)
                    ASSERT_EQ(scored[i], 1)
                        << "n=" << n << " ctx=" << ctx << " stride=" << stride << " i=" << i;
            }
}

TEST(PerplexityWindows, DefaultProtocolOverlapsByOne)
{
    const auto w = perplexity_windows(10, 4, 4);
    ASSERT_EQ(w.size(), 3u);
    EXPECT_EQ(w[0].start, 0);
    EXPECT_EQ(w[0].length, 5);
    EXPECT_EQ(w[1].start, 4); // last id of window 0 is the first of window 1
    EXPECT_EQ(w[1].length, 5);
    EXPECT_EQ(w[2].start, 8);
    EXPECT_EQ(w[2].length, 2);
    for (const auto& x : w)
        EXPECT_EQ(x.first_scored, 0);
}

TEST(PerplexityWindows, RejectsBadArguments)
{
    EXPECT_THROW(perplexity_windows(1, 4, 4), InputError);
    EXPECT_THROW(perplexity_windows(10, 0, 1), InputError);
    EXPECT_THROW(perplexity_windows(10, 4, 5), InputError);
    EXPECT_THROW(perplexity_windows(10, 4, 0), InputError);
}

TEST(Perplexity, BatchingDoesNotChangeTheResult)
{
    const auto c = test::tiny_config(Architecture::Llama);
    LanguageModel m(c, test::random_weights(c), "tiny");
    std::vector<int32_t> ids(300);
    for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = static_cast<int32_t>((i * 7 + 3) % 50);
    const auto one = evaluate_perplexity(m, ids, {.ctx = 16, .stride = 16, .batch_windows = 1});
    const auto many = evaluate_perplexity(m, ids, {.ctx = 16, .stride = 16, .batch_windows = 7});
    EXPECT_EQ(one.tokens, 299);
    EXPECT_EQ(many.tokens, 299);
    EXPECT_NEAR(one.nll_per_token, many.nll_per_token, 1e-6);
    // A uniform model would give ln V; a random one is somewhere near, and finite.
    EXPECT_TRUE(std::isfinite(one.ppl));
    EXPECT_NEAR(one.ppl, std::exp(one.nll_per_token), 1e-9 * one.ppl);
}

TEST(Perplexity, ProgressCanCancel)
{
    const auto c = test::tiny_config(Architecture::GPT2);
    LanguageModel m(c, test::random_weights(c), "tiny");
    std::vector<int32_t> ids(200, 3);
    int calls = 0;
    EXPECT_THROW(evaluate_perplexity(m, ids, {.ctx = 8, .stride = 8, .batch_windows = 2},
                                     [&](int64_t done, int64_t total) { return ++calls < 3; }),
                 Cancelled);
    EXPECT_EQ(calls, 3);
}

// One batch of every window: the cancel is heard after a decoder layer, before
// the batch's forward pass ends (no head chunk has reported positions yet).
TEST(Perplexity, CancelIsHeardBetweenDecoderLayers)
{
    const auto c = test::tiny_config(Architecture::Llama);
    ASSERT_GE(c.num_layers, 2);
    LanguageModel m(c, test::random_weights(c), "tiny");
    std::vector<int32_t> ids(200, 3);
    std::vector<int64_t> reported;
    EXPECT_THROW(evaluate_perplexity(m, ids, {.ctx = 8, .stride = 8, .batch_windows = 1000},
                                     [&](int64_t done, int64_t) {
                                         reported.push_back(done);
                                         return reported.size() < 3; // the start, layer 0, then stop
                                     }),
                 Cancelled);
    EXPECT_EQ(reported, (std::vector<int64_t>{0, 0, 0}));
}

TEST(Perplexity, ContextLongerThanLearnedPositionsIsAnInputError)
{
    const auto c = test::tiny_config(Architecture::GPT2); // 32 positions
    LanguageModel m(c, test::random_weights(c), "tiny");
    std::vector<int32_t> ids(100, 1);
    EXPECT_THROW(evaluate_perplexity(m, ids, {.ctx = 33}), InputError);
    EXPECT_NO_THROW(evaluate_perplexity(m, ids, {.ctx = 32}));
}

TEST(InputFiles, IdsInEveryAcceptedFormat)
{
    test::TempDir dir;
    auto write = [&](const std::string& name, const std::string& content) {
        std::ofstream(dir / name) << content;
        return dir / name;
    };
    const std::vector<int32_t> want{5, 17, 0, 42};
    EXPECT_EQ(read_ids_file(write("a.txt", "5 17\n0\t42\n")), want);
    EXPECT_EQ(read_ids_file(write("b.json", "[5, 17, 0, 42]")), want);
    EXPECT_EQ(read_ids_file(write("c.json", R"({"model": "x", "ids": [5, 17, 0, 42]})")), want);
    for (const auto& [name, content, needle] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"bad1.txt", "5 seventeen", "bad1.txt"},
             {"bad2.json", "{\"ids\": [1, 2", "not valid JSON"},
             {"bad3.json", "{\"tokens\": [1]}", "\"ids\""},
             {"bad4.json", "[1, -2]", "ids[1]"},
             {"bad5.txt", "  \n", "empty"}}) {
        try {
            read_ids_file(write(name, content));
            ADD_FAILURE() << name << " was accepted";
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    }
}

TEST(InputFiles, EmptyOrMissingTextNamesTheFile)
{
    test::TempDir dir;
    std::ofstream(dir / "empty.txt").close();
    try {
        read_text_file(dir / "empty.txt");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("empty.txt: the text is empty"), std::string::npos) << e.what();
    }
    EXPECT_THROW(read_text_file(dir / "missing.txt"), InputError);
}

// --- parity with ../shared/reference/perplexity.json: one test per model file and text ---
//
// Every entry is a test case of its own, so that ctest -j runs them side by side.
// The full-text entries (wikitext2-test, 283k-333k tokens, minutes each) are the
// suite ReferencePerplexityFull, which tests/CMakeLists.txt labels `reference`:
// `ctest --test-dir build -L reference` runs them, CI only when time remains. The
// default run keeps a cheap stand-in for each, ReferencePerplexitySlice (below).

constexpr int64_t full_text_tokens = 100'000; // entries above this are the `reference` label

struct ReferenceCase {
    std::string name;                 // the test's name: model file and text
    std::filesystem::path model_path; // under ../shared
    std::string text, ids_file;       // as perplexity.json gives them
    int64_t tokens = 0, ctx = 0;
    double ppl = 0;
    std::vector<int32_t> first_ids;
    bool full_text = false;
};

// gtest prints the parameter in its messages.
void PrintTo(const ReferenceCase& c, std::ostream* os)
{
    *os << c.model_path.generic_string() << " on " << c.text;
}

// "models/tinygpt2" on "data/wikitext2-test-50k.txt" -> tinygpt2_wikitext2_test_50k;
// "models/stories260K/stories260K.gguf" on "data/tinystories-heldout.txt[:6000 chars]"
// -> stories260K_gguf_tinystories_heldout_6000.
std::string reference_case_name(const std::filesystem::path& model_path, const std::string& text)
{
    const auto bracket = text.find('[');
    std::string name =
        model_path.filename().string() + "_" + std::filesystem::path(text.substr(0, bracket)).stem().string();
    if (bracket != std::string::npos) {
        std::string digits;
        for (char ch : text.substr(bracket))
            if (std::isdigit(static_cast<unsigned char>(ch)))
                digits += ch;
        name += "_" + digits;
    }
    for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch)))
            ch = '_';
    return name;
}

// Read once, when gtest registers the cases; empty without ../shared. A broken file
// registers nothing here and fails ReferencePerplexityFile.HasEveryEntry instead.
const std::vector<ReferenceCase>& reference_cases()
{
    static const std::vector<ReferenceCase> cases = [] {
        std::vector<ReferenceCase> out;
        if (!test::have_shared())
            return out;
        try {
            const auto j =
                nlohmann::json::parse(test::read_text(test::shared_dir() / "reference" / "perplexity.json"));
            for (const auto& r : j.at("results")) {
                ReferenceCase c;
                c.text = r.at("text").get<std::string>();
                c.ids_file = r.value("ids_file", "");
                c.tokens = r.at("tokens").get<int64_t>();
                c.ctx = r.at("ctx").get<int64_t>();
                c.ppl = r.at("ppl").get<double>();
                c.first_ids = r.value("first_ids", std::vector<int32_t>{});
                c.full_text = c.tokens > full_text_tokens;
                // stories260K: both files, ids from the reference (llama2.c's encoder)
                std::vector<std::filesystem::path> paths;
                if (c.ids_file.empty()) {
                    paths.emplace_back(r.at("model").get<std::string>());
                } else {
                    paths.emplace_back("models/stories260K/stories260K.gguf");
                    paths.emplace_back("models/stories260K/stories260K.bin");
                }
                for (const auto& path : paths) {
                    c.model_path = path;
                    c.name = reference_case_name(path, c.text);
                    out.push_back(c);
                }
            }
        } catch (const std::exception& e) {
            std::cerr << "perplexity.json: " << e.what() << "\n";
            out.clear();
        }
        return out;
    }();
    return cases;
}

std::vector<ReferenceCase> reference_cases_where(bool full_text)
{
    std::vector<ReferenceCase> out;
    for (const auto& c : reference_cases())
        if (c.full_text == full_text)
            out.push_back(c);
    return out;
}

// The ids an entry is measured on: the reference's own ids file (stories260K) or
// the model's tokenizer on the whole text.
std::vector<int32_t> reference_ids(const ReferenceCase& c, const LoadedModel& lm)
{
    if (!c.ids_file.empty())
        return read_ids_file(test::shared_dir() / c.ids_file);
    return lm.tokenizer->encode(read_text_file(test::shared_dir() / c.text));
}

bool starts_with(const std::vector<int32_t>& ids, const std::vector<int32_t>& prefix)
{
    return ids.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), ids.begin());
}

void expect_reproduced(const ReferenceCase& c)
{
    const auto path = test::shared_dir() / c.model_path;
    auto lm = load_model(path);
    const auto ids = reference_ids(c, lm);
    EXPECT_TRUE(starts_with(ids, c.first_ids)) << path << ": the first ids differ from the reference";
    const auto r = evaluate_perplexity(*lm.model, ids, {.ctx = c.ctx});
    EXPECT_EQ(r.tokens, c.tokens) << path;
    EXPECT_LT(std::abs(r.ppl - c.ppl) / c.ppl, 1e-4) << path << ": " << r.ppl << " vs " << c.ppl;
}

std::string reference_test_name(const ::testing::TestParamInfo<ReferenceCase>& info)
{
    return info.param.name;
}

class ReferencePerplexity : public ::testing::TestWithParam<ReferenceCase> {};
class ReferencePerplexityFull : public ::testing::TestWithParam<ReferenceCase> {};
class ReferencePerplexitySlice : public ::testing::TestWithParam<ReferenceCase> {};

// The entries on the shorter texts, in full (seconds each): label `reference`, beside the
// full-text ones; the default run keeps the wikitext2-test-50k entries through
// ReferencePerplexitySlice, which evaluates their windows.
TEST_P(ReferencePerplexity, Reproduces)
{
    EMBEDLAB_REQUIRE_SHARED();
    expect_reproduced(GetParam());
}

// The full-text entries, in full (minutes each): label `reference`.
TEST_P(ReferencePerplexityFull, Reproduces)
{
    EMBEDLAB_REQUIRE_SHARED();
    expect_reproduced(GetParam());
}

// The default run's stand-in for a full-text entry. The whole text is tokenized as
// the full run does it (the entry's token count and first ids), and the first
// windows are evaluated: the ids of a shorter reference text that is a byte prefix
// of this one (wikitext2-test-50k is the first 50,166 bytes of wikitext2-test, and
// its ids are the first ids of the full text's), which must reproduce that entry.
TEST_P(ReferencePerplexitySlice, TokensAndThePrefixEntryMatch)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto& c = GetParam();
    const auto shared = test::shared_dir();
    auto lm = load_model(shared / c.model_path);
    const std::string text = read_text_file(shared / c.text);
    const auto ids = lm.tokenizer->encode(text);
    EXPECT_EQ(static_cast<int64_t>(ids.size()) - 1, c.tokens);
    EXPECT_TRUE(starts_with(ids, c.first_ids)) << "the first ids differ from the reference";

    // The longest other entry for the same model file on a prefix of this text.
    const ReferenceCase* prefix = nullptr;
    std::string prefix_text;
    for (const auto& p : reference_cases()) {
        if (p.full_text || p.model_path != c.model_path || !p.ids_file.empty() ||
            (prefix && p.tokens <= prefix->tokens))
            continue;
        std::string t = read_text_file(shared / p.text);
        if (t.size() < text.size() && text.compare(0, t.size(), t) == 0) {
            prefix = &p;
            prefix_text = std::move(t);
        }
    }
    ASSERT_NE(prefix, nullptr) << "no reference entry for " << c.model_path << " on a prefix of " << c.text;
    SCOPED_TRACE("the first windows are " + prefix->text);
    const auto prefix_ids = lm.tokenizer->encode(prefix_text);
    ASSERT_TRUE(starts_with(ids, prefix_ids))
        << "the ids of " << prefix->text << " are not a prefix of the ids of " << c.text
        << "; this stand-in needs them to be";
    const auto r = evaluate_perplexity(*lm.model, std::span<const int32_t>(ids).first(prefix_ids.size()),
                                       {.ctx = prefix->ctx});
    EXPECT_EQ(r.tokens, prefix->tokens);
    EXPECT_LT(std::abs(r.ppl - prefix->ppl) / prefix->ppl, 1e-4) << r.ppl << " vs " << prefix->ppl;
}

INSTANTIATE_TEST_SUITE_P(Shared, ReferencePerplexity, ::testing::ValuesIn(reference_cases_where(false)),
                         reference_test_name);
INSTANTIATE_TEST_SUITE_P(Shared, ReferencePerplexityFull, ::testing::ValuesIn(reference_cases_where(true)),
                         reference_test_name);
INSTANTIATE_TEST_SUITE_P(Shared, ReferencePerplexitySlice, ::testing::ValuesIn(reference_cases_where(true)),
                         reference_test_name);
// Without ../shared there are no cases; HasEveryEntry skips and says why.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReferencePerplexity);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReferencePerplexityFull);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReferencePerplexitySlice);

// Every entry of perplexity.json has its test above.
TEST(ReferencePerplexityFile, HasEveryEntry)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto j =
        nlohmann::json::parse(test::read_text(test::shared_dir() / "reference" / "perplexity.json"));
    ASSERT_GE(j.at("results").size(), 10u);
    size_t files = 0;
    for (const auto& r : j.at("results"))
        files += r.contains("ids_file") ? 2 : 1; // stories260K: the .gguf and the .bin
    EXPECT_EQ(reference_cases().size(), files);
    EXPECT_FALSE(reference_cases_where(true).empty());
}

} // namespace
