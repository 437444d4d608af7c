// embedlab-cli's command line run in the calling process, for the tests' refusals
// (tests/cli_in_process.hpp): the dispatch, checks, messages and exit status of the
// program, without a process and libtorch's start (about 0.5 s of CPU) per run:
//   const int status = embedlab::run_cli_in_process({"compress", "--method", "pca"});
// In namespace embedlab, not embedlab::cli: a test file with `using namespace embedlab`
// calls embedlab::test::cli(...) unqualified, which a visible namespace cli makes
// ambiguous. Not thread safe: it writes to stdout and stderr and reads the environment.
#pragma once

#include <string>
#include <vector>

namespace embedlab {

// `args` without the program's name; stdout and stderr flushed after. Returns the exit
// status: 0, 2 bad input, 1 internal, 130 cancelled. Without what only a process of its
// own does: the OpenMP restart and the SIGINT/SIGTERM handler.
int run_cli_in_process(const std::vector<std::string>& args);

} // namespace embedlab
