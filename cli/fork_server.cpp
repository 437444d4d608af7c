#include "fork_server.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fork_protocol.hpp"
#include "process_main.hpp"

namespace embedlab::cli {
namespace {

namespace protocol = embedlab::fork_protocol;

std::vector<std::string> sorted(std::vector<std::string> words)
{
    std::sort(words.begin(), words.end());
    return words;
}

// A request: working directory, stdin, stdout, stderr, argc, argv..., environment...
struct Run {
    std::string directory, input, output, error;
    std::vector<std::string> argv, environment;
};

std::optional<Run> parse_run(std::vector<std::string> words)
{
    size_t argc = 0;
    if (words.size() < 6)
        return std::nullopt;
    const auto& count = words[4];
    if (std::from_chars(count.data(), count.data() + count.size(), argc).ec != std::errc() || argc < 1 ||
        argc > words.size() - 5)
        return std::nullopt;
    Run run{words[0], words[1], words[2], words[3], {}, {}};
    run.argv.assign(words.begin() + 5, words.begin() + 5 + static_cast<std::ptrdiff_t>(argc));
    run.environment.assign(words.begin() + 5 + static_cast<std::ptrdiff_t>(argc), words.end());
    return run;
}

[[noreturn]] void fail_child(const std::string& what)
{
    const std::string line = "embedlab-cli (fork server): " + what + ": " + std::strerror(errno) + "\n";
    [[maybe_unused]] const auto written = ::write(2, line.data(), line.size());
    ::_exit(127);
}

void redirect(const std::string& path, int flags, int target)
{
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd < 0 || ::dup2(fd, target) < 0)
        fail_child("cannot open " + path);
    ::close(fd);
}

// In the forked child: the run's directory and files, then main()'s call, or an
// execve when the environment is not the one the libraries loaded with.
[[noreturn]] void run_child(Run& run, bool same_environment)
{
    if (::chdir(run.directory.c_str()) != 0)
        fail_child("cannot enter " + run.directory);
    redirect(run.input, O_RDONLY, 0);
    redirect(run.output, O_WRONLY | O_CREAT | O_TRUNC, 1);
    redirect(run.error, O_WRONLY | O_CREAT | O_TRUNC, 2);
    auto argv = protocol::c_strings(run.argv);
    if (!same_environment) {
        auto envp = protocol::c_strings(run.environment);
        ::execve("/proc/self/exe", argv.data(), envp.data());
        fail_child("cannot execute /proc/self/exe");
    }
    std::exit(run_cli_process(static_cast<int>(run.argv.size()), argv.data()));
}

protocol::ForkedRun fork_and_wait(Run& run, int socket, const std::vector<std::string>& environment)
{
    protocol::ForkedRun result;
    const bool same_environment = sorted(run.environment) == environment;
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(socket);
        run_child(run, same_environment);
    }
    if (child < 0)
        return result;
    int status = 0;
    rusage usage{};
    while (::wait4(child, &status, 0, &usage) < 0)
        if (errno != EINTR)
            return result;
    result.wait_status = status;
    result.max_rss_kb = usage.ru_maxrss;
    result.user_us = static_cast<int64_t>(usage.ru_utime.tv_sec) * 1000000 + usage.ru_utime.tv_usec;
    result.system_us = static_cast<int64_t>(usage.ru_stime.tv_sec) * 1000000 + usage.ru_stime.tv_usec;
    return result;
}

} // namespace

int serve_forked_runs(const char* socket_fd)
{
    int socket = -1;
    struct stat st {};
    const std::string_view text(socket_fd);
    if (std::from_chars(text.data(), text.data() + text.size(), socket).ec != std::errc() || socket < 0 ||
        ::fstat(socket, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        std::fprintf(stderr, "embedlab-cli: %s=%s names no open socket (only the tests' client sets it)\n",
                     kForkServerVariable, socket_fd);
        return 2;
    }
    ::unsetenv(kForkServerVariable);
    const auto environment = sorted(protocol::environment_strings());
    while (auto words = protocol::receive_strings(socket)) {
        auto run = parse_run(std::move(*words));
        const auto result = run ? fork_and_wait(*run, socket, environment) : protocol::ForkedRun{};
        if (!protocol::send_all(socket, &result, sizeof result))
            break;
    }
    log_process("fork-server", 0); // its own CPU: the one start of libtorch the children skip
    return 0;
}

} // namespace embedlab::cli
