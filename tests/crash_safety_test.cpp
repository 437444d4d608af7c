// Crash safety (issue 9): a compression killed with SIGKILL at random points
// leaves the previous complete result (or a new complete one), never a broken
// directory, and its temporaries are cleaned by the next run; stale
// temporaries of dead processes are removed; a compressed directory whose
// tensors changed after writing is refused by its recorded sha256.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "embedlab/file_output.hpp"
#include "embedlab/model.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kModel = std::string(EMBEDLAB_SOURCE_DIR) + "/resources/models/tinygpt2-f16";

pid_t spawn_cli(const std::vector<std::string>& args)
{
    std::vector<std::string> all{EMBEDLAB_CLI_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::dup2(null, 2);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    return pid;
}

int wait_for(pid_t pid)
{
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
}

std::vector<std::string> compress_args(const fs::path& out, int rank)
{
    return {"compress", kModel,       "--method", "pca",     "--rank", std::to_string(rank),
            "--out",    out.string(), "--force",  "--dense", "--quiet"};
}

// Everything beside `dir` that starts with its name: temporaries or leftovers.
std::vector<std::string> siblings(const fs::path& dir)
{
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir.parent_path()))
        if (e.path().filename().string().rfind(dir.filename().string(), 0) == 0 && e.path() != dir)
            out.push_back(e.path().filename().string());
    return out;
}

// A pid that no process has: a child that has exited and been reaped.
pid_t dead_pid()
{
    const pid_t pid = ::fork();
    if (pid == 0)
        ::_exit(0);
    wait_for(pid);
    return pid;
}

} // namespace

TEST(CrashSafety, SigkillAtRandomPointsLeavesACompleteDirectory)
{
    embedlab::test::TempDir tmp;
    const fs::path out = tmp / "model";
    // The previous complete result, and how long a full run takes.
    const auto t0 = Clock::now();
    ASSERT_EQ(wait_for(spawn_cli(compress_args(out, 8))), 0);
    const double full_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    ASSERT_TRUE(fs::exists(out / "embedlab.json"));

    std::mt19937 rng(12345);
    int killed = 0;
    for (int round = 0; round < 8; ++round) {
        const int rank = 9 + round;
        const auto delay = std::uniform_real_distribution<double>(0.05, 1.0)(rng) * full_ms;
        const pid_t pid = spawn_cli(compress_args(out, rank));
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay));
        ::kill(pid, SIGKILL);
        killed += WIFSIGNALED(wait_for(pid)) ? 1 : 0;
        // Old or new, but complete: the manifest parses and the model loads and runs.
        ASSERT_TRUE(fs::exists(out / "embedlab.json")) << "round " << round << " after " << delay << " ms";
        const auto m = nlohmann::json::parse(embedlab::test::read_text(out / "embedlab.json"));
        const int stored = m["parameters"]["rank"];
        EXPECT_LE(stored, rank); // this round's result or an earlier one
        auto lm = embedlab::load_model(out);
        EXPECT_EQ(lm.model->token_embedding().kind(), "pca");
        EXPECT_TRUE(fs::exists(out / "dense" / "model.safetensors"));
        const auto logits = lm.model->logits(torch::tensor({{464, 3290}}, torch::kLong));
        EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
    }
    EXPECT_GT(killed, 0);
    // The next complete run removes what killed runs left beside the directory.
    ASSERT_EQ(wait_for(spawn_cli(compress_args(out, 20))), 0);
    EXPECT_EQ(siblings(out), std::vector<std::string>{});
    EXPECT_EQ(nlohmann::json::parse(embedlab::test::read_text(out / "embedlab.json"))["parameters"]["rank"],
              20);
}

