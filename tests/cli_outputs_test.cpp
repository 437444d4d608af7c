// Outputs that never destroy an input and never lie about being complete (issue 57
// items 1, 2 and 5). Each case failed before its fix.
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "cli_in_process.hpp"
#include "cli_support.hpp"

namespace {

using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::CliRun;
using embedlab::test::expect_refused;
using embedlab::test::read_text;
using embedlab::test::TempDir;
namespace fs = std::filesystem;

const fs::path kBundled = fs::path(EMBEDLAB_SOURCE_DIR) / "resources/models/tinygpt2-f16";

// A copy of the bundled model a test may try to damage.
fs::path model_copy(const TempDir& dir, const std::string& name)
{
    const auto m = dir / name;
    fs::create_directories(m);
    for (const auto& e : fs::directory_iterator(kBundled))
        fs::copy_file(e.path(), m / e.path().filename());
    return m;
}

fs::path sst2_dev_file(const TempDir& dir)
{
    std::ofstream(dir / "dev.tsv") << "sentence\tlabel\na lovely film .\t1\na dull , tired mess .\t0\n";
    return dir / "dev.tsv";
}

// Item 1: with --force, task --out into the model directory replaced its weights, and
// eval --per-token a reference model's config; no output may be a file of an input,
// by its own path, through `..`, a symlink or a hard link.
TEST(OutputsNeverInputs, ForceNeverWritesIntoAModelsFiles)
{
    TempDir dir;
    const auto m1 = model_copy(dir, "m1");
    const auto data = sst2_dev_file(dir).string();
    const auto weights = read_text(m1 / "model.safetensors");
    const auto config = read_text(m1 / "config.json");
    fs::create_directories(dir / "elsewhere");
    fs::create_symlink(m1 / "model.safetensors", dir / "elsewhere" / "link.jsonl");
    fs::create_hard_link(m1 / "model.safetensors", dir / "elsewhere" / "hard.jsonl");
    for (const std::string& out :
         {(m1 / "model.safetensors").string(), (dir / "m1" / ".." / "m1" / "config.json").string(),
          (dir / "elsewhere" / "link.jsonl").string(), (dir / "elsewhere" / "hard.jsonl").string()}) {
        SCOPED_TRACE(out);
        expect_refused(
            cli_here({"task", "sst2", m1.string(), "--data", data, "--out", out, "--force", "--quiet"}),
            "an input is never an output");
    }
    // --reference's directory is an input too.
    const auto m2 = model_copy(dir, "m2");
    const auto text = (dir / "t.txt").string();
    std::ofstream(text) << "Once upon a time there was a little cat. It liked to play in the sun.\n";
    expect_refused(cli_here({"eval", m1.string(), "--text", text, "--reference", m2.string(), "--per-token",
                             (m2 / "config.json").string(), "--force"}),
                   "an input is never an output");
    EXPECT_EQ(read_text(m1 / "model.safetensors"), weights);
    EXPECT_EQ(read_text(m1 / "config.json"), config);
    EXPECT_EQ(read_text(m2 / "config.json"), config);
    // A file beside the model, not in it, is still an ordinary output.
    const auto ok = cli(
        {"task", "sst2", m1.string(), "--data", data, "--out", (dir / "preds.jsonl").string(), "--quiet"});
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// Item 2: compress --method aq without --json printed its fit as fourier's, read a
// field aq has not, and exited 1 after writing a complete directory.
TEST(OutputsNeverInputs, AqPrintsItsOwnFitSummaryAndExitsZero)
{
    TempDir dir;
    const auto out = dir / "aq";
    const auto r = cli({"compress", "--method", "aq", "--steps", "2", "--codebooks", "4", "--codewords", "4",
                        "--out", out.string(), "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("aq M 4, K 4: loss "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("after 2 steps"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(out / "embedlab.json"));
}

// Item 5: a command whose standard output cannot be written (/dev/full: every write
// fails with ENOSPC) exited 0 with the output lost.
TEST(OutputsNeverInputs, AFullStandardOutputFailsTheRun)
{
    if (!fs::exists("/dev/full"))
        GTEST_SKIP() << "no /dev/full here";
    TempDir dir;
    const std::string cmd = embedlab::test::quote(EMBEDLAB_CLI_PATH) + " inspect --json >/dev/full 2>" +
                            embedlab::test::quote((dir / "err").string());
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 2);
    const auto err = read_text(dir / "err");
    EXPECT_NE(err.find("cannot write the standard output: No space left on device"), std::string::npos)
        << err;
    // Help and `version` go through the same check.
    const int version =
        std::system((embedlab::test::quote(EMBEDLAB_CLI_PATH) + " version >/dev/full 2>/dev/null").c_str());
    EXPECT_EQ(WEXITSTATUS(version), 2);
}

// Issue 57 item 10: generate printed a prompt too long for the context (100 MB of it)
// to stdout before refusing it; now the refusal comes first and nothing is printed.
TEST(OutputsNeverInputs, APromptRefusedForTheContextIsNotEchoed)
{
    TempDir dir;
    std::string prompt;
    for (int i = 0; i < 4000; ++i)
        prompt += "Once upon a time there was a cat. ";
    std::ofstream(dir / "prompt.txt") << prompt;
    const auto r = cli({"generate", "--prompt-file", (dir / "prompt.txt").string(), "--max-tokens", "2"});
    expect_refused(r, "more than the model's context");
    EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 200);
}

} // namespace
