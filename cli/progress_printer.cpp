#include "progress_printer.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace embedlab::cli {

namespace {
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int)
{
    g_interrupted = true;
}
} // namespace

void install_interrupt_handler()
{
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
}

bool interrupted()
{
    return g_interrupted.load();
}

ProgressPrinter::ProgressPrinter(std::string what, std::string unit, bool quiet)
    : what_(std::move(what)), unit_(std::move(unit)), quiet_(quiet), tty_(::isatty(2))
{
}

ProgressPrinter::~ProgressPrinter()
{
    if (drew_ && tty_)
        std::fputc('\n', stderr);
}

ProgressFn ProgressPrinter::callback()
{
    return [this](int64_t done, int64_t total) { return report(done, total); };
}

bool ProgressPrinter::report(int64_t done, int64_t total)
{
    if (g_interrupted)
        return false;
    if (quiet_ || total <= 0)
        return true;
    const int percent = static_cast<int>(100 * done / total);
    // Counts in "%" units are shares of the stage's work: "(1000/2000 %)" says nothing more.
    const std::string counts =
        unit_ == "%" ? std::string()
                     : " (" + std::to_string(done) + "/" + std::to_string(total) + " " + unit_ + ")";
    if (tty_) {
        std::fprintf(stderr, "\r%s: %3d%%%s", what_.c_str(), percent, counts.c_str());
        drew_ = true;
    } else if (percent / 10 != last_decile_) {
        last_decile_ = percent / 10;
        std::fprintf(stderr, "%s: %d%%%s\n", what_.c_str(), percent, counts.c_str());
    }
    std::fflush(stderr);
    return true;
}

ExperimentProgressFn StagePrinter::callback()
{
    return [this](const ExperimentProgress& p) {
        if (p.stage != stage_ || !printer_) {
            printer_.reset(); // ends the previous stage's line first
            stage_ = p.stage;
            // Evaluations count predicted tokens (perplexity reports per head chunk).
            const char* unit = stage_.rfind("eval", 0) == 0 ? "tokens"
                               : stage_ == "calibrate"      ? "windows"
                               : stage_ == "train"          ? "steps"
                                                            : "%";
            printer_ = std::make_unique<ProgressPrinter>(stage_, unit, quiet_ || stage_ == "load");
        }
        return printer_->callback()(p.done, p.total);
    };
}

} // namespace embedlab::cli
