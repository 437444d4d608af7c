// Child processes with a fixed argv (fork + exec, no shell), pipes, timeouts and kill.
//
//   auto r = embedlab::run_command({"ssh", "-o", "BatchMode=yes", "--", host, "true"}, "", 30s);
//   if (r.timed_out || r.status != 0) { /* r.err says why */ }
//
//   embedlab::Subprocess p({"tar", "-cf", "-", "--", "dir"}, {.stdout_fd = pipe_write_end});
//   p.wait(std::chrono::minutes(5));     // exit status; SIGTERM then SIGKILL at the deadline
//
// Every child runs in its own process group (terminate() reaches its children),
// gets only the descriptors it is given, and default signal dispositions. Writing
// to a child whose stdin closed returns false instead of raising SIGPIPE.
// Thread safety: one Subprocess per thread; run_command is reentrant.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace embedlab {

struct SubprocessOptions {
    int stdin_fd = -1;  // >= 0: the child reads this descriptor; -1: a pipe (write_stdin); -2: /dev/null
    int stdout_fd = -1; // >= 0: the child writes here; -1: a pipe read by pump()
    int stderr_fd = -1; // >= 0: the child writes here; -1: a pipe collected into stderr_text()
};

class Subprocess {
public:
    // Throws InputError("<argv[0]>: cannot run (<reason>)") when exec fails.
    explicit Subprocess(const std::vector<std::string>& argv, const SubprocessOptions& options = {});
    ~Subprocess(); // a child still running is terminated and reaped
    Subprocess(const Subprocess&) = delete;
    Subprocess& operator=(const Subprocess&) = delete;

    pid_t pid() const { return pid_; }
    // False when the child no longer reads its stdin.
    bool write_stdin(std::string_view bytes);
    void close_stdin();
    // Reads stdout/stderr until both are closed (true), `timeout` passes or
    // keep_going() says stop (false). Complete stdout lines go to on_line, or are
    // collected into stdout_text() when on_line is empty.
    bool pump(const std::function<void(std::string_view line)>& on_line, std::chrono::milliseconds timeout,
              const std::function<bool()>& keep_going = {});
    // Exit code (128 + signal when killed by one); terminates the child at the
    // deadline and returns -1.
    int wait(std::chrono::milliseconds timeout);
    // SIGTERM to the process group, SIGKILL after `grace`; reaps the child.
    void terminate(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
    bool running() const { return pid_ > 0 && !reaped_; }
    // Non-blocking: the exit status once the child has ended (it is then reaped).
    std::optional<int> exit_status();

    // What the reaped child used (wait4's rusage: the child and the descendants it
    // waited for); zeros until it is reaped. Peak RSS per child, which
    // getrusage(RUSAGE_CHILDREN) cannot give once several children have run.
    struct Usage {
        int64_t peak_rss_bytes = 0;
        double user_seconds = 0, system_seconds = 0;
    };
    const Usage& usage() const { return usage_; }

    const std::string& stdout_text() const { return out_; }
    const std::string& stderr_text() const { return err_; } // the last 64 KiB

private:
    bool try_reap(bool block);
    pid_t pid_ = -1;
    bool reaped_ = false;
    int status_ = -1;
    Usage usage_;
    int in_ = -1, out_fd_ = -1, err_fd_ = -1;
    std::string out_, err_, partial_;
    std::string program_; // argv[0], for messages
};

struct CommandResult {
    int status = -1; // exit code, 128 + signal, -1 on timeout
    bool timed_out = false;
    std::string out, err;
};

// Runs argv with `input` on its stdin, collecting stdout and stderr, within `timeout`.
CommandResult run_command(const std::vector<std::string>& argv, std::string_view input,
                          std::chrono::milliseconds timeout);

// The first executable `name` on PATH (or `name` itself when it contains a '/').
std::optional<std::filesystem::path> find_executable(const std::string& name);

} // namespace embedlab
