// worker: run one job (engine/include/embedlab/job.hpp) and report it as JSON lines
// on stdout: {"event": "started"}, progress and log events, then one
// {"event": "result", "result": {...}} or {"event": "error", "error_kind":
// "input"|"cancelled"|"internal", "message": ...}. Exit codes as every command.
// Cancelled by SIGTERM/SIGINT or by the end of stdin when stdin is a pipe or a
// socket (how `remote run` and a lost ssh connection stop it); outputs are
// written atomically, so a cancelled job leaves none.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "common.hpp"
#include "embedlab/file_input.hpp"
#include "embedlab/job.hpp"
#include "embedlab/json_input.hpp"

namespace embedlab::cli {

namespace {

std::atomic<bool> g_cancel{false};

extern "C" void on_worker_signal(int)
{
    g_cancel = true;
}

bool stdin_is_stream()
{
    struct stat st {};
    return ::fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

// The first line of stdin, read byte by byte so nothing after it is consumed.
std::string read_stdin_line()
{
    std::string line;
    char c;
    while (::read(0, &c, 1) == 1 && c != '\n')
        line += c;
    return line;
}

void emit(const Json& event)
{
    const std::string line = event.dump() + "\n";
    if (std::fputs(line.c_str(), stdout) < 0 || std::fflush(stdout) != 0)
        g_cancel = true; // nobody is listening any more
}

} // namespace

int command_worker(const std::vector<std::string>& argv)
{
    Args args("worker", argv, {"--job"}, {"--identify", "--keep-on-eof"});
    if (args.has("--identify")) {
        print_json(host_identity());
        return 0;
    }
    std::signal(SIGPIPE, SIG_IGN);
    std::signal(SIGTERM, on_worker_signal);
    std::signal(SIGINT, on_worker_signal);
    std::string text;
    std::string source = "stdin";
    if (auto file = args.get("--job")) {
        source = *file;
        text = io::read_regular_file(*file, io::metadata_file_cap, "job file");
    } else {
        text = read_stdin_line();
    }
    Json job;
    try {
        job = parse_json_unique<Json>(text, source);
    } catch (const InputError& e) {
        throw InputError(std::string(e.what()) + " (a job is one JSON object; on stdin, on one line)");
    }
    if (!args.has("--keep-on-eof") && stdin_is_stream())
        std::thread([] {
            char buf[4096];
            ssize_t n;
            while ((n = ::read(0, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
            }
            g_cancel = true;
        }).detach();

    Json started = {{"event", "started"},
                    {"pid", ::getpid()},
                    {"kind", job.is_object() && job.contains("kind") && job["kind"].is_string() ? job["kind"]
                                                                                                : Json("")}};
    if (const char* job_id = std::getenv("SLURM_JOB_ID")) { // a Slurm task: who and where (slurm.hpp)
        auto env = [](const char* name) { return std::string(std::getenv(name) ? std::getenv(name) : ""); };
        started["slurm"] = {{"job_id", job_id},
                            {"array_job_id", env("SLURM_ARRAY_JOB_ID")},
                            {"array_task_id", env("SLURM_ARRAY_TASK_ID")},
                            {"node", env("SLURMD_NODENAME")}};
    }
    emit(started);
    auto error = [](const char* kind, const std::string& message, int code) {
        emit({{"event", "error"}, {"error_kind", kind}, {"message", message}});
        return code;
    };
    try {
        const auto result = run_job(job, emit, [] { return g_cancel.load(); });
        emit({{"event", "result"}, {"result", result}});
        return 0;
    } catch (const InputError& e) {
        return error("input", e.what(), 2);
    } catch (const Cancelled&) {
        return error("cancelled", "cancelled", 130);
    } catch (const std::exception& e) {
        return error("internal", e.what(), 1);
    }
}

} // namespace embedlab::cli
