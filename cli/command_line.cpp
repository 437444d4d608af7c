// embedlab-cli's command line: the dispatch to each command and what an error becomes
// (exit 2 and one line on stderr for bad input, 1 internal, 130 cancelled).
#include "command_line.hpp"
#include "run_in_process.hpp"

#include <cstdio>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include <torch/version.h>

#include "common.hpp"
#include "embedlab/error.hpp"
#include "embedlab/text_format.hpp"
#include "help.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

void report_error(const std::string& message)
{
    std::fprintf(stderr, "embedlab-cli: %s\n", embedlab::printable(message, message.size()).c_str());
}

} // namespace embedlab::cli

namespace {

using embedlab::cli::report_error;

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

} // namespace

namespace embedlab::cli {

int run_command_line(int argc, char** argv, bool own_process)
{
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || (args[0] == "help" && args.size() == 1)) {
        std::fputs(command_list().c_str(), args.empty() ? stderr : stdout);
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
            std::fputs(command_help(name == "--version" ? "version" : name).c_str(), stdout);
            return 0;
        } catch (const InputError& e) {
            report_error(e.what());
            return 2;
        }
    }
    const std::string command = args[0];
    args.erase(args.begin());
    if (own_process && command != "version")
        restart_with_passive_openmp(argv);
    try {
        init_runtime();
    } catch (const InputError& e) {
        report_error(e.what());
        return 2;
    }
    if (own_process)
        install_interrupt_handler();
    try {
        if (const auto* run = find_command(command))
            return run->run(args);
        if (command == "--version")
            return print_version(args);
        report_error("unknown command '" + command + "' (see embedlab-cli help)");
        return 2;
    } catch (const InputError& e) {
        report_error(e.what());
        return 2;
    } catch (const Cancelled&) {
        std::fprintf(stderr, "embedlab-cli: cancelled\n");
        return 130;
    } catch (const std::filesystem::filesystem_error& e) {
        // A path the user gave that the file system refuses (a symlink loop, an
        // empty name, no permission): their input, not an internal error.
        const std::string path = e.path1().empty() ? std::string("(empty path)") : e.path1().string();
        report_error(path + ": " + e.code().message());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "embedlab-cli: out of memory (try a smaller --ctx, batch or model)\n");
        return 2;
    } catch (const c10::Error& e) {
        // libtorch's message without its stack trace: one line, never 24.
        const std::string what = e.what_without_backtrace();
        const std::string line = what.substr(0, what.find('\n'));
        if (what.find("can't allocate memory") != std::string::npos) {
            report_error("out of memory: " + line + " (try a smaller --ctx, batch or model)");
            return 2;
        }
        report_error("internal error (libtorch): " + line);
        return 1;
    } catch (const std::exception& e) {
        const std::string what = e.what();
        report_error("internal error: " + what.substr(0, what.find('\n')));
        return 1;
    }
}

} // namespace embedlab::cli

namespace embedlab {

int run_cli_in_process(const std::vector<std::string>& args)
{
    std::vector<std::string> words{"embedlab-cli"};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& w : words)
        argv.push_back(w.data());
    argv.push_back(nullptr);
    const int status = cli::run_command_line(static_cast<int>(words.size()), argv.data(), false);
    std::fflush(stdout);
    std::fflush(stderr);
    return status;
}

} // namespace embedlab
