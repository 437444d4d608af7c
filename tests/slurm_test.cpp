// sweep --slurm on a real single-node Slurm (scripts/slurm-local.sh, issue 22):
// rows equal the local sweep's, a killed task is reported failed and resubmitted,
// refusals are one line. One Slurm for the suite (the ctest RESOURCE_LOCK keeps the
// slurm tests one at a time); skipped where the packages are missing.
#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "cli_support.hpp"
#if defined(EMBEDLAB_TEST_WORKBENCH)
#include "analyses.hpp"
#include "model_summary.hpp"
#endif

namespace fs = std::filesystem;
using embedlab::test::cli;
using embedlab::test::CliRun;
using embedlab::test::json_of;
using embedlab::test::quote;

namespace {

const std::string kScript = std::string(EMBEDLAB_SOURCE_DIR) + "/scripts/slurm-local.sh";

// The script's environment: its own directory, ports away from a dev instance,
// a small MaxArraySize so the refusal is cheap to reach, and array tasks started as
// soon as they can be (Slurm's default batch_sched_delay lets each wait up to 3 s).
std::string slurm_env(const fs::path& dir)
{
    return "EMBEDLAB_SLURM_DIR=" + quote(dir.string()) +
           " EMBEDLAB_SLURM_PORT=17817 EMBEDLAB_SLURM_MAX_ARRAY_SIZE=8"
           " EMBEDLAB_SLURM_SCHEDULER_PARAMETERS=batch_sched_delay=0 ";
}

// One Slurm for the suite's cases: starting and stopping it (its daemons take about
// 5 s to stop) was a third of each case's time. Each case keeps a directory of its own.
class SlurmSweep : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        suite_dir_ = new embedlab::test::TempDir;
        slurm_dir_ = *suite_dir_ / "slurm";
        const std::string cmd = slurm_env(slurm_dir_) + "bash " + quote(kScript) + " start >" +
                                quote((*suite_dir_ / "start.out").string()) + " 2>" +
                                quote((*suite_dir_ / "start.err").string());
        const int status = std::system(cmd.c_str());
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        const std::string err = embedlab::test::read_text(*suite_dir_ / "start.err");
        if (code == 3) {
            skip_reason_ = "no local Slurm: " + err;
            return;
        }
        if (code != 0) {
            start_error_ = "scripts/slurm-local.sh start failed: " + err;
            return;
        }
        started_ = true;
        ::setenv("SLURM_CONF", (slurm_dir_ / "slurm.conf").c_str(), 1);
    }
    static void TearDownTestSuite()
    {
        if (started_) {
            const std::string cmd =
                slurm_env(slurm_dir_) + "bash " + quote(kScript) + " stop >/dev/null 2>&1";
            EXPECT_EQ(std::system(cmd.c_str()), 0);
            ::unsetenv("SLURM_CONF");
        }
        started_ = false;
        delete suite_dir_;
        suite_dir_ = nullptr;
    }
    void SetUp() override
    {
        if (!skip_reason_.empty())
            GTEST_SKIP() << skip_reason_;
        ASSERT_TRUE(started_) << start_error_;
        text_ = (dir_ / "eval.txt").string();
        const auto all = embedlab::test::read_text(fs::path(EMBEDLAB_SOURCE_DIR) /
                                                   "resources/texts/tinystories-heldout.txt");
        std::ofstream(text_) << all.substr(0, 8000);
        freq_ = (dir_ / "freq.txt").string();
        std::ofstream(freq_) << all.substr(8000, 20000);
    }

    // The local and the Slurm sweep of the same points: equal rows, each Slurm row
    // naming its array job, task and node.
    void expect_same_rows(const std::vector<std::string>& points, const std::vector<const char*>& keys)
    {
        std::vector<std::string> common = {"sweep", "--eval-text", text_, "--ctx", "64", "--json", "--quiet"};
        common.insert(common.end(), points.begin(), points.end());
        const auto local = json_of(cli(common));
        auto slurm_args = common;
        const auto sweep_dir = (dir_ / "sweep").string();
        slurm_args.insert(slurm_args.end(), {"--slurm", "--sweep-dir", sweep_dir});
        const auto slurm = json_of(cli(slurm_args));
        ASSERT_TRUE(local.is_object() && slurm.is_object());
        ASSERT_EQ(slurm["rows"].size(), local["rows"].size());
        EXPECT_TRUE(slurm["failed"].empty());
        EXPECT_EQ(slurm["baseline_ppl"], local["baseline_ppl"]);
        for (size_t i = 0; i < local["rows"].size(); ++i) {
            const auto& l = local["rows"][i];
            const auto& s = slurm["rows"][i];
            for (const char* key : keys)
                EXPECT_EQ(s[key], l[key]) << "row " << i << " " << key;
            EXPECT_FALSE(s["slurm_job_id"].get<std::string>().empty());
            EXPECT_EQ(s["slurm_array_task_id"], i);
            EXPECT_FALSE(s["node"].get<std::string>().empty());
            EXPECT_TRUE(s["host"].contains("hostname"));
        }
        // The results files (results.hpp): a header and one line per row.
        const auto csv = embedlab::test::read_text(fs::path(sweep_dir) / "results.csv");
        EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), static_cast<long>(local["rows"].size() + 1));
    }

    static inline embedlab::test::TempDir* suite_dir_ = nullptr;
    static inline fs::path slurm_dir_;
    static inline bool started_ = false;
    static inline std::string skip_reason_, start_error_;
    embedlab::test::TempDir dir_;
    std::string text_, freq_;
};

