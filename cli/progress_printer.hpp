// Progress on stderr: a live line on a terminal, a line per 10% otherwise.
// Also owns the SIGINT flag: Ctrl-C makes the progress callback cancel.
#pragma once

#include <memory>
#include <string>

#include "embedlab/error.hpp"
#include "embedlab/experiment.hpp"

namespace embedlab::cli {

void install_interrupt_handler();
// Ctrl-C (or SIGTERM) arrived since the handler was installed.
bool interrupted();

class ProgressPrinter {
public:
    ProgressPrinter(std::string what, std::string unit, bool quiet);
    ~ProgressPrinter();
    ProgressFn callback();

private:
    bool report(int64_t done, int64_t total);
    std::string what_, unit_;
    bool quiet_, tty_;
    int last_decile_ = -1;
    bool drew_ = false;
};

// An experiment's stages (experiment.hpp), each on a progress line of its own.
class StagePrinter {
public:
    explicit StagePrinter(bool quiet) : quiet_(quiet) {}
    ExperimentProgressFn callback();

private:
    bool quiet_;
    std::string stage_;
    std::unique_ptr<ProgressPrinter> printer_;
};

} // namespace embedlab::cli
