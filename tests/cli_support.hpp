// Running embedlab-cli from tests: exit code, stdout and stderr of one call.
// EMBEDLAB_TEST_CLI_EXEC=1 executes every run (no fork server).
#pragma once

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "cli_fork_client.hpp"
#include "embedlab/remote.hpp"
#include "test_support.hpp"

namespace embedlab::test {

struct CliRun {
    int exit_code = -1;
    std::string out, err;
};

// A word for sh, quoted as the remote runner quotes it.
inline std::string quote(const std::string& s)
{
    return shell_quote(s);
}

// `environment`: arguments of env(1) before the command, e.g. {"-u", "NAME", "A=1"}.
// A run with no `environment` is forked by the test process's fork server
// (cli_fork_client.hpp), else executed through sh. Runs one at a time.
inline CliRun cli(const std::vector<std::string>& args, const std::vector<std::string>& environment = {})
{
    static std::mutex one_at_a_time;
    const std::lock_guard lock(one_at_a_time);
    static embedlab::test::TempDir dir;
    if (environment.empty()) {
        std::vector<std::string> argv{EMBEDLAB_CLI_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        if (const auto run =
                forked_cli_run(argv, "/dev/null", (dir / "out").string(), (dir / "err").string())) {
            const int status = static_cast<int>(run->wait_status);
            return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(dir / "out"),
                    read_text(dir / "err")};
        }
    }
    std::string cmd;
    if (!environment.empty()) {
        cmd = "env";
        for (const auto& e : environment)
            cmd.append(" ").append(quote(e));
        cmd += ' ';
    }
    cmd += quote(EMBEDLAB_CLI_PATH);
    for (const auto& a : args) {
        cmd += ' ';
        cmd += quote(a);
    }
    cmd.append(" >").append(quote((dir / "out").string()));
    cmd.append(" 2>").append(quote((dir / "err").string())).append(" </dev/null");
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = embedlab::test::read_text(dir / "out");
    r.err = embedlab::test::read_text(dir / "err");
    return r;
}

// Two files cut from the bundled held-out text, [0, a) and [a, a + b): `fit`, the
// text a method learns from (calibration, token frequencies, training), and
// `eval`, an evaluation text that does not overlap it.
struct TextSlices {
    TempDir dir;
    std::string fit, eval;
    TextSlices(size_t a, size_t b)
    {
        const auto text =
            read_text(std::filesystem::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt");
        std::ofstream(dir / "first.txt") << text.substr(0, a);
        std::ofstream(dir / "second.txt") << text.substr(a, b);
        fit = (dir / "first.txt").string();
        eval = (dir / "second.txt").string();
    }
};

// A refusal: exit 2 and a message holding `needle`.
inline void expect_refused(const CliRun& r, const std::string& needle)
{
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << r.err;
}

// The JSON a --json run printed; a failed run fails the test and gives null.
inline nlohmann::json json_of(const CliRun& r)
{
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

} // namespace embedlab::test
