#include "embedlab/subprocess.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "embedlab/error.hpp"

namespace embedlab {

namespace {

constexpr size_t kStderrKeep = 64 * 1024;
// A worker's event line (a run's result JSON included) stays far below this; a
// peer that prints more without a newline, or floods stdout, is cut off.
constexpr size_t kMaxLine = 64u << 20;
constexpr size_t kMaxStdout = 256u << 20;

using Clock = std::chrono::steady_clock;

void close_fd(int& fd)
{
    if (fd >= 0)
        ::close(fd);
    fd = -1;
}

void make_pipe(int fds[2])
{
    if (::pipe2(fds, O_CLOEXEC) != 0)
        throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
}

// Appends what is readable on fd; false at end of file.
bool drain(int& fd, std::string& into)
{
    char buf[65536];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
        into.append(buf, static_cast<size_t>(n));
        return true;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    close_fd(fd);
    return false;
}

} // namespace

Subprocess::Subprocess(const std::vector<std::string>& argv, const SubprocessOptions& options)
{
    if (argv.empty())
        throw std::invalid_argument("Subprocess: empty argv");
    program_ = argv.front();
    std::vector<char*> cargv;
    for (const auto& a : argv)
        cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);

    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, status[2] = {-1, -1};
    if (options.stdin_fd == -1)
        make_pipe(in);
    else if (options.stdin_fd == -2 && (in[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
        throw std::runtime_error("/dev/null: cannot open");
    if (options.stdout_fd < 0)
        make_pipe(out);
    if (options.stderr_fd < 0)
        make_pipe(err);
    make_pipe(status); // exec failure: errno travels back through this pipe
    const int child_in = options.stdin_fd >= 0 ? options.stdin_fd : in[0];
    const int child_out = options.stdout_fd >= 0 ? options.stdout_fd : out[1];
    const int child_err = options.stderr_fd >= 0 ? options.stderr_fd : err[1];

    pid_ = ::fork();
    if (pid_ < 0)
        throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) {
        // Async-signal-safe calls only from here on.
        ::setpgid(0, 0);
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD})
            ::sigaction(sig, &dfl, nullptr);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        if (::dup2(child_in, 0) < 0 || ::dup2(child_out, 1) < 0 || ::dup2(child_err, 2) < 0)
            ::_exit(127);
        // fd 3 reports an exec failure (closed on success); nothing else leaks in.
        if (::dup2(status[1], 3) < 0 || ::fcntl(3, F_SETFD, FD_CLOEXEC) < 0)
            ::_exit(127);
        ::syscall(SYS_close_range, 4u, ~0u, 0u);
        ::execvp(cargv[0], cargv.data());
        const int e = errno;
        (void)!::write(3, &e, sizeof e);
        ::_exit(127);
    }
    close_fd(in[0]);
    close_fd(out[1]);
    close_fd(err[1]);
    close_fd(status[1]);
    int exec_errno = 0;
    ssize_t got;
    do
        got = ::read(status[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    close_fd(status[0]);
    in_ = in[1];
    out_fd_ = out[0];
    err_fd_ = err[0];
    if (got == static_cast<ssize_t>(sizeof exec_errno)) {
        try_reap(true);
        close_fd(in_);
        close_fd(out_fd_);
        close_fd(err_fd_);
        throw InputError(argv[0] + ": cannot run (" + std::strerror(exec_errno) + ")");
    }
}

Subprocess::~Subprocess()
{
    if (running())
        terminate();
    close_fd(in_);
    close_fd(out_fd_);
    close_fd(err_fd_);
}

bool Subprocess::write_stdin(std::string_view bytes)
{
    if (in_ < 0)
        return false;
    // Block SIGPIPE for this thread; a pending one is consumed before unblocking.
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    bool ok = true;
    while (!bytes.empty()) {
        const ssize_t n = ::write(in_, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ok = false;
            break;
        }
        bytes.remove_prefix(static_cast<size_t>(n));
    }
    if (!ok) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return ok;
}

void Subprocess::close_stdin()
{
    close_fd(in_);
}

bool Subprocess::pump(const std::function<void(std::string_view)>& on_line, std::chrono::milliseconds timeout,
                      const std::function<bool()>& keep_going)
{
    const auto deadline = Clock::now() + timeout;
    while (out_fd_ >= 0 || err_fd_ >= 0) {
        if (keep_going && !keep_going())
            return false;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0)
            return false;
        pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
        const int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 100)));
        if (n < 0 && errno != EINTR)
            throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
        if (n <= 0)
            continue;
        if (fds[0].revents) {
            drain(out_fd_, partial_);
            size_t start = 0;
            for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
                const std::string_view line(partial_.data() + start, nl - start);
                if (on_line)
                    on_line(line);
                else
                    out_.append(line).push_back('\n');
            }
            partial_.erase(0, start);
            if (partial_.size() > kMaxLine)
                throw InputError(program_ + ": printed more than " + std::to_string(kMaxLine >> 20) +
                                 " MB without a newline; stopped reading (a broken or hostile peer)");
            if (out_.size() > kMaxStdout)
                throw InputError(program_ + ": printed more than " + std::to_string(kMaxStdout >> 20) +
                                 " MB on stdout; stopped reading");
            if (out_fd_ < 0 && !partial_.empty()) { // a last line without newline
                if (on_line)
                    on_line(partial_);
                else
                    out_ += partial_;
                partial_.clear();
            }
        }
        if (fds[1].revents) {
            drain(err_fd_, err_);
            if (err_.size() > 2 * kStderrKeep)
                err_.erase(0, err_.size() - kStderrKeep);
        }
    }
    return true;
}

