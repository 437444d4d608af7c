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
// Any JSON-able Python value (NumPy scalars and arrays through their tolist()).
nlohmann::ordered_json to_json(const py::handle& value);

// A NumPy array viewing `t` (made contiguous first if it is not).
py::array to_numpy(const torch::Tensor& t);

// A 1-D array-like of integers as token ids, each in [0, vocab); InputError naming
// `what` and the first id outside it.
std::vector<int32_t> token_ids(const py::handle& ids, int64_t vocab, const std::string& what);

} // namespace embedlab::python
