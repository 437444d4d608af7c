// The tests' embedlab-cli runs through one fork server per test process
// (cli/fork_server.hpp, issue 58): started on the first run, it has loaded libtorch once
// and forks a child for each run, which then does what an executed embedlab-cli does
// from main() on. A run costs the command's own CPU, not libtorch's 0.5 s start again.
//   if (const auto run = embedlab::test::forked_cli_run(argv, "/dev/null", out, err)) ...
// Nothing comes back when no server can be had (the caller executes the program), in a
// forked copy of the test process, or when EMBEDLAB_TEST_CLI_EXEC=1 asks for executed
// runs only. Not thread safe: one run at a time (the caller serialises).
#pragma once

#include <fcntl.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cli/fork_protocol.hpp"
#include "test_paths.hpp"

namespace embedlab::test {

struct CliForkServer {
    pid_t owner = -1, server = -1; // owner: the process that started it (not a fork of it)
    int socket = -1;
    bool broken = false;
};

inline CliForkServer& cli_fork_server()
{
    static CliForkServer s;
    return s;
}

// The server: embedlab-cli with the socket's far end at fd 3 (dup2 to another number
// drops close-on-exec) and no other fd but 0-2, signals at their defaults as
// std::system's child has them.
inline bool start_cli_fork_server(CliForkServer& s)
{
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0)
        return false;
    const int server_fd = ends[1] == 3 ? 4 : 3;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, ends[1], server_fd);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    // Nothing else of this process's: a pipe's write end held by the long-lived server
    // would keep its reader from ever seeing the end of the stream.
    posix_spawn_file_actions_addclosefrom_np(&actions, server_fd + 1);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t defaults, none;
    sigemptyset(&defaults);
    for (const int signal : {SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP})
        sigaddset(&defaults, signal);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    std::vector<std::string> argv{EMBEDLAB_CLI_PATH}, env = fork_protocol::environment_strings();
    env.push_back(std::string(fork_protocol::kServerVariable) + "=" + std::to_string(server_fd));
    auto argv_p = fork_protocol::c_strings(argv), env_p = fork_protocol::c_strings(env);
    const int failed =
        ::posix_spawn(&s.server, EMBEDLAB_CLI_PATH, &actions, &attributes, argv_p.data(), env_p.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    ::close(ends[1]);
    if (failed) {
        ::close(ends[0]);
        return false;
    }
    s.socket = ends[0];
    s.owner = ::getpid();
    return true;
}

inline void break_cli_fork_server(CliForkServer& s, const std::string& why)
{
    ADD_FAILURE() << "embedlab-cli's fork server (pid " << s.server << ") " << why
                  << "; the runs from here on are executed";
    ::close(s.socket);
    s.broken = true;
}

// `argv` with the program first. The run's directory is this process's.
inline std::optional<fork_protocol::ForkedRun> forked_cli_run(const std::vector<std::string>& argv,
                                                              const std::string& input,
                                                              const std::string& output,
                                                              const std::string& error)
{
    const char* exec_only = std::getenv("EMBEDLAB_TEST_CLI_EXEC");
    auto& s = cli_fork_server();
    if ((exec_only && std::string(exec_only) == "1") || s.broken || (s.owner != -1 && s.owner != ::getpid()))
        return std::nullopt;
    if (s.owner == -1 && !start_cli_fork_server(s)) {
        s.broken = true;
        return std::nullopt;
    }
    std::vector<std::string> request{std::filesystem::current_path().string(), input, output, error,
                                     std::to_string(argv.size())};
    request.insert(request.end(), argv.begin(), argv.end());
    const auto env = fork_protocol::environment_strings();
    request.insert(request.end(), env.begin(), env.end());
    fork_protocol::ForkedRun run;
    if (!fork_protocol::send_strings(s.socket, request) ||
        !fork_protocol::receive_all(s.socket, &run, sizeof run)) {
        break_cli_fork_server(s, "stopped answering");
        return std::nullopt;
    }
    if (run.wait_status < 0) {
        break_cli_fork_server(s, "could not fork or wait for a run");
        return std::nullopt;
    }
    return run;
}

} // namespace embedlab::test