TEST_F(SlurmSweep, PcaRowsEqualTheLocalSweep)
{
    expect_same_rows(
        {"--method", "pca", "--ranks", "4,16,64"},
        {"method", "rank", "params", "ratio", "explained_variance", "mean_cosine", "ppl", "delta_ln_ppl"});
}

TEST_F(SlurmSweep, LleRowsEqualTheLocalSweep)
{
    expect_same_rows({"--method", "lle", "--freq-text", freq_, "--keep-ratios", "0.5", "--ks", "4,8"},
                     {"method", "k", "keep_ratio", "params", "ratio", "mean_cosine", "rare_mean_cosine",
                      "token_coverage", "ppl"});
}

TEST_F(SlurmSweep, AKilledTaskIsReportedFailedAndResubmittedAlone)
{
    const auto sweep_dir = dir_ / "sweep";
    // One task at a time, each long enough (stride 16: four times the windows) to be killed mid-way.
    const CliRun submit = cli({"sweep", "--method", "pca", "--ranks", "8,16", "--eval-text", text_, "--ctx",
                               "64", "--stride", "16", "--slurm", "--sweep-dir", sweep_dir.string(),
                               "--array-limit", "1", "--no-wait", "--quiet"});
    ASSERT_EQ(submit.exit_code, 0) << submit.err;
    EXPECT_EQ(submit.out, sweep_dir.string() + "\n");
    const auto manifest = nlohmann::json::parse(embedlab::test::read_text(sweep_dir / "manifest.json"));
    const std::string job = manifest["submissions"][0]["job_id"];
    // Wait for task 0's worker to report progress, then kill it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (embedlab::test::read_text(sweep_dir / "logs/task-0.out").find("\"progress\"") ==
           std::string::npos) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "task 0 never started";
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_EQ(std::system(("scancel " + job + "_0").c_str()), 0);

    const CliRun collected = cli({"sweep-collect", sweep_dir.string(), "--json", "--quiet"});
    EXPECT_EQ(collected.exit_code, 1) << collected.err;
    const auto partial = nlohmann::json::parse(collected.out);
    ASSERT_EQ(partial["rows"].size(), 1u);
    EXPECT_EQ(partial["rows"][0]["slurm_array_task_id"], 1);
    ASSERT_EQ(partial["failed"].size(), 1u);
    EXPECT_EQ(partial["failed"][0]["task"], 0);
    EXPECT_NE(collected.err.find("--resubmit-failed"), std::string::npos) << collected.err;
    const auto status = json_of(cli({"sweep-status", sweep_dir.string(), "--json"}));
    EXPECT_EQ(status["tasks"][0]["state"], "failed");
    EXPECT_EQ(status["tasks"][1]["state"], "done");

    // Only task 0 runs again, as a new array job; then every row is there.
    const auto again =
        json_of(cli({"sweep-collect", sweep_dir.string(), "--resubmit-failed", "--json", "--quiet"}));
    ASSERT_EQ(again["rows"].size(), 2u);
    EXPECT_TRUE(again["failed"].empty());
    EXPECT_NE(again["rows"][0]["slurm_job_id"], job);
    EXPECT_EQ(again["rows"][1]["slurm_job_id"], job);
    EXPECT_LT(again["rows"][0]["ppl"].get<double>() / again["rows"][1]["ppl"].get<double>(), 10.0);
}

