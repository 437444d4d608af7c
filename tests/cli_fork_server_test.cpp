// The tests' fork server (cli/fork_server.hpp): a forked run is the executed program's
// run, byte for byte, in the caller's directory and environment.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

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

// A server of its own, started while this process holds a pipe's write end (not
// close-on-exec): the server holds neither end (only stdin, stdout, stderr, its socket
// and its libraries' own files), so the reader sees the end of the stream.
TEST(CliForkServer, TheServerHoldsNoFileOfTheTestProcessButItsSocket)
{
    int pipe_ends[2];
    ASSERT_EQ(::pipe(pipe_ends), 0);
    embedlab::test::CliForkServer server;
    ASSERT_TRUE(embedlab::test::start_cli_fork_server(server));
    ::close(pipe_ends[1]);
    // None of the server's fds is the pipe (its libraries may hold files of their own).
    const auto pipe_name = fs::read_symlink("/proc/self/fd/" + std::to_string(pipe_ends[0])).string();
    std::set<std::string> fds;
    for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(server.server) + "/fd")) {
        std::error_code gone; // an fd closed while listed
        fds.insert(fs::read_symlink(e.path(), gone).string());
    }
    EXPECT_EQ(fds.count(pipe_name), 0u) << pipe_name;
    pollfd reader{pipe_ends[0], POLLIN, 0};
    char byte = 0;
    EXPECT_TRUE(::poll(&reader, 1, 5000) == 1 && ::read(pipe_ends[0], &byte, 1) == 0)
        << "no end of the pipe's stream: someone else holds its write end";
    ::close(pipe_ends[0]);
    ::close(server.socket); // the end of its stream: the server ends
    int status = 0;
    ASSERT_EQ(::waitpid(server.server, &status, 0), server.server);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The variable only the tests' client sets, naming something that is not a socket.
TEST(CliForkServer, RefusesAVariableThatNamesNoSocket)
{
    const CliRun r = embedlab::test::cli({"version"}, {"EMBEDLAB_CLI_FORK_SERVER=0"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("EMBEDLAB_CLI_FORK_SERVER=0 names no open socket"), std::string::npos) << r.err;
}

} // namespace
