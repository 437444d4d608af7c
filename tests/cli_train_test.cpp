// embedlab-cli train (issue 20 item 12): a few steps of the tiny config with PETE's
// Fourier embedding, the JSON record, eval of the saved directory at the same
// perplexity, finetune of that directory training the MLP itself, and bad input
// (exit code 2, one line). Bundled files only (GPT-2's tokenizer, the sample text).
#include <chrono>
#include <cmath>
#include <csignal>

#include <poll.h>
#include <unistd.h>

#include "cli_in_process.hpp"
#include "cli_support.hpp"
#include "embedlab/resources.hpp"

using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::json_of;
namespace fs = std::filesystem;

namespace {

class TrainCli : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        tmp_ = new embedlab::test::TempDir;
        texts_ = new embedlab::test::TextSlices(30000, 6000);
        record_ = new nlohmann::json(json_of(cli({"train",
                                                  "--config",
                                                  "tiny",
                                                  "--embedding",
                                                  "fourier:linear",
                                                  "--train-text",
                                                  texts_->fit,
                                                  "--steps",
                                                  "3",
                                                  "--batch",
                                                  "2",
                                                  "--seqlen",
                                                  "32",
                                                  "--seed",
                                                  "3",
                                                  "--eval-text",
                                                  texts_->eval,
                                                  "--out",
                                                  trained().string(),
                                                  "--json",
                                                  "--quiet"})));
    }
    static void TearDownTestSuite()
    {
        delete record_;
        delete texts_;
        delete tmp_;
    }
    static fs::path trained() { return *tmp_ / "tiny-fourier"; }
    static embedlab::test::TempDir* tmp_;
    static embedlab::test::TextSlices* texts_;
    static nlohmann::json* record_;
};
embedlab::test::TempDir* TrainCli::tmp_ = nullptr;
embedlab::test::TextSlices* TrainCli::texts_ = nullptr;
nlohmann::json* TrainCli::record_ = nullptr;

TEST_F(TrainCli, RecordsTheRunAndEvalReadsTheSamePerplexity)
{
    const auto& j = *record_;
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["out"], trained().string());
    EXPECT_EQ(j["config"]["name"], "tiny");
    EXPECT_EQ(j["config"]["d"], 128);
    EXPECT_EQ(j["config"]["layers"], 4);
    EXPECT_EQ(j["embedding"]["kind"], "fourier:linear");
    EXPECT_EQ(j["embedding_parameters"], 128 * 128 + 128 + 128); // w_in, b_in, norm: no per-token values
    EXPECT_EQ(j["steps"], 3);
    EXPECT_EQ(j["planned_steps"], 3);
    EXPECT_EQ(j["stopped_by"], "steps");
    EXPECT_EQ(j["tokens"], 3 * 2 * 32);
    EXPECT_GT(j["tokens_per_second"].get<double>(), 0);
    EXPECT_EQ(j["loss_curve"].size(), 3u);
    EXPECT_EQ(j["train_text"]["tokens"].get<int64_t>() > 0, true);
    const double ppl = j["evaluation"]["ppl"].get<double>();
    EXPECT_TRUE(std::isfinite(ppl));
    EXPECT_TRUE(fs::exists(trained() / "embedlab.json"));
    EXPECT_TRUE(fs::exists(trained() / "training.json"));

    const auto inspect = json_of(cli({"inspect", trained().string(), "--json"}));
    ASSERT_FALSE(inspect.is_null());
    const auto e = json_of(cli({"eval", trained().string(), "--text", texts_->eval, "--json", "--quiet"}));
    ASSERT_FALSE(e.is_null());
    EXPECT_NEAR(e["ppl"].get<double>(), ppl, 1e-6 * ppl);
}

TEST_F(TrainCli, FinetuneOfAFourierModelTrainsTheMlpItself)
{
    const fs::path out = *tmp_ / "mlp";
    const auto j = json_of(
        cli({"finetune", trained().string(), "--train-text", texts_->fit, "--steps", "2", "--batch", "2",
             "--seqlen", "32", "--targets", "embedding", "--out", out.string(), "--json", "--quiet"}));
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["mode"], "fourier-mlp");
    EXPECT_EQ(j["embedding_params"]["before"], j["embedding_params"]["after"]);
    EXPECT_EQ(j["embedding_params"]["after"], 128 * 128 + 128 + 128);
    EXPECT_EQ(j["params"]["before"], j["params"]["after"]);
    EXPECT_FALSE(fs::exists(out / "adapters.safetensors"));
    const auto inspect = json_of(cli({"inspect", out.string(), "--json"}));
    ASSERT_FALSE(inspect.is_null());
}

// No fixture: bad input needs no trained model (each ctest case is a process of its own).
// --arch bert: a masked-LM encoder with the fixtures' WordPiece tokenizer; its record
// carries the pseudo-perplexity that eval of the saved directory reads again.
TEST(TrainCliBert, MaskedLmRecordAndEvalAgree)
{
    embedlab::test::TempDir tmp;
    const embedlab::test::TextSlices texts(30000, 4000);
    const std::string tokenizer =
        std::string(EMBEDLAB_SOURCE_DIR) + "/tests/data/encoders/tokenizers/uncased";
    const fs::path out = tmp / "tiny-bert";
    const auto j = json_of(
        cli({"train",       "--arch",     "bert",         "--config",    "tiny",     "--embedding", "fourier",
             "--tokenizer", tokenizer,    "--train-text", texts.fit,     "--steps",  "2",           "--batch",
             "2",           "--seqlen",   "30",           "--eval-text", texts.eval, "--ctx",       "32",
             "--out",       out.string(), "--json",       "--quiet"}));
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["config"]["arch"], "bert");
    EXPECT_EQ(j["options"]["objective"], "mlm");
    EXPECT_EQ(j["options"]["mask_rate"], 0.15);
    const double ppl = j["evaluation"]["pseudo_ppl"].get<double>();
    EXPECT_GT(j["evaluation"]["masked"].get<int64_t>(), 100);
    const auto e =
        json_of(cli({"eval", out.string(), "--text", texts.eval, "--ctx", "32", "--json", "--quiet"}));
    ASSERT_FALSE(e.is_null());
    EXPECT_NEAR(e["pseudo_ppl"].get<double>(), ppl, 1e-6 * ppl);
    const auto inspect = json_of(cli({"inspect", out.string(), "--json"}));
    ASSERT_FALSE(inspect.is_null());
    EXPECT_EQ(inspect["architecture"], "bert");
    EXPECT_EQ(inspect["parameters"]["counts"]["token_embedding"], 128 * 128 + 128 + 128); // PETE's MLP only
}

