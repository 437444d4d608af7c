// Zero-shot tasks (issue 19, item 2): the SST-2 prompt, the harness's encoding of
// context and continuation and the summed log-likelihood, checked against a
// direct computation on the exact token sequence; multiple-choice JSONL, STS-B,
// rank correlation; bad input through the CLI.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_in_process.hpp"
#include "cli_support.hpp"
#include "embedlab/model.hpp"
#include "embedlab/resources.hpp"
#include "embedlab/tasks.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;
using test::cli;
using test::TempDir;

const LoadedModel& bundled()
{
    static const LoadedModel lm = load_model(default_model_path());
    return lm;
}

// Summed log-probability of ids[from:] given ids[:from], the model reading ids[:-1].
double direct_loglik(const LanguageModel& m, const std::vector<int32_t>& ids, size_t from)
{
    c10::InferenceMode guard;
    std::vector<int64_t> v(ids.begin(), ids.end());
    const auto t = torch::tensor(v, torch::kLong);
    const auto n = static_cast<int64_t>(v.size());
    const auto logp =
        torch::log_softmax(m.logits(t.narrow(0, 0, n - 1).unsqueeze(0))[0].to(torch::kDouble), -1);
    double sum = 0;
    for (int64_t pos = static_cast<int64_t>(from); pos < n; ++pos)
        sum += logp[pos - 1][v[static_cast<size_t>(pos)]].item<double>();
    return sum;
}

const char* kSst2 = "sentence\tlabel\n"
                    "it 's a charming and often affecting journey . \t1\n"
                    "unflinchingly bleak and desperate \t0\n"
                    "the acting is superb\t1\n";

TEST(Tasks, Sst2ScoresAreTheLogLikelihoodOfTheContinuationTokens)
{
    TempDir dir;
    std::ofstream(dir / "dev.tsv") << kSst2;
    const auto data = read_task_data("sst2", dir / "dev.tsv");
    ASSERT_EQ(data.examples.size(), 3u);
    EXPECT_EQ(data.examples[2].context,
              "the acting is superb\nQuestion: Is this sentence positive or negative?\nAnswer:");
    EXPECT_EQ(data.examples[1].label, 0);
    const auto& lm = bundled();
    const auto r = evaluate_task(*lm.model, *lm.tokenizer, data);
    ASSERT_EQ(r.examples.size(), 3u);
    int right = 0;
    for (size_t i = 0; i < 3; ++i) {
        const auto& e = data.examples[i];
        for (size_t c = 0; c < 2; ++c) {
            const auto context = lm.tokenizer->encode(e.context);
            const auto whole =
                lm.tokenizer->encode(e.context + std::string(c == 0 ? " negative" : " positive"));
            EXPECT_NEAR(r.examples[i].loglik[c], direct_loglik(*lm.model, whole, context.size()), 1e-6);
            EXPECT_EQ(r.examples[i].continuation_tokens[c],
                      static_cast<int64_t>(whole.size() - context.size()));
        }
        EXPECT_EQ(r.examples[i].choice, r.examples[i].loglik[1] > r.examples[i].loglik[0] ? 1 : 0);
        right += r.examples[i].choice == e.label;
    }
    EXPECT_DOUBLE_EQ(r.accuracy, right / 3.0);
    // --limit reads the first rows only.
    EXPECT_EQ(read_task_data("sst2", dir / "dev.tsv", {.limit = 2}).examples.size(), 2u);
}

// The harness moves the context's trailing spaces to the continuation: "A " + "b"
// is scored as "A" + " b".
TEST(Tasks, TrailingSpacesMoveToTheContinuation)
{
    TempDir dir;
    std::ofstream(dir / "a.jsonl")
        << R"({"context": "Once upon a ", "choices": ["time", "dog"], "label": 0})"
        << "\n"
        << R"({"context": "Once upon a", "choices": [" time", " dog"], "label": 0})"
        << "\n";
    auto data = read_task_data("mc", dir / "a.jsonl");
    ASSERT_EQ(data.examples.size(), 2u);
    EXPECT_EQ(data.examples[0].continuations[0], " time"); // " " + choice
    // Example 0 as written: context "Once upon a " + " time" = "Once upon a  time" with the space moved.
    data.examples[0].continuations = {"time", "dog"};
    data.examples[1].continuations = {" time", " dog"};
    const auto& lm = bundled();
    const auto r = evaluate_task(*lm.model, *lm.tokenizer, data);
    EXPECT_EQ(r.examples[0].loglik, r.examples[1].loglik);
}

TEST(Tasks, MultipleChoiceAccNormDividesByCharacters)
{
    TempDir dir;
    std::ofstream(dir / "mc.jsonl")
        << R"({"context": "The cat sat on the", "choices": ["mat", "moon and the stars"], "label": 0})"
        << "\n";
    const auto& lm = bundled();
    const auto r = evaluate_task(*lm.model, *lm.tokenizer, read_task_data("mc", dir / "mc.jsonl"));
    const auto& e = r.examples[0];
    const double short_norm = e.loglik[0] / 4.0,
                 long_norm = e.loglik[1] / 19.0; // " mat", " moon and the stars"
    EXPECT_EQ(e.choice_norm, long_norm > short_norm ? 1 : 0);
    EXPECT_EQ(e.choice, e.loglik[1] > e.loglik[0] ? 1 : 0);
}

