// embedlab-cli finetune on tinygpt2: the JSON record, export and reload (adapters
// stored or merged) at the same perplexity, the lrf baseline, bad input and a
// cancelled run.
#include <algorithm>
#include <cmath>

#include "cli_in_process.hpp"
#include "cli_support.hpp"

using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::json_of;
namespace fs = std::filesystem;

namespace {

// One pca k = 16 directory and two text slices for every case.
class FinetuneCli : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        if (!embedlab::test::have_shared())
            return;
        tmp_ = new embedlab::test::TempDir;
        texts_ = new embedlab::test::TextSlices(40000, 6000);
        const auto r = cli({"compress", model().string(), "--method", "pca", "--rank", "16", "--out",
                            pca().string(), "--quiet"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    static void TearDownTestSuite()
    {
        delete texts_;
        delete tmp_;
    }
    void SetUp() override { EMBEDLAB_REQUIRE_SHARED(); }

    static fs::path model() { return embedlab::test::shared_dir() / "models" / "tinygpt2"; }
    static fs::path pca() { return *tmp_ / "pca16"; }
    static std::vector<std::string> finetune(const fs::path& out, std::vector<std::string> extra)
    {
        std::vector<std::string> a{
            "finetune", pca().string(), "--train-text", texts_->fit,  "--steps", "4",          "--batch", "2",
            "--seqlen", "64",           "--eval-text",  texts_->eval, "--out",   out.string(), "--quiet"};
        // An extra option the defaults already give replaces its value: the CLI refuses
        // an option given twice.
        for (std::size_t i = 0; i < extra.size(); ++i) {
            const auto given = std::find(a.begin() + 2, a.end(), extra[i]);
            if (extra[i].starts_with("--") && given != a.end() && given + 1 != a.end() &&
                i + 1 < extra.size()) {
                *(given + 1) = extra[++i];
                continue;
            }
            a.push_back(extra[i]);
        }
        return a;
    }
    static double eval_ppl(const fs::path& dir)
    {
        const auto j = json_of(cli({"eval", dir.string(), "--text", texts_->eval, "--json", "--quiet"}));
        return j.is_null() ? NAN : j["ppl"].get<double>();
    }
    static embedlab::test::TempDir* tmp_;
    static embedlab::test::TextSlices* texts_;
};
embedlab::test::TempDir* FinetuneCli::tmp_ = nullptr;
embedlab::test::TextSlices* FinetuneCli::texts_ = nullptr;

TEST_F(FinetuneCli, RecordsTrainingAndReloadsAtTheSamePerplexity)
{
    const auto j = json_of(cli(finetune(*tmp_ / "lora", {"--json"})));
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["mode"], "lora");
    EXPECT_EQ(j["method"], "pca");
    EXPECT_EQ(j["merged"], false);
    EXPECT_EQ(j["training"]["loss_curve"].size(), 4u);
    EXPECT_EQ(j["training"]["tokens"], 4 * 2 * 64);
    EXPECT_GT(j["tokens_per_second"].get<double>(), 0);
    EXPECT_EQ(j["lora"]["rank"], 32);
    EXPECT_EQ(j["lora"]["alpha"], 64);
    // 4 layers x (q, k, v, o, fc, proj) + Z and P; the embedding adapters are capped at k = 16.
    EXPECT_EQ(j["lora"]["adapters"].size(), 26u);
    EXPECT_EQ(j["lora"]["adapters"]["embedding.Z"]["B"], (std::vector<int64_t>{50257, 16}));
    const double before = j["evaluation"]["before"]["ppl"], after = j["evaluation"]["after"]["ppl"];
    EXPECT_NE(before, after);
    EXPECT_NEAR(eval_ppl(*tmp_ / "lora"), after, 1e-4 * after);

    const auto m = json_of(cli(finetune(*tmp_ / "merged", {"--json", "--merge"})));
    ASSERT_FALSE(m.is_null());
    EXPECT_EQ(m["lora"]["merged"], true);
    EXPECT_FALSE(fs::exists(*tmp_ / "merged" / "adapters.safetensors"));
    EXPECT_EQ(m["evaluation"]["after"]["ppl"], after); // seeded: the same run
    EXPECT_NEAR(eval_ppl(*tmp_ / "merged"), after, 1e-4 * after);
    EXPECT_EQ(m["params"]["after"], m["params"]["before"]); // merged: no extra values
}

TEST_F(FinetuneCli, FromScratchIsTheLrfBaseline)
{
    const auto j = json_of(cli(finetune(*tmp_ / "lrf", {"--json", "--from-scratch", "--merge"})));
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["mode"], "lrf");
    EXPECT_EQ(j["lora"]["adapters"].count("embedding.Z"), 0u);
    const auto manifest = nlohmann::json::parse(embedlab::test::read_text(*tmp_ / "lrf" / "embedlab.json"));
    EXPECT_EQ(manifest["method"], "lrf");
    EXPECT_EQ(manifest["parameters"]["rank"], 16);
    EXPECT_NEAR(eval_ppl(*tmp_ / "lrf"), j["evaluation"]["after"]["ppl"].get<double>(),
                1e-4 * j["evaluation"]["after"]["ppl"].get<double>());
}

TEST_F(FinetuneCli, BadInputNamesTheProblem)
{
    auto expect = [](const std::vector<std::string>& args, const std::string& part) {
        const auto r = cli_here(args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
    };
    auto with = [&](std::vector<std::string> extra) { return finetune(*tmp_ / "bad", std::move(extra)); };
    expect(with({"--lr", "0"}), "learning rate must be a positive number");
    expect(with({"--lr", "-0.1"}), "learning rate must be a positive number");
    auto zero = with({});
    zero[5] = "0"; // --steps 0
    expect(zero, "steps must be at least 1");
    auto short_text = with({"--batch", "64", "--seqlen", "256"});
    expect(short_text, "is shorter than one batch");
    auto dense = with({});
    dense[1] = model().string();
    expect(dense, "is not an EmbedLab compressed model directory");
    EXPECT_FALSE(fs::exists(*tmp_ / "bad"));
}

// SIGINT during training: exit 130 and the earlier output directory untouched.
TEST_F(FinetuneCli, CancelledRunLeavesThePreviousOutput)
{
    const fs::path out = *tmp_ / "keep";
    ASSERT_EQ(cli(finetune(out, {"--steps", "2"})).exit_code, 0);
    const auto manifest = embedlab::test::read_text(out / "embedlab.json");
    std::string cmd = "timeout --preserve-status -s INT 5 " + embedlab::test::quote(EMBEDLAB_CLI_PATH);
    for (const auto& a : finetune(out, {"--steps", "100000000", "--force"})) {
        cmd += ' '; // not " " + quote(a): GCC 12's false -Wstringop-overflow
        cmd += embedlab::test::quote(a);
    }
    const int status = std::system((cmd + " >/dev/null 2>&1").c_str());
    EXPECT_EQ(WEXITSTATUS(status), 130);
    EXPECT_EQ(embedlab::test::read_text(out / "embedlab.json"), manifest);
    EXPECT_GT(eval_ppl(out), 1.0); // still loads (sha256 verified)
}

TEST_F(FinetuneCli, BenchTrainPrintsTokensPerSecond)
{
    const auto j = json_of(cli({"bench", "train", "--model", model().string(), "--steps", "2", "--batch", "2",
                                "--seqlen", "32", "--json"}));
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["tokens"], 2 * 2 * 32);
    EXPECT_GT(j["tokens_per_second"].get<double>(), 0);
    EXPECT_EQ(j["embedding"], "pca");
}

} // namespace
