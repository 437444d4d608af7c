// The sampling chains (sampler.hpp): each stage's distribution on hand-worked logits, the
// seeded draw, and llama.cpp's own samplers as an oracle (tests/tools/llamacpp_sampler.cpp,
// built by scripts/build-llamacpp-sampler.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/sampler.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

using Probabilities = std::vector<double>;

// The last stage's distribution, i.e. what the draw samples from.
Probabilities final_of(const std::vector<float>& logits, const SamplingOptions& s)
{
    return sampling_stages(logits, s).back().probabilities;
}

void expect_near(const Probabilities& got, const Probabilities& want, double tolerance,
                 const std::string& what)
{
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], tolerance) << what << ", token " << i;
}

// softmax(logits) over the listed ids, 0 elsewhere.
Probabilities softmax_over(const std::vector<double>& logits, const std::vector<size_t>& ids)
{
    Probabilities p(logits.size(), 0);
    double sum = 0;
    for (size_t i : ids)
        sum += std::exp(logits[i]);
    for (size_t i : ids)
        p[i] = std::exp(logits[i]) / sum;
    return p;
}

TEST(Sampler, TheIssuesExampleTellsTheChainsApart)
{
    // Issue 62: logits [2, 1, 0], T = 0.5, top-p 0.8.
    const std::vector<float> logits{2, 1, 0};
    const SamplingOptions llama{.temperature = 0.5, .top_p = 0.8};
    const auto stages = sampling_stages(logits, llama);
    ASSERT_EQ(stages.size(), 4u);
    EXPECT_EQ(stages[0].name, "top_k");
    EXPECT_EQ(stages[1].name, "top_p");
    EXPECT_EQ(stages[2].name, "min_p");
    EXPECT_EQ(stages[3].name, "temperature");
    expect_near(stages[0].probabilities, softmax_over({2, 1, 0}, {0, 1, 2}), 1e-12, "top_k (off)");
    expect_near(stages[1].probabilities, softmax_over({2, 1, 0}, {0, 1}), 1e-12, "top_p: 0.665 + 0.245");
    expect_near(stages[2].probabilities, stages[1].probabilities, 0, "min_p 0.05 keeps e^-1");
    expect_near(stages[3].probabilities, softmax_over({4, 2, 0}, {0, 1}), 1e-12, "temperature");
    EXPECT_NEAR(stages[3].probabilities[1], 0.119203, 1e-6);

    const SamplingOptions hf{.temperature = 0.5, .top_p = 0.8, .sampler = "hf"};
    const auto h = sampling_stages(logits, hf);
    ASSERT_EQ(h.size(), 4u);
    EXPECT_EQ(h[0].name, "temperature");
    expect_near(h[0].probabilities, softmax_over({4, 2, 0}, {0, 1, 2}), 1e-12, "hf temperature");
    expect_near(h[2].probabilities, {1, 0, 0}, 0, "hf top_p: 0.867 alone reaches 0.8");
    expect_near(h[3].probabilities, {1, 0, 0}, 0, "hf min_p (off)");
}

TEST(Sampler, TiesGoToTheLowerIdAndTopKBeyondTheVocabularyKeepsAll)
{
    const std::vector<float> logits{1, 3, 3, 1, 0};
    const std::vector<double> l(logits.begin(), logits.end());
    expect_near(final_of(logits, {.temperature = 1, .top_k = 2, .min_p = 0}), softmax_over(l, {1, 2}), 1e-12,
                "top-2 of a tie");
    expect_near(final_of(logits, {.temperature = 1, .top_k = 3, .min_p = 0}), softmax_over(l, {0, 1, 2}),
                1e-12, "top-3: of the tied 1s, id 0");
    expect_near(final_of(logits, {.temperature = 1, .top_k = 50, .min_p = 0}),
                softmax_over(l, {0, 1, 2, 3, 4}), 1e-12, "top-k beyond V");
    for (const char* sampler : {"llamacpp", "hf"})
        expect_near(final_of(logits, {.top_k = 3, .sampler = sampler}), {0, 1, 0, 0, 0}, 0,
                    std::string("temperature 0 keeps the first argmax, ") + sampler);
}

