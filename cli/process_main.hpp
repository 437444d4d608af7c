// embedlab-cli's whole run as a process of its own: the command line, then stdout
// flushed and closed (a write error fails the run), then one line in EMBEDLAB_CLI_LOG.
// main() is this call; the tests' fork server (fork_server.hpp) calls it in each
// forked child, so a forked run and an executed one do the same things.
//   int main(int argc, char** argv) { return embedlab::cli::run_cli_process(argc, argv); }
// Not thread safe: it owns the process (stdout, signal handlers, the environment).
#pragma once

namespace embedlab::cli {

// Exit status: 0 success, 2 bad input, 1 internal error, 130 cancelled.
int run_cli_process(int argc, char** argv);

// Issue 58: the tests count the CLI processes they start and their CPU time
// (scripts/test.sh sets EMBEDLAB_CLI_LOG): "<CPU s> <status> <command>", one line a
// process, appended atomically. Does nothing when the variable is unset.
void log_process(const char* command, int status);

} // namespace embedlab::cli
