#include "convert.hpp"

#include "embedlab/error.hpp"

namespace embedlab::python {

py::object to_python(const nlohmann::ordered_json& j)
{
    return py::module_::import("json").attr("loads")(j.dump());
}

nlohmann::ordered_json to_json(const py::handle& value)
{
    const auto dumps = py::module_::import("json").attr("dumps");
    const auto tolist = py::cpp_function([](const py::object& o) -> py::object {
        if (py::hasattr(o, "tolist"))
            return o.attr("tolist")();
        if (py::isinstance(o, py::module_::import("os").attr("PathLike")))
            return py::str(o);
        throw py::type_error("a value of type " + std::string(py::str(o.get_type().attr("__name__"))) +
                             " is not a request value (numbers, strings, booleans, lists)");
    });
    return nlohmann::ordered_json::parse(std::string(py::str(dumps(value, py::arg("default") = tolist))));
}

py::array to_numpy(const torch::Tensor& tensor)
{
    // NumPy's names for the types an array keeps; f16, bf16 and the rest become float32 (a copy).
    static const std::pair<torch::ScalarType, const char*> kept[] = {
        {torch::kFloat32, "float32"}, {torch::kFloat64, "float64"}, {torch::kInt64, "int64"},
        {torch::kInt32, "int32"},     {torch::kInt16, "int16"},     {torch::kUInt8, "uint8"}};
    auto t = tensor.is_contiguous() ? tensor : tensor.contiguous();
    const char* name = nullptr;
    for (const auto& [type, numpy_name] : kept)
        if (t.scalar_type() == type)
            name = numpy_name;
    if (!name) {
        t = t.to(torch::kFloat32);
        name = "float32";
    }
    const py::dtype dtype(name);
    std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end());
    std::vector<py::ssize_t> strides;
    for (int64_t s : t.strides())
        strides.push_back(static_cast<py::ssize_t>(s * t.element_size()));
    // The capsule owns a handle on the storage: the array keeps the values alive.
    auto* owner = new torch::Tensor(t);
    py::capsule base(owner, [](void* p) { delete static_cast<torch::Tensor*>(p); });
    return py::array(dtype, shape, strides, t.data_ptr(), base);
}

std::vector<int32_t> token_ids(const py::handle& ids, int64_t vocab, const std::string& what)
{
    const py::array raw = py::array::ensure(ids);
    const char kind = raw ? raw.dtype().kind() : '?';
    if (!raw || raw.ndim() != 1 || (raw.size() > 0 && kind != 'i' && kind != 'u'))
        throw InputError(what + ": token ids must be a 1-D sequence of integers");
    const auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(raw);
    std::vector<int32_t> out(static_cast<size_t>(a.size()));
    const int64_t* p = a.data();
    for (py::ssize_t i = 0; i < a.size(); ++i) {
        if (p[i] < 0 || p[i] >= vocab)
            throw InputError(what + ": token id " + std::to_string(p[i]) + " at position " +
                             std::to_string(i) + " is outside the model's vocabulary of " +
                             std::to_string(vocab));
        out[static_cast<size_t>(i)] = static_cast<int32_t>(p[i]);
    }
    return out;
}

} // namespace embedlab::python
