#include "convert.hpp"

#include "embedlab/error.hpp"
#include "embedlab/non_finite.hpp"

namespace embedlab::python {

py::object to_python(const nlohmann::ordered_json& j)
{
    return py::module_::import("json").attr("loads")(j.dump());
}

nlohmann::ordered_json to_json(const py::handle& value, const std::string& what)
{
    const auto dumps = py::module_::import("json").attr("dumps");
    const auto tolist = py::cpp_function([what](const py::object& o) -> py::object {
        if (py::hasattr(o, "tolist"))
            return o.attr("tolist")();
        if (is_path_like(o))
            return py::str(path_arg(o, what));
        throw py::type_error(what + " must be a number, a str, a bool or a list of them, not " +
                             type_name(o));
    });
    py::object text;
    try {
        // allow_nan=False: JSON has no NaN; json.dumps would write one nlohmann cannot read.
        text = dumps(value, py::arg("default") = tolist, py::arg("allow_nan") = false);
    } catch (py::error_already_set& e) {
        if (!e.type().is(py::handle(PyExc_ValueError))) // json's own; embedlab.InputError passes
            throw;
        throw InputError(what + " must be a finite number, not NaN or an infinity");
    }
    return nlohmann::ordered_json::parse(text.cast<std::string>());
}

std::string type_name(const py::handle& value)
{
    return py::str(py::type::handle_of(value).attr("__name__"));
}

bool is_path_like(const py::handle& value)
{
    return py::isinstance<py::str>(value) || py::isinstance<py::bytes>(value) ||
           py::isinstance(value, py::module_::import("os").attr("PathLike"));
}

std::string path_arg(const py::handle& value, const std::string& what)
{
    if (!is_path_like(value))
        throw py::type_error(what + " must be a str or an os.PathLike (pathlib.Path), not " +
                             type_name(value));
    // fsencode: os.fspath, then the file system's encoding (undecodable bytes kept as they are).
    auto path = std::string(py::bytes(py::module_::import("os").attr("fsencode")(value)));
    if (path.find('\0') != std::string::npos)
        throw InputError(what + " holds a NUL character ('\\x00'), which no file name can hold");
    return path;
}

std::string str_arg(const py::handle& value, const std::string& what)
{
    if (!py::isinstance<py::str>(value))
        throw py::type_error(what + " must be a str, not " + type_name(value));
    return value.cast<std::string>();
}

std::vector<std::string> str_list_arg(const py::handle& value, const std::string& what)
{
    if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
        throw py::type_error(what + " must be a list of str, not " + type_name(value) +
                             (py::hasattr(value, "__next__") ? " (pass list(...))" : ""));
    std::vector<std::string> out;
    const auto items = py::reinterpret_borrow<py::sequence>(value);
    for (size_t i = 0; i < items.size(); ++i)
        out.push_back(str_arg(items[i], what + "[" + std::to_string(i) + "]"));
    return out;
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

torch::Tensor table_arg(const py::handle& value, int64_t rows, int64_t cols, const std::string& what)
{
    const py::object numpy = py::module_::import("numpy");
    const py::array raw = numpy.attr("asarray")(value);
    const char kind = raw.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u')
        throw py::type_error(what + " must be an array of real numbers [V, d] (converted to float32), not " +
                             type_name(value) + " of dtype " + std::string(py::str(raw.dtype())));
    const auto shape_text = [&] {
        std::string s = "[";
        for (py::ssize_t i = 0; i < raw.ndim(); ++i)
            s += (i ? ", " : "") + std::to_string(raw.shape(i));
        return s + "]";
    };
    const auto expected = [&] {
        return "[" + (rows > 0 ? std::to_string(rows) : std::string("V")) + ", " +
               (cols > 0 ? std::to_string(cols) : std::string("d")) + "]";
    };
    if (raw.ndim() != 2 || (rows > 0 && raw.shape(0) != rows) || (cols > 0 && raw.shape(1) != cols) ||
        raw.shape(0) < 1 || raw.shape(1) < 1)
        throw InputError(what + " must have shape " + expected() + ", got " + shape_text());
    const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(raw);
    // A copy the model owns: the caller's array may change or go.
    auto t =
        torch::from_blob(const_cast<float*>(a.data()), {a.shape(0), a.shape(1)}, torch::kFloat32).clone();
    if (!all_finite(t))
        throw InputError(what + " must hold finite values: it has NaN or infinity" +
                         (kind == 'f' && raw.itemsize() > 4 ? " (after conversion to float32)" : ""));
    return t;
}

} // namespace embedlab::python
