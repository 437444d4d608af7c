// A Python progress callable as the engine's progress callbacks. The engine runs with the
// GIL released; each report takes it back to call `callback(stage, done, total, overall)`
// and to run Python's signal handlers, so that Ctrl-C (KeyboardInterrupt) cancels. A
// False return, an exception in the callable or a pending Ctrl-C returns false to the
// engine, which stops with Cancelled; rethrow_pending() then raises the callable's
// exception or the KeyboardInterrupt in place of embedlab.Cancelled. The callable must
// return None, True or False: anything else stops the work with a TypeError naming it.
// progress=True is embedlab._progress.Bar (a tqdm bar, or a plain line without tqdm),
// closed when the call ends; progress=False is None.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

#include "embedlab/error.hpp"
#include "embedlab/experiment.hpp"

namespace embedlab::python {

namespace py = pybind11;

class PythonProgress {
public:
    // `name`: the call and the argument, for TypeErrors ("embed: progress"); TypeError now
    // when `callback` is neither None nor callable.
    PythonProgress(py::object callback, std::string name);
    ~PythonProgress(); // with the GIL: closes progress=True's bar
    PythonProgress(const PythonProgress&) = delete;
    PythonProgress& operator=(const PythonProgress&) = delete;
    // Called without the GIL.
    bool report(const std::string& stage, int64_t done, int64_t total, double overall);
    // Called without the GIL: runs `python_call` with it (after Python's signal handlers);
    // false when it returned False, raised, or Ctrl-C arrived.
    bool call(const std::function<py::object()>& python_call);
    ExperimentProgressFn experiment();
    ProgressFn plain(const std::string& stage);
    // With the GIL: raise what stopped the work, if Python stopped it.
    void rethrow_pending();
    // Whether an exception or a Ctrl-C (not a False return) stopped the work.
    bool pending() const { return error_.has_value(); }

private:
    py::object callback_;
    bool own_bar_ = false; // progress=True: callback_ is a Bar to close
    std::string name_;
    std::optional<py::error_already_set> error_;
};

// Runs `work` without the GIL; a cancel Python asked for raises Python's own exception.
template <class Work> auto without_gil(PythonProgress& progress, Work&& work)
{
    try {
        py::gil_scoped_release release;
        return work();
    } catch (const Cancelled&) {
        progress.rethrow_pending();
        throw;
    }
}

} // namespace embedlab::python
