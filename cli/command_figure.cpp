// `figure` and `demo`: the figures need Qt, which the CLI does not link (it runs
// on hosts without Qt). They run in embedlab-figure, found next to embedlab-cli
// (build tree: build/cli/embedlab-cli and build/app/embedlab-figure; installed:
// the same directory), as a child process with the same arguments.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <sys/wait.h>
#include <unistd.h>

#include "common.hpp"

namespace embedlab::cli {

namespace {

// The handler passes the signal on itself: it may run on any thread (libtorch's
// pools), so the waiting thread is not necessarily interrupted.
volatile sig_atomic_t g_child = 0, g_pending_signal = 0;
extern "C" void forward_signal(int sig)
{
    if (g_child > 0)
        ::kill(g_child, sig);
    else
        g_pending_signal = sig;
}

std::filesystem::path figure_tool()
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec)
        return {};
    for (const fs::path& candidate :
         {exe.parent_path() / ".." / "app" / "embedlab-figure", exe.parent_path() / "embedlab-figure"})
        if (::access(candidate.c_str(), X_OK) == 0)
            return candidate.lexically_normal();
    return {};
}

} // namespace

int command_figure(const std::string& command, const std::vector<std::string>& argv)
{
    const auto tool = figure_tool();
    if (tool.empty())
        throw InputError(command + ": needs the GUI build (embedlab-figure not found next to embedlab-cli; "
                                   "configure with -DEMBEDLAB_BUILD_GUI=ON)");
    // argv[0] "embedlab-cli": the child's messages then read as this program's.
    std::vector<std::string> args{"embedlab-cli", command};
    args.insert(args.end(), argv.begin(), argv.end());
    std::vector<char*> child_argv;
    for (auto& a : args)
        child_argv.push_back(a.data());
    child_argv.push_back(nullptr);

    // A terminal's Ctrl-C reaches both processes; a kill of this pid only us.
    struct sigaction forward = {}, old_int = {}, old_term = {};
    forward.sa_handler = forward_signal;
    forward.sa_flags = SA_RESTART;
    sigemptyset(&forward.sa_mask);
    g_child = 0;
    g_pending_signal = 0;
    sigaction(SIGINT, &forward, &old_int);
    sigaction(SIGTERM, &forward, &old_term);
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t child = ::fork();
    if (child < 0)
        throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (child == 0) {
        ::execv(tool.c_str(), child_argv.data());
        const char message[] = "embedlab-cli: cannot run embedlab-figure\n";
        [[maybe_unused]] auto n = ::write(2, message, sizeof message - 1);
        ::_exit(127);
    }
    g_child = child;
    if (const int sig = g_pending_signal) // arrived before the child's pid was known
        ::kill(child, sig);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    g_child = 0;
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

} // namespace embedlab::cli