TEST(Sampler, MinPAlone)
{
    // Probabilities in proportion 1 : 0.5 : 0.1 : 0.04.
    const std::vector<double> l{0, std::log(0.5), std::log(0.1), std::log(0.04)};
    const std::vector<float> logits(l.begin(), l.end());
    expect_near(final_of(logits, {.temperature = 1, .min_p = 0.2}), softmax_over(l, {0, 1}), 1e-7,
                "min_p 0.2");
    expect_near(final_of(logits, {.temperature = 1}), softmax_over(l, {0, 1, 2}), 1e-7, "llamacpp's 0.05");
    expect_near(final_of(logits, {.temperature = 1, .sampler = "hf"}), softmax_over(l, {0, 1, 2, 3}), 1e-7,
                "hf's default: off");
    expect_near(final_of(logits, {.temperature = 1, .min_p = 0}), softmax_over(l, {0, 1, 2, 3}), 1e-7,
                "0: off");
    expect_near(final_of(logits, {.temperature = 1, .min_p = 1}), {1, 0, 0, 0}, 0, "1: the most likely");
    // hf applies min-p to the tempered distribution: at T = 2 the ratios are square roots.
    expect_near(final_of(logits, {.temperature = 2, .sampler = "hf", .min_p = 0.3}),
                softmax_over({0, l[1] / 2, l[2] / 2, l[3] / 2}, {0, 1, 2}), 1e-7,
                "hf min_p after temperature");
    EXPECT_EQ(effective_min_p({}), 0.05);
    EXPECT_EQ(effective_min_p({.sampler = "hf"}), 0);
}

TEST(Sampler, TopPKeepsAtLeastOneToken)
{
    const std::vector<float> logits{0, 0.5, 0.2};
    expect_near(final_of(logits, {.temperature = 1, .top_p = 1e-9}), {0, 1, 0}, 0, "top_p tiny");
    expect_near(final_of(logits, {.temperature = 1, .top_p = 1, .min_p = 0}),
                softmax_over({0, 0.5, 0.2}, {0, 1, 2}), 1e-7, "top_p 1");
}

TEST(Sampler, GreedyUsesNoRandomNumberAndTakesTheFirstArgmax)
{
    const std::vector<float> logits{0.5, 2, -1, 2, 0};
    std::mt19937_64 rng(3), untouched(3);
    for (const char* sampler : {"llamacpp", "hf"})
        EXPECT_EQ(sample_token(logits, {.top_p = 0.5, .sampler = sampler}, rng), 1);
    EXPECT_EQ(rng(), untouched());
}

TEST(Sampler, TheSeededDrawIsFixedAndFollowsTheDistribution)
{
    const std::vector<float> logits{2, 1, 0};
    const SamplingOptions llama{.temperature = 0.5, .top_p = 0.8, .seed = 7};
    std::mt19937_64 rng(llama.seed);
    std::vector<int32_t> first;
    for (int i = 0; i < 12; ++i)
        first.push_back(sample_token(logits, llama, rng));
    // Pinned: a seed gives the same tokens on every machine (top 53 bits, no std distribution).
    EXPECT_EQ(first, (std::vector<int32_t>{0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0}));
    int ones = 0, n = 20000;
    for (int i = 0; i < n; ++i)
        ones += sample_token(logits, llama, rng) == 1;
    EXPECT_NEAR(static_cast<double>(ones) / n, 0.119203, 0.01);
    auto hf = llama;
    hf.sampler = "hf";
    for (int i = 0; i < 1000; ++i)
        ASSERT_EQ(sample_token(logits, hf, rng), 0);
}

