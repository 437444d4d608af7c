#include "progress.hpp"

#include "convert.hpp"

namespace embedlab::python {

PythonProgress::PythonProgress(py::object callback, std::string name)
    : callback_(std::move(callback)), name_(std::move(name))
{
    const bool is_progress = name_.ends_with(": progress"); // not generate's on_token
    if (is_progress && py::isinstance<py::bool_>(callback_)) {
        own_bar_ = callback_.cast<bool>();
        // The call's name without the argument's: "compress: progress" -> "compress".
        const auto label = name_.substr(0, name_.find(':'));
        callback_ = own_bar_ ? py::module_::import("embedlab._progress").attr("Bar")(label) : py::none();
    }
    if (!callback_.is_none() && !PyCallable_Check(callback_.ptr()))
        throw py::type_error(name_ +
                             (is_progress ? " must be a callable, True, False or None, not "
                                          : " must be a callable or None, not ") +
                             type_name(callback_));
}

PythonProgress::~PythonProgress()
{
    if (!own_bar_)
        return;
    try {
        callback_.attr("close")();
    } catch (py::error_already_set& e) {
        e.discard_as_unraisable(__func__); // a destructor cannot raise
    }
}

bool PythonProgress::report(const std::string& stage, int64_t done, int64_t total, double overall)
{
    return call([&] { return callback_.is_none() ? py::none() : callback_(stage, done, total, overall); });
}

bool PythonProgress::call(const std::function<py::object()>& python_call)
{
    py::gil_scoped_acquire acquire;
    if (error_)
        return false;
    try {
        if (PyErr_CheckSignals() != 0)
            throw py::error_already_set();
        const py::object r = python_call();
        if (r.is_none())
            return true;
        // Python's bool or NumPy's: a str ("no") or a number is a mistake, not an answer.
        if (!py::isinstance<py::bool_>(r) && !py::isinstance(r, py::module_::import("numpy").attr("bool_"))) {
            PyErr_SetString(PyExc_TypeError,
                            (name_ + " must return None, True or False, not " + type_name(r)).c_str());
            throw py::error_already_set();
        }
        if (!PyObject_IsTrue(r.ptr()))
            return false;
    } catch (py::error_already_set& e) {
        error_.emplace(std::move(e));
        return false;
    }
    return true;
}

ExperimentProgressFn PythonProgress::experiment()
{
    return [this](const ExperimentProgress& p) { return report(p.stage, p.done, p.total, p.overall); };
}

ProgressFn PythonProgress::plain(const std::string& stage)
{
    return [this, stage](int64_t done, int64_t total) {
        return report(stage, done, total, total > 0 ? double(done) / double(total) : 0.0);
    };
}

void PythonProgress::rethrow_pending()
{
    if (error_) {
        auto e = std::move(*error_);
        error_.reset();
        throw e;
    }
}

} // namespace embedlab::python