TEST(Tasks, RankCorrelation)
{
    EXPECT_DOUBLE_EQ(spearman_correlation({1, 2, 3, 4}, {10, 20, 30, 45}), 1.0);
    EXPECT_DOUBLE_EQ(spearman_correlation({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
    // Ties take the mean rank: x ranks 1, 2.5, 2.5, 4 against 1, 2, 3, 4.
    const double expected = 4.5 / std::sqrt(4.5 * 5.0);
    EXPECT_NEAR(spearman_correlation({1, 2, 2, 3}, {1, 2, 3, 4}), expected, 1e-15);
    EXPECT_NEAR(pearson_correlation({1, 2, 3}, {2, 4, 7}), 0.9933992677987828, 1e-15);
}

TEST(Tasks, StsbCosineOfPooledHiddenStates)
{
    TempDir dir;
    std::ofstream(dir / "dev.tsv") << "index\tsentence1\tsentence2\tscore\n"
                                   << "0\tA man is dancing.\tA man is dancing.\t5.000\n"
                                   << "1\tA child rides a horse.\tA man plays a guitar.\t0.500\n"
                                   << "2\tA dog runs.\tA dog is running.\t4.200\n";
    const auto pairs = read_sentence_pairs(dir / "dev.tsv");
    ASSERT_EQ(pairs.size(), 3u);
    const auto& lm = bundled();
    const auto r = evaluate_similarity(*lm.model, *lm.tokenizer, pairs);
    EXPECT_NEAR(r.cosines[0], 1.0, 1e-12); // the same sentence twice
    // Pair 2 by hand: the cosine of the token means of the final hidden states.
    c10::InferenceMode guard;
    auto mean_of = [&](const std::string& s) {
        const auto ids = lm.tokenizer->encode(s);
        return lm.model
            ->hidden_states(torch::tensor(std::vector<int64_t>(ids.begin(), ids.end())).unsqueeze(0))[0]
            .to(torch::kDouble)
            .mean(0);
    };
    const auto a = mean_of("A dog runs."), b = mean_of("A dog is running.");
    EXPECT_NEAR(r.cosines[2], (a.dot(b) / (a.norm() * b.norm())).item<double>(), 1e-12);
    EXPECT_DOUBLE_EQ(r.spearman, spearman_correlation(r.cosines, {5.0, 0.5, 4.2}));
}

// Gold scores that are all equal leave Spearman and Pearson undefined (no variance
// to correlate with): refused, not reported as correlation 0.0000 (issue 57 item 11).
TEST(Tasks, StsbConstantGoldScoresAreRefused)
{
    const std::vector<SentencePair> pairs{{"A man is dancing.", "A man is dancing.", 2.5},
                                          {"A child rides a horse.", "A man plays a guitar.", 2.5},
                                          {"A dog runs.", "A dog is running.", 2.5}};
    const auto& lm = bundled();
    test::expect_input_error([&] { evaluate_similarity(*lm.model, *lm.tokenizer, pairs); },
                             "every gold score is 2.5 (3 pairs)");
    test::expect_input_error([&] { evaluate_similarity(*lm.model, *lm.tokenizer, pairs); }, "undefined");
}

// Bad input: one clear line naming the file (and line), exit 2; good input: JSON
// with the contract's fields; a model against itself agrees on every example.
TEST(TaskCli, RunsAndRefusesBadData)
{
    TempDir dir;
    std::ofstream(dir / "dev.tsv") << kSst2;
    std::ofstream(dir / "empty.tsv").close();
    std::ofstream(dir / "nolabel.tsv") << "sentence\tscore\nfine\t1\n";
    std::ofstream(dir / "badlabel.jsonl") << R"({"context": "x", "choices": ["a", "b"], "label": 2})"
                                          << "\n";
    const std::string model = default_model_path().string();
    const auto r = cli({"task", "sst2", model, "--data", (dir / "dev.tsv").string(), "--reference", model,
                        "--out", (dir / "rows.jsonl").string(), "--json", "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["n"], 3);
    EXPECT_EQ(j["agreement"], 1.0);
    EXPECT_EQ(j["accuracy"], j["reference_accuracy"]);
    std::ifstream rows(dir / "rows.jsonl");
    int lines = 0;
    for (std::string line; std::getline(rows, line); ++lines)
        EXPECT_EQ(nlohmann::json::parse(line)["loglik"].size(), 2u);
    EXPECT_EQ(lines, 3);
    struct Case {
        std::vector<std::string> args;
        std::string needle;
    };
    const std::vector<Case> cases{
        {{"task", "sst2", "--data", (dir / "empty.tsv").string()}, "empty.tsv: the file is empty"},
        {{"task", "sst2", "--data", (dir / "nolabel.tsv").string()}, "no 'label' column"},
        {{"task", "mc", "--data", (dir / "badlabel.jsonl").string()}, "badlabel.jsonl:1: \"label\" must be"},
        {{"task", "piqa", "--data", (dir / "dev.tsv").string()}, "unknown task 'piqa'"},
        {{"task", "sst2"}, "--data FILE is required"},
        {{"task", "sst2", "--data", (dir / "dev.tsv").string(), "--reference",
          std::string(EMBEDLAB_SOURCE_DIR) + "/resources/models/stories260K.gguf"},
         "different vocabularies"},
    };
    for (const auto& c : cases) {
        const auto bad = test::cli_here(c.args);
        EXPECT_EQ(bad.exit_code, 2) << bad.err;
        EXPECT_NE(bad.err.find(c.needle), std::string::npos) << bad.err << "wanted: " << c.needle;
        EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    }
}

} // namespace
} // namespace embedlab