TEST(Sampler, RefusesBadOptionsByName)
{
    const std::vector<float> logits{1, 2};
    auto error_of = [&](const SamplingOptions& s) -> std::string {
        try {
            sampling_stages(logits, s);
        } catch (const InputError& e) {
            return e.what();
        }
        return "no error";
    };
    EXPECT_NE(error_of({.sampler = "vllm"}).find("sampler must be llamacpp or hf, not 'vllm'"),
              std::string::npos);
    EXPECT_NE(error_of({.min_p = 1.5}).find("min_p"), std::string::npos);
    EXPECT_NE(error_of({.min_p = -0.1}).find("min_p"), std::string::npos);
    EXPECT_NE(error_of({.top_p = 0}).find("top_p"), std::string::npos);
    EXPECT_NE(error_of({.temperature = -1}).find("temperature"), std::string::npos);
    EXPECT_THROW(sampling_stages({}, {}), InputError);
}

// --- llama.cpp's own samplers ------------------------------------------------------------

// <build>, from <build>/tests/<exe>.
std::filesystem::path build_dir()
{
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path("build") : exe.parent_path().parent_path();
}

std::filesystem::path harness()
{
    return build_dir() / "test-tools" / "llamacpp-sampler" / "llamacpp-sampler";
}

nlohmann::json run_harness(const std::vector<float>& logits, const SamplingOptions& s,
                           const test::TempDir& dir)
{
    const auto input = dir.path() / "logits.txt";
    {
        std::ofstream out(input);
        out.precision(9); // float round trip
        for (float x : logits)
            out << x << '\n';
    }
    char settings[128];
    std::snprintf(settings, sizeof settings, " %lld %.9g %.9g %.9g < ", static_cast<long long>(s.top_k),
                  s.top_p, effective_min_p(s), s.temperature);
    const std::string command = "'" + harness().string() + "'" + settings + "'" + input.string() + "'";
    std::string out;
    if (FILE* pipe = popen(command.c_str(), "r")) {
        char buffer[65536];
        for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
            out.append(buffer, n);
        EXPECT_EQ(pclose(pipe), 0) << command;
    }
    return nlohmann::json::parse(out);
}

TEST(SamplerOracle, EveryStageEqualsLlamaCpps)
{
    if (!std::filesystem::exists(harness()))
        GTEST_SKIP() << "no llama.cpp sampler harness at " << harness()
                     << ": run scripts/build-llamacpp-sampler.sh (needs npm, the registry and ../shared)";
    test::TempDir dir;
    std::mt19937_64 rng(62);
    auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
    const int64_t sizes[] = {3, 17, 150, 300, 2000}; // > 128 and > 1024: llama.cpp's bucket sorts
    const int64_t ks[] = {0, 1, 5, 40, 5000};
    const double ps[] = {1, 0.95, 0.8, 0.5}, min_ps[] = {0, 0.05, 0.2}, temperatures[] = {0, 0.5, 0.8, 1.5};
    for (int c = 0; c < 24; ++c) {
        const auto V = sizes[c % 5];
        std::vector<float> logits;
        for (int64_t i = 0; i < V; ++i) // normal(0, 3) by Box-Muller: no ties
            logits.push_back(static_cast<float>(3 * std::sqrt(-2 * std::log(1 - uniform())) *
                                                std::cos(2 * M_PI * uniform())));
        const SamplingOptions s{.temperature = temperatures[(c / 2) % 4],
                                .top_k = ks[(c / 3) % 5],
                                .top_p = ps[c % 4],
                                .min_p = min_ps[(c / 4) % 3]};
        const std::string what = "case " + std::to_string(c) + ": V " + std::to_string(V) + ", k " +
                                 std::to_string(s.top_k) + ", p " + std::to_string(s.top_p) + ", min_p " +
                                 std::to_string(*s.min_p) + ", T " + std::to_string(s.temperature);
        const auto oracle = run_harness(logits, s, dir);
        const auto ours = sampling_stages(logits, s);
        ASSERT_EQ(oracle["stages"].size(), ours.size()) << what;
        for (size_t i = 0; i < ours.size(); ++i) {
            EXPECT_EQ(oracle["stages"][i]["name"], ours[i].name) << what;
            expect_near(ours[i].probabilities, oracle["stages"][i]["p"].get<Probabilities>(), 1e-6,
                        what + ", " + ours[i].name);
        }
        expect_near(ours.back().probabilities, oracle["dist"].get<Probabilities>(), 1e-6, what + ", dist");
    }
}

} // namespace
} // namespace embedlab