TEST(TrainCliBadInput, ExitsWithTwoAndOneLine)
{
    embedlab::test::TempDir tmp;
    const embedlab::test::TextSlices texts(30000, 6000);
    const auto* tmp_ = &tmp;
    const auto* texts_ = &texts;
    const fs::path empty = *tmp_ / "empty.txt";
    std::ofstream(empty).close();
    auto expect_error = [&](std::vector<std::string> extra, const std::string& part) {
        std::vector<std::string> a{"train", "--train-text", texts_->fit, "--out", (*tmp_ / "bad").string()};
        a.insert(a.end(), extra.begin(), extra.end());
        const auto r = cli_here(a);
        EXPECT_EQ(r.exit_code, 2) << part << ": " << r.err;
        EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    };
    expect_error({"--config", "huge", "--embedding", "table", "--minutes", "1"}, "unknown config 'huge'");
    expect_error({"--config", "tiny", "--embedding", "hash", "--minutes", "1"}, "unknown embedding 'hash'");
    expect_error({"--config", "tiny", "--embedding", "table", "--minutes", "0"},
                 "--minutes must be a positive");
    expect_error({"--config", "tiny", "--embedding", "table"}, "--minutes M (training time) or --steps N");
    expect_error({"--config", "tiny", "--embedding", "table", "--steps", "2", "--train-text", empty.string()},
                 "empty");
    expect_error({"--arch", "bert", "--config", "tiny", "--embedding", "table", "--steps", "1"},
                 "--arch bert needs --tokenizer DIR");
    expect_error({"--arch", "bert", "--config", "tiny", "--embedding", "table", "--steps", "1", "--tokenizer",
                  embedlab::default_model_path().string()},
                 "needs the tokenizer's [CLS] token");
    expect_error({"--arch", "t5", "--config", "tiny", "--embedding", "table", "--steps", "1"},
                 "unknown arch 't5'");
    expect_error({"--config", "tiny", "--embedding", "table", "--steps", "1", "--mask-rate", "0.2"},
                 "--mask-rate is for --objective mlm");
    EXPECT_FALSE(fs::exists(*tmp_ / "bad"));
    // An existing directory train did not write is never replaced.
    const auto r = cli_here({"train", "--config", "tiny", "--embedding", "table", "--steps", "1",
                             "--train-text", texts_->fit, "--out", tmp_->path().string(), "--force"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
}

// Issue 57 item 8: a run the memory cannot hold (here an address-space limit of
// 1.2 GB) is refused before any work, naming the estimate and the memory.
TEST(TrainCliLimits, RefusesWhatMemoryCannotHold)
{
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "ASan's shadow memory needs far more address space than ulimit -v leaves";
#endif
    embedlab::test::TempDir tmp;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = cli({"train", "--config", "small", "--embedding", "table", "--train-text",
                        embedlab::default_sample_text_path().string(), "--steps", "1", "--batch", "65536",
                        "--seqlen", "256", "--out", (tmp / "out").string()},
                       {"sh", "-c", "ulimit -v 1200000 && exec \"$0\" \"$@\""});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("train: batch 65536 x seqlen 256 needs about "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" GB (estimate), this machine has 1.2 GB available; lower --batch or --seqlen"),
              std::string::npos)
        << r.err;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
    EXPECT_FALSE(fs::exists(tmp / "out"));
}

// SIGTERM after the first progress line (within seconds of the start) ends a run
// of 32 x 256-token steps (about 9 s each in one pass) within seconds, status 130.
TEST(TrainCliLimits, SigtermIsAnsweredPromptly)
{
    embedlab::test::TempDir tmp;
    const std::string cli_path = EMBEDLAB_CLI_PATH, text = embedlab::default_sample_text_path().string(),
                      out = (tmp / "out").string();
    int err[2];
    ASSERT_EQ(::pipe(err), 0);
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::dup2(err[1], 2);
        ::close(err[0]);
        ::execl(cli_path.c_str(), cli_path.c_str(), "train", "--config", "small", "--embedding", "table",
                "--train-text", text.c_str(), "--steps", "100", "--batch", "32", "--seqlen", "256", "--out",
                out.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(err[1]);
    auto seconds = [](auto since) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
    };
    pollfd p{err[0], POLLIN, 0}; // the first line of progress
    const bool spoke = ::poll(&p, 1, 30'000) == 1;
    const double first = seconds(t0);
    const auto sent = std::chrono::steady_clock::now();
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const double stop = seconds(sent);
    ::close(err[0]);
    EXPECT_TRUE(spoke);
    EXPECT_LT(first, 10.0);
    EXPECT_LT(stop, 5.0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << status;
    EXPECT_FALSE(fs::exists(out));
}

} // namespace
