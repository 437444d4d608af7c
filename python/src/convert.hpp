// Conversions between the engine's values and Python's: JSON <-> dict/list (through
// Python's json module, so every number keeps its digits), tensors -> NumPy arrays
// (zero-copy for a contiguous float or integer CPU tensor, the array holding a
// reference to its storage), array-likes -> token ids. Call with the GIL held.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include <nlohmann/json.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

namespace embedlab::python {

namespace py = pybind11;

py::object to_python(const nlohmann::ordered_json& j);
// Any JSON-able Python value (NumPy scalars and arrays through their tolist(), paths as
// str). TypeError for another type, InputError for NaN or an infinity, each naming `what`.
nlohmann::ordered_json to_json(const py::handle& value, const std::string& what);

// A NumPy array viewing `t` (made contiguous first if it is not).
py::array to_numpy(const torch::Tensor& t);

// A 1-D NumPy array that owns `values` (moved in, not copied); `dtype` overrides NumPy's
// type for T (uint8 flags as "bool").
template <class T> py::array vector_array(std::vector<T> values, const char* dtype = nullptr)
{
    auto* held = new std::vector<T>(std::move(values));
    py::capsule base(held, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    const py::dtype type = dtype ? py::dtype(dtype) : py::dtype::of<T>();
    return py::array(type, {static_cast<py::ssize_t>(held->size())}, {}, held->data(), base);
}

// Arguments checked as Python checks its own: `what` names the call and the argument
// ("load: path"). TypeError naming the type expected and the type given.
std::string type_name(const py::handle& value);
// A path: str, bytes or os.PathLike (pathlib.Path), as open() takes, in the file system's
// encoding; InputError for a NUL character (no file name holds one).
std::string path_arg(const py::handle& value, const std::string& what);
bool is_path_like(const py::handle& value);
// A str.
std::string str_arg(const py::handle& value, const std::string& what);
// A list or tuple of str (TypeError naming the first item that is not).
std::vector<std::string> str_list_arg(const py::handle& value, const std::string& what);

// A 1-D array-like of integers as token ids, each in [0, vocab); InputError naming
// `what` and the first id outside it.
std::vector<int32_t> token_ids(const py::handle& ids, int64_t vocab, const std::string& what);

// A token table [V, d]: anything np.asarray takes (a torch tensor through __array__) of
// real numbers, copied as float32. TypeError for complex, object or text values;
// InputError for another rank, a shape other than [rows, cols] (-1: any, > 0) or a NaN
// or infinity, each naming `what` and what was expected.
torch::Tensor table_arg(const py::handle& value, int64_t rows, int64_t cols, const std::string& what);

} // namespace embedlab::python