// One clear line, exit 2, and no sweep directory: beyond MaxArraySize (8 here),
// and a directory that cannot be written.
TEST_F(SlurmSweep, RefusalsAreOneLineAndWriteNothing)
{
    const auto sweep_dir = dir_ / "too-big";
    const CliRun big = cli({"sweep", "--method", "pca", "--ranks", "1,2,3,4,5,6,7,8,9", "--eval-text", text_,
                            "--slurm", "--sweep-dir", sweep_dir.string()});
    EXPECT_EQ(big.exit_code, 2);
    EXPECT_NE(big.err.find("MaxArraySize is 8"), std::string::npos) << big.err;
    EXPECT_EQ(std::count(big.err.begin(), big.err.end(), '\n'), 1) << big.err;
    EXPECT_FALSE(fs::exists(sweep_dir));

    const CliRun unwritable = cli({"sweep", "--method", "pca", "--ranks", "4", "--eval-text", text_,
                                   "--slurm", "--sweep-dir", "/proc/embedlab-sweep"});
    EXPECT_EQ(unwritable.exit_code, 2);
    EXPECT_NE(unwritable.err.find("/proc/embedlab-sweep: cannot create the sweep directory"),
              std::string::npos)
        << unwritable.err;
    EXPECT_EQ(std::count(unwritable.err.begin(), unwritable.err.end(), '\n'), 1) << unwritable.err;
}

#if defined(EMBEDLAB_TEST_WORKBENCH)
// Issue 22 item 4: the workbench's "Slurm cluster" runs a row as a one-task array,
// says its state while it waits, and gets the numbers a local run gets.
TEST_F(SlurmSweep, TheWorkbenchRunsARowAsASlurmTask)
{
    ::setenv("EMBEDLAB_SWEEP_DIR", (dir_ / "workbench").c_str(), 1);
    const embedlab::CompressionRequest request{.model = embedlab::app::default_model(),
                                               .method = "pca",
                                               .rank = 16,
                                               .eval_text = text_,
                                               .eval_tokens = 512};
    const auto local = embedlab::app::compress_and_evaluate(request);
    const embedlab::app::RunTarget slurm_target{.slurm = true, .slurm_time = "00:10:00"};
    std::vector<std::string> states;
    const auto slurm = embedlab::app::compress_and_evaluate(
        request, slurm_target, {}, [&](const std::string& s) { states.push_back(s); });
    ::unsetenv("EMBEDLAB_SWEEP_DIR");
    EXPECT_EQ(slurm.params_after, local.params_after);
    EXPECT_EQ(slurm.ppl, local.ppl);
    EXPECT_EQ(slurm.ppl_original, local.ppl_original);
    EXPECT_EQ(slurm.mean_cosine, local.mean_cosine);
    ASSERT_FALSE(states.empty());
    EXPECT_EQ(states.front().rfind("Slurm ", 0), 0u) << states.front();
    EXPECT_NE(states.back().find(": done"), std::string::npos) << states.back();
    // The numbers are in the row: the task's directory is gone.
    EXPECT_TRUE(fs::is_empty(dir_ / "workbench"));
}
#endif

} // namespace

// Without Slurm's tools on PATH: one line naming sbatch, exit 2 (no Slurm needed).
TEST(SlurmTools, AMissingSbatchIsOneClearLine)
{
    embedlab::test::TempDir dir;
    const auto text = (dir / "eval.txt").string();
    std::ofstream(text) << "Once upon a time there was a little dog.";
    const std::string cmd = "env PATH=/nonexistent " + quote(EMBEDLAB_CLI_PATH) +
                            " sweep --method pca --ranks 4 --eval-text " + quote(text) +
                            " --slurm --sweep-dir " + quote((dir / "sweep").string()) + " >/dev/null 2>" +
                            quote((dir / "err").string());
    const int status = std::system(cmd.c_str());
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2);
    const auto err = embedlab::test::read_text(dir / "err");
    EXPECT_NE(err.find("sbatch not found on PATH"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_FALSE(fs::exists(dir / "sweep"));
}
