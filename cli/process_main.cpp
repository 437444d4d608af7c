#include "process_main.hpp"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "command_line.hpp"

namespace embedlab::cli {
namespace {

// What a command printed must all reach its destination: a full disk or /dev/full
// behind stdout fails the run instead of leaving a cut file and exit status 0.
int finish_stdout(int status)
{
    errno = 0;
    const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
    const int flush_errno = errno;
    const bool close_failed = std::fclose(stdout) != 0;
    if (!failed && !close_failed)
        return status;
    const int code = flush_errno != 0 ? flush_errno : errno;
    if (code == EPIPE) // the reader stopped reading (| head): nothing to say
        return status;
    report_error(std::string("cannot write the standard output: ") +
                 (code != 0 ? std::strerror(code) : "write error") + " (what was printed is incomplete)");
    return status == 0 ? 2 : status;
}

} // namespace

void log_process(const char* command, int status)
{
    const char* path = std::getenv("EMBEDLAB_CLI_LOG");
    if (!path || !*path)
        return;
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const double cpu = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                       static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
    std::string name = command ? std::string(command).substr(0, 32) : "";
    for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-')
            c = '_';
    const std::string line =
        std::to_string(cpu) + " " + std::to_string(status) + " " + (name.empty() ? "-" : name) + "\n";
    if (const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644); fd >= 0) {
        [[maybe_unused]] const auto written = ::write(fd, line.data(), line.size());
        ::close(fd);
    }
}

int run_cli_process(int argc, char** argv)
{
    const int status = finish_stdout(run_command_line(argc, argv, true));
    log_process(argc > 1 ? argv[1] : nullptr, status);
    return status;
}

} // namespace embedlab::cli
