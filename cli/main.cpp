// embedlab-cli: the engine, headless. Exit codes: 0 success, 2 bad input (one
// line on stderr naming the file and the problem), 1 internal error, 130 cancelled.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <torch/version.h>
#include <unistd.h>

#include "common.hpp"
#include "embedlab/error.hpp"
#include "embedlab/text_format.hpp"
#include "help.hpp"
#include "progress_printer.hpp"

namespace {

// One line on stderr; control characters from files and arguments escaped, so a
// crafted name cannot move the cursor or retitle the terminal.
void report(const std::string& message)
{
    std::fprintf(stderr, "embedlab-cli: %s\n", embedlab::printable(message, message.size()).c_str());
}

int print_version(const std::vector<std::string>&)
{
    std::printf("embedlab-cli %s (libtorch %s)\n", EMBEDLAB_VERSION, TORCH_VERSION);
    return 0;
}

// Every command and the function that runs it; help.cpp's command_groups() lists the
// same names with their summaries (CliHelp.EveryCommandHasHelp checks both ways).
struct CommandEntry {
    const char* name;
    int (*run)(const std::vector<std::string>&);
};
constexpr CommandEntry kCommands[] = {
    {"inspect", embedlab::cli::command_inspect},
    {"eval", embedlab::cli::command_eval},
    {"tokenize", embedlab::cli::command_tokenize},
    {"embed", embedlab::cli::command_embed},
    {"generate", embedlab::cli::command_generate},
    {"export", embedlab::cli::command_export},
    {"account", embedlab::cli::command_account},
    {"compress", embedlab::cli::command_compress},
    {"trim", embedlab::cli::command_trim},
    {"sweep", embedlab::cli::command_sweep},
    {"sweep-status", embedlab::cli::command_sweep_status},
    {"sweep-collect", embedlab::cli::command_sweep_collect},
    {"neighbours", embedlab::cli::command_neighbours},
    {"fourier-map", embedlab::cli::command_fourier_map},
    {"importance", embedlab::cli::command_importance},
    {"allocate", embedlab::cli::command_allocate},
    {"task", embedlab::cli::command_task},
    {"bench", embedlab::cli::command_bench},
    {"worker", embedlab::cli::command_worker},
    {"remote", embedlab::cli::command_remote},
    {"finetune", embedlab::cli::command_finetune},
    {"train", embedlab::cli::command_train},
    {"synth", embedlab::cli::command_synth},
    {"figure", [](const std::vector<std::string>& a) { return embedlab::cli::command_figure("figure", a); }},
    {"demo", [](const std::vector<std::string>& a) { return embedlab::cli::command_figure("demo", a); }},
    {"version", print_version},
};

const CommandEntry* find_command(const std::string& name)
{
    for (const auto& c : kCommands)
        if (name == c.name)
            return &c;
    return nullptr;
}

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
    report(std::string("cannot write the standard output: ") +
           (code != 0 ? std::strerror(code) : "write error") + " (what was printed is incomplete)");
    return status == 0 ? 2 : status;
}

int run(int argc, char** argv)
{
    using namespace embedlab;
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || (args[0] == "help" && args.size() == 1)) {
        std::fputs(cli::command_list().c_str(), args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    // help COMMAND, or COMMAND [SUBCOMMAND] --help: that command's options.
    const bool asks_help =
        args[0] == "help" || (args.size() >= 2 && (args.back() == "--help" || args.back() == "-h"));
    if (args.size() == 2 && args[0] == "help" && args[1] == "--commands") { // what this program runs
        for (const auto& c : kCommands)
            std::printf("%s\n", c.name);
        return 0;
    }
    if (asks_help) {
        try {
            const std::string& name = args[0] == "help" ? args[1] : args[0];
            std::fputs(cli::command_help(name == "--version" ? "version" : name).c_str(), stdout);
            return 0;
        } catch (const InputError& e) {
            report(e.what());
            return 2;
        }
    }
    const std::string command = args[0];
    args.erase(args.begin());
    if (command != "version")
        restart_with_passive_openmp(argv);
    try {
        init_runtime();
    } catch (const InputError& e) {
        report(e.what());
        return 2;
    }
    cli::install_interrupt_handler();
    try {
        if (const auto* run = find_command(command))
            return run->run(args);
        if (command == "--version")
            return print_version(args);
        report("unknown command '" + command + "' (see embedlab-cli help)");
        return 2;
    } catch (const InputError& e) {
        report(e.what());
        return 2;
    } catch (const Cancelled&) {
        std::fprintf(stderr, "embedlab-cli: cancelled\n");
        return 130;
    } catch (const std::filesystem::filesystem_error& e) {
        // A path the user gave that the file system refuses (a symlink loop, an
        // empty name, no permission): their input, not an internal error.
        const std::string path = e.path1().empty() ? std::string("(empty path)") : e.path1().string();
        report(path + ": " + e.code().message());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "embedlab-cli: out of memory (try a smaller --ctx, batch or model)\n");
        return 2;
    } catch (const c10::Error& e) {
        // libtorch's message without its stack trace: one line, never 24.
        const std::string what = e.what_without_backtrace();
        const std::string line = what.substr(0, what.find('\n'));
        if (what.find("can't allocate memory") != std::string::npos) {
            report("out of memory: " + line + " (try a smaller --ctx, batch or model)");
            return 2;
        }
        report("internal error (libtorch): " + line);
        return 1;
    } catch (const std::exception& e) {
        const std::string what = e.what();
        report("internal error: " + what.substr(0, what.find('\n')));
        return 1;
    }
}

} // namespace

// Issue 58: the tests count the CLI processes they start and their CPU time
// (scripts/test.sh sets EMBEDLAB_CLI_LOG): one line a run, appended atomically.
void log_process(int argc, char** argv, int status)
{
    const char* path = std::getenv("EMBEDLAB_CLI_LOG");
    if (!path || !*path)
        return;
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const double cpu = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                       static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
    std::string command = argc > 1 ? std::string(argv[1]).substr(0, 32) : "";
    for (char& c : command)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-')
            c = '_';
    const std::string line =
        std::to_string(cpu) + " " + std::to_string(status) + " " + (command.empty() ? "-" : command) + "\n";
    if (const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644); fd >= 0) {
        [[maybe_unused]] const auto written = ::write(fd, line.data(), line.size());
        ::close(fd);
    }
}

int main(int argc, char** argv)
{
    const int status = finish_stdout(run(argc, argv));
    log_process(argc, argv, status);
    return status;
}
