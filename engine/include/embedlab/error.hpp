// Error types and the progress callback shared by every engine area.
//
//   try { auto m = embedlab::load_model(path); }
//   catch (const embedlab::InputError& e) { /* e.what(): "<file>: <problem>" */ }
//
// Thread safety: plain types, no shared state.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace embedlab {

// Bad user input (file, argument, text). The message names the file and the
// problem so a user can act on it; the CLI maps it to exit code 2.
class InputError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Thrown when a progress callback asked to stop.
class Cancelled : public std::runtime_error {
public:
    Cancelled() : std::runtime_error("cancelled") {}
};

// progress(done, total) -> keep going? Returning false cancels the call,
// which then throws Cancelled. An empty function means "no progress wanted".
using ProgressFn = std::function<bool(int64_t done, int64_t total)>;

inline void report_progress(const ProgressFn& progress, int64_t done, int64_t total)
{
    if (progress && !progress(done, total))
        throw Cancelled();
}

} // namespace embedlab
