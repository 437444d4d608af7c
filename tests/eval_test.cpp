#include <fstream>

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

// --- parity with ../shared/reference/perplexity.json: every model and text ---

struct ReferenceCase {
    std::string model, text, ids_file;
    int64_t tokens, ctx;
    double ppl, nll;
};

std::vector<ReferenceCase> reference_cases()
{
    std::vector<ReferenceCase> cases;
    if (!test::have_shared())
        return cases;
    const auto j =
        nlohmann::json::parse(test::read_text(test::shared_dir() / "reference" / "perplexity.json"));
    for (const auto& r : j["results"]) {
        ReferenceCase c;
        c.model = r["model"];
        c.text = r["text"];
        c.ids_file = r.value("ids_file", "");
        c.tokens = r["tokens"];
        c.ctx = r["ctx"];
        c.ppl = r["ppl"];
        c.nll = r["nll_per_token"];
        cases.push_back(c);
    }
    return cases;
}

TEST(ReferencePerplexity, EveryReferenceResultIsReproduced)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto shared = test::shared_dir();
    const auto cases = reference_cases();
    ASSERT_GE(cases.size(), 10u);
    for (const auto& c : cases) {
        SCOPED_TRACE(c.model + " on " + c.text);
        std::vector<std::filesystem::path> models;
        std::vector<int32_t> ids;
        if (!c.ids_file.empty()) { // stories260K: both files, ids from the reference
            models = {shared / "models/stories260K/stories260K.gguf",
                      shared / "models/stories260K/stories260K.bin"};
            ids = read_ids_file(shared / c.ids_file);
        } else {
            models = {shared / c.model};
        }
        for (const auto& path : models) {
            auto lm = load_model(path);
            if (c.ids_file.empty())
                ids = lm.tokenizer->encode(read_text_file(shared / c.text));
            const auto r = evaluate_perplexity(*lm.model, ids, {.ctx = c.ctx});
            EXPECT_EQ(r.tokens, c.tokens) << path;
            EXPECT_LT(std::abs(r.ppl - c.ppl) / c.ppl, 1e-4) << path << ": " << r.ppl << " vs " << c.ppl;
        }
    }
}

} // namespace
