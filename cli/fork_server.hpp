// embedlab-cli as a fork server, for the tests (issue 58). An embedlab-cli process spends
// about 0.5 s of CPU loading libtorch and its libraries before it does anything, and the
// tests start a few hundred. The server loads them once and forks a child per run; the
// child is this executable at the point main() would reach and calls what main() calls
// (run_cli_process: /proc/self/exe, the OpenMP restart, the signal handlers, stdout's
// closing and the EMBEDLAB_CLI_LOG line are all the same). A run whose environment
// differs from the server's own is executed instead (execve of /proc/self/exe): the
// libraries read some variables while loading (OMP_*, OPENBLAS_*), so only a child of
// the same environment may skip that.
//   main: if (const char* fd = getenv(kForkServerVariable)) return serve_forked_runs(fd);
// Started by tests/cli_fork_client.hpp with the variable naming its socket's fd; serves
// one run at a time (fork_protocol.hpp) and ends at the end of the stream. Single-threaded.
#pragma once

#include "fork_protocol.hpp"

namespace embedlab::cli {

inline constexpr const char* kForkServerVariable = fork_protocol::kServerVariable;

// `socket_fd`: the decimal fd of a connected Unix stream socket. Returns main's status:
// 0 when the client closed the socket, 2 when the variable names no socket.
int serve_forked_runs(const char* socket_fd);

} // namespace embedlab::cli
