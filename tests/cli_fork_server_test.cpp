// The tests' fork server (cli/fork_server.hpp): a forked run is the executed program's
// run, byte for byte, in the caller's directory and environment.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace {

namespace fs = std::filesystem;
using embedlab::test::CliRun;

// `args` executed (EMBEDLAB_TEST_CLI_EXEC=1 for this one run) rather than forked.
CliRun executed_cli(const std::vector<std::string>& args)
{
    ::setenv("EMBEDLAB_TEST_CLI_EXEC", "1", 1);
    CliRun run = embedlab::test::cli(args);
    ::unsetenv("EMBEDLAB_TEST_CLI_EXEC");
    return run;
}

void expect_same_run(const CliRun& forked, const CliRun& executed)
{
    EXPECT_EQ(forked.exit_code, executed.exit_code);
    EXPECT_EQ(forked.out, executed.out);
    EXPECT_EQ(forked.err, executed.err);
}

TEST(CliForkServer, AForkedRunPrintsAndExitsAsAnExecutedOne)
{
    ASSERT_TRUE(
        embedlab::test::forked_cli_run({EMBEDLAB_CLI_PATH, "version"}, "/dev/null", "/dev/null", "/dev/null"))
        << "no fork server: the runs below would all be executed";
    for (const auto& args :
         {std::vector<std::string>{"account", "--method", "pca", "--vocab", "1000", "--dim", "64", "--rank",
                                   "8"},
          {"account", "--method", "pca", "--vocab", "1000", "--dim", "64", "--rank", "80"}, // refused: 2
          {"frobnicate"},
          {"help", "compress"}}) {
        const CliRun forked = embedlab::test::cli(args), executed = executed_cli(args);
        expect_same_run(forked, executed);
        EXPECT_FALSE(forked.out.empty() && forked.err.empty()) << args[0];
    }
}

// The child works in the caller's directory of the moment (relative paths) and sees its
// environment of the moment: a variable set after the server started reaches the run.
TEST(CliForkServer, ARunHasTheCallersDirectoryAndEnvironment)
{
    embedlab::test::TempDir dir;
    std::ofstream(dir / "story.txt") << "Once upon a time, there was a little robot who wanted to play.";
    const auto before = fs::current_path();
    fs::current_path(dir.path());
    const CliRun forked = embedlab::test::cli({"tokenize", "--text", "story.txt", "--json"});
    const CliRun executed = executed_cli({"tokenize", "--text", "story.txt", "--json"});
    fs::current_path(before);
    ASSERT_EQ(forked.exit_code, 0) << forked.err;
    expect_same_run(forked, executed);

    ::setenv("EMBEDLAB_THREADS", "many", 1);
    const CliRun refused = embedlab::test::cli({"tokenize", "--text", (dir / "story.txt").string()});
    ::unsetenv("EMBEDLAB_THREADS");
    embedlab::test::expect_refused(refused, "EMBEDLAB_THREADS");
}

// The variable only the tests' client sets, naming something that is not a socket.
TEST(CliForkServer, RefusesAVariableThatNamesNoSocket)
{
    const CliRun r = embedlab::test::cli({"version"}, {"EMBEDLAB_CLI_FORK_SERVER=0"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("EMBEDLAB_CLI_FORK_SERVER=0 names no open socket"), std::string::npos) << r.err;
}

} // namespace
