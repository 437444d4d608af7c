// embedlab-cli's command line run inside the test process (cli/run_in_process.hpp), for
// refusals: each embedlab-cli process costs libtorch's start (about 0.5 s of CPU), a
// refusal itself a millisecond. The same dispatch, checks, messages and exit codes as the
// process; what only a process has (the OpenMP restart, the SIGINT handler, closing
// stdout, a changed environment) stays with embedlab::test::cli.
//   expect_refused(cli_here({"compress", "--method", "pca"}), "--out");
// Link embedlab_cli_commands. Not thread safe: it points fds 1 and 2 at files meanwhile.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "run_in_process.hpp"

namespace embedlab::test {

// One run of `args` (no program name) in this process: exit status, stdout, stderr.
inline CliRun cli_here(const std::vector<std::string>& args)
{
    static TempDir dir;
    const std::string out_path = (dir / "out").string(), err_path = (dir / "err").string();
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
    const int saved_out = ::dup(1), saved_err = ::dup(2);
    const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CliRun r;
    if (saved_out < 0 || saved_err < 0 || out_fd < 0 || err_fd < 0) {
        ADD_FAILURE() << "cannot redirect stdout and stderr to " << dir.path();
        return r;
    }
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    r.exit_code = embedlab::run_cli_in_process(args);
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(saved_out, 1);
    ::dup2(saved_err, 2);
    for (const int fd : {saved_out, saved_err, out_fd, err_fd})
        ::close(fd);
    r.out = read_text(dir / "out");
    r.err = read_text(dir / "err");
    return r;
}

} // namespace embedlab::test