// Issue 35 item 6: a long command answers SIGTERM at once (exit 130) and leaves no
// temporary beside its output. Issue 35 asks for a second; the bound allows for a
// loaded CI machine, and a command deaf to SIGTERM still fails it.
TEST(CrashSafety, SigtermIsAnsweredAtOnceAndLeavesNoTemporary)
{
    embedlab::test::TempDir tmp;
    const fs::path out = tmp / "fourier";
    const pid_t pid = spawn_cli({"compress", kModel, "--method", "fourier", "--mlp", "linear", "--steps",
                                 "1000000", "--out", out.string(), "--quiet"});
    // Until its SIGTERM handler is in place (libtorch loads for seconds on a busy machine;
    // before that the default action ends it at once, which leaves nothing either), then
    // a second into the work.
    const auto caught = [pid] {
        std::ifstream status("/proc/" + std::to_string(pid) + "/status");
        for (std::string line; std::getline(status, line);)
            if (line.rfind("SigCgt:", 0) == 0)
                return (std::stoull(line.substr(7), nullptr, 16) >> (SIGTERM - 1)) & 1;
        return 0ull;
    };
    for (int i = 0; i < 600 && !caught(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(caught()) << "no SIGTERM handler after 60 s";
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const auto t0 = Clock::now();
    ::kill(pid, SIGTERM);
    const int status = wait_for(pid);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    EXPECT_LT(ms, 2000) << "SIGTERM answered after " << ms << " ms";
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 130);
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(siblings(out), std::vector<std::string>{});
}

TEST(CrashSafety, StaleTemporariesOfDeadProcessesAreRemoved)
{
    embedlab::test::TempDir tmp;
    const fs::path out = tmp / "result";
    const auto dead = std::to_string(dead_pid());
    const auto live = std::to_string(::getppid()); // alive while this test runs
    for (const auto& name : {"result.tmp-" + dead + "-0", "result.old-" + dead, "result.tmp-" + live + "-3",
                             std::string("result.tmpfile"), "results.tmp-" + dead + "-1"})
        fs::create_directory(tmp / name);
    std::ofstream(tmp / ("result.json.tmp-" + dead + "-2")) << "partial";
    embedlab::AtomicDirectory dir(out);
    embedlab::write_file_atomic(dir.path() / "a.txt", "a");
    dir.commit();
    embedlab::write_file_atomic(tmp / "result.json", "{}");
    // Dead processes' temporaries went; a live process's, and unrelated names, stay.
    EXPECT_FALSE(fs::exists(tmp / ("result.tmp-" + dead + "-0")));
    EXPECT_FALSE(fs::exists(tmp / ("result.old-" + dead)));
    EXPECT_FALSE(fs::exists(tmp / ("result.json.tmp-" + dead + "-2")));
    EXPECT_TRUE(fs::exists(tmp / ("result.tmp-" + live + "-3")));
    EXPECT_TRUE(fs::exists(tmp / "result.tmpfile"));
    EXPECT_TRUE(fs::exists(tmp / ("results.tmp-" + dead + "-1")));
    EXPECT_EQ(embedlab::test::read_text(out / "a.txt"), "a");
}

TEST(CrashSafety, ChangedTensorsAreRefusedUnlessVerificationIsOff)
{
    embedlab::test::TempDir tmp;
    const fs::path out = tmp / "model";
    ASSERT_EQ(wait_for(spawn_cli(
                  {"compress", kModel, "--method", "svd", "--rank", "8", "--out", out.string(), "--quiet"})),
              0);
    const auto m = nlohmann::json::parse(embedlab::test::read_text(out / "embedlab.json"));
    ASSERT_EQ(m["weights_files"][0]["file"], "model.safetensors");
    EXPECT_EQ(m["weights_files"][0]["sha256"], embedlab::sha256_file(out / "model.safetensors"));
    EXPECT_NO_THROW(embedlab::load_model(out));

    // Flip one byte near the end: a tensor value, so the header still parses.
    {
        std::fstream f(out / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(-3, std::ios::end);
        char c = 0;
        f.get(c);
        f.seekp(-3, std::ios::end);
        f.put(static_cast<char>(c ^ 0x40));
    }
    try {
        embedlab::load_model(out);
        FAIL() << "a changed model.safetensors loaded";
    } catch (const embedlab::InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("model.safetensors: sha256"), std::string::npos) << msg;
        EXPECT_NE(msg.find("--no-verify"), std::string::npos) << msg;
    }
    EXPECT_NO_THROW(embedlab::load_model(out, {.verify = false}));

    // Issue 24, item 10: editing the manifest does not bypass the check. Every
    // weight file the model reads must be listed and match.
    const auto manifest_text = embedlab::test::read_text(out / "embedlab.json");
    auto refused_with = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& expected) {
        auto j = nlohmann::json::parse(manifest_text);
        edit(j);
        fs::remove(out / "embedlab.json");
        std::ofstream(out / "embedlab.json") << j.dump(1);
        try {
            embedlab::load_model(out);
            ADD_FAILURE() << "loaded after the manifest edit; expected: " << expected;
        } catch (const embedlab::InputError& e) {
            EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
        }
    };
    refused_with([](auto& j) { j["weights_files"] = nlohmann::json::array(); }, "lists no weights_files");
    refused_with([](auto& j) { j.erase("weights_files"); }, "lists no weights_files");
    // Found by fuzz_manifest: a float byte count was cast to int64 (undefined behaviour).
    refused_with([](auto& j) { j["weights_files"][0]["bytes"] = 1e58; },
                 "weights_files' bytes must be an integer, got 1e+58");
    refused_with(
        [&](auto& j) {
            j["weights_files"] = {
                {{"file", "config.json"}, {"sha256", embedlab::sha256_file(out / "config.json")}}};
        },
        "model.safetensors: holds weights the model uses, but embedlab.json's weights_files does not list "
        "it");

    // Issue 24, item 17: a symlink leading out of the directory is refused.
    fs::remove(out / "embedlab.json");
    std::ofstream(out / "embedlab.json") << manifest_text;
    fs::rename(out / "model.safetensors", tmp / "elsewhere.safetensors");
    fs::create_symlink(tmp / "elsewhere.safetensors", out / "model.safetensors");
    try {
        embedlab::load_model(out, {.verify = false});
        ADD_FAILURE() << "followed a symlink out of the compressed directory";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("a symlink leading out of the compressed directory"),
                  std::string::npos)
            << e.what();
    }
}