bool Subprocess::try_reap(bool block)
{
    if (!running())
        return true;
    int st = 0;
    struct rusage ru {};
    pid_t r;
    do
        r = ::wait4(pid_, &st, block ? 0 : WNOHANG, &ru);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return false;
    reaped_ = true;
    if (r > 0) {
        auto seconds = [](const timeval& t) {
            return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
        };
        usage_ = {.peak_rss_bytes = static_cast<int64_t>(ru.ru_maxrss) * 1024, // Linux: kilobytes
                  .user_seconds = seconds(ru.ru_utime),
                  .system_seconds = seconds(ru.ru_stime)};
    }
    status_ = r < 0 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    return true;
}

std::optional<int> Subprocess::exit_status()
{
    if (pid_ <= 0)
        return std::nullopt;
    return try_reap(false) ? std::optional<int>(status_) : std::nullopt;
}

int Subprocess::wait(std::chrono::milliseconds timeout)
{
    const auto deadline = Clock::now() + timeout;
    while (!try_reap(false)) {
        if (Clock::now() >= deadline) {
            terminate();
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return status_;
}

void Subprocess::terminate(std::chrono::milliseconds grace)
{
    if (!running())
        return;
    ::kill(-pid_, SIGTERM);
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + grace;
    while (!try_reap(false)) {
        if (Clock::now() >= deadline) {
            ::kill(-pid_, SIGKILL);
            ::kill(pid_, SIGKILL);
            try_reap(true);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

CommandResult run_command(const std::vector<std::string>& argv, std::string_view input,
                          std::chrono::milliseconds timeout)
{
    const auto deadline = Clock::now() + timeout;
    Subprocess p(argv);
    // Inputs here are small (scripts, job files); a pipe buffer holds them, and a
    // child that exits early makes the write fail rather than block.
    p.write_stdin(input);
    p.close_stdin();
    CommandResult r;
    const bool finished = p.pump({}, timeout);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    r.status = finished ? p.wait(std::max(left, std::chrono::milliseconds(1000))) : (p.terminate(), -1);
    r.timed_out = r.status == -1;
    r.out = p.stdout_text();
    r.err = p.stderr_text();
    return r;
}

std::optional<std::filesystem::path> find_executable(const std::string& name)
{
    if (name.empty())
        return std::nullopt;
    if (name.find('/') != std::string::npos)
        return ::access(name.c_str(), X_OK) == 0 ? std::optional<std::filesystem::path>(name) : std::nullopt;
    const char* path = std::getenv("PATH");
    std::string_view rest = path ? path : "/usr/local/bin:/usr/bin:/bin";
    while (!rest.empty()) {
        const size_t colon = rest.find(':');
        const std::string dir(rest.substr(0, colon));
        rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
        const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
        if (::access(candidate.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(candidate))
            return candidate;
    }
    return std::nullopt;
}

} // namespace embedlab
