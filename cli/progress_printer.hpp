// Progress on stderr: a live line on a terminal, a line per 10% otherwise.
// Also owns the SIGINT flag: Ctrl-C makes the progress callback cancel.
#pragma once

#include <string>

#include "embedlab/error.hpp"

namespace embedlab::cli {

void install_interrupt_handler();

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

} // namespace embedlab::cli
