// embedlab-cli's command line as a function: main.cpp runs it once per process, the
// tests in theirs (run_in_process.hpp).
//   return embedlab::cli::run_command_line(argc, argv, true);
// Not thread safe: it writes to stdout and stderr and reads the environment.
#pragma once

#include <string>
#include <vector>

namespace embedlab::cli {

// argv[0] is the program. own_process: restart with a passive OpenMP wait policy when
// none is set, and catch SIGINT/SIGTERM as a cancel (what a process of its own does; a
// test process does neither). Returns the exit status: 0, 2 bad input, 1 internal,
// 130 cancelled.
int run_command_line(int argc, char** argv, bool own_process);

// One line on stderr, "embedlab-cli: " and the message; control characters from files and
// arguments escaped, so a crafted name cannot move the cursor or retitle the terminal.
void report_error(const std::string& message);

} // namespace embedlab::cli
