#include "io/onnx_graph.hpp"

#include <algorithm>
#include <cstring>

#include "embedlab/error.hpp"

namespace embedlab::onnx {

std::string Graph::fresh(const std::string& hint)
{
    const int n = hint_counts_[hint]++;
    return n == 0 ? hint : hint + "." + std::to_string(n);
}

void Graph::note(std::string text)
{
    for (const auto& n : notes_)
        if (n == text)
            return; // a lookup and its head may both say it
    notes_.push_back(std::move(text));
}

namespace {

bool storable(torch::ScalarType t)
{
    return t == torch::kFloat32 || t == torch::kFloat16 || t == torch::kBFloat16 || t == torch::kInt64 ||
           t == torch::kInt32 || t == torch::kInt8 || t == torch::kUInt8;
}

// Values converted at a time when a tensor is written as another type: 4 MiB of float32.
constexpr int64_t kConvertBlock = int64_t{1} << 20;

} // namespace

uint64_t Initializer::bytes() const
{
    return static_cast<uint64_t>(value.numel()) * static_cast<uint64_t>(c10::elementSize(type));
}

void Initializer::write_bytes(const std::function<void(std::string_view)>& write) const
{
    if (value.scalar_type() == type) {
        write(std::string_view(static_cast<const char*>(value.data_ptr()), bytes()));
        return;
    }
    const auto flat = value.reshape({-1});
    for (int64_t at = 0; at < flat.numel(); at += kConvertBlock) {
        const auto block =
            flat.narrow(0, at, std::min(kConvertBlock, flat.numel() - at)).to(type).contiguous();
        write(std::string_view(static_cast<const char*>(block.data_ptr()),
                               static_cast<size_t>(block.numel()) * block.element_size()));
    }
}

std::string Graph::initializer(const std::string& hint, const torch::Tensor& value,
                               std::optional<torch::ScalarType> as)
{
    const auto t = value.scalar_type();
    const auto stored = as.value_or(t);
    if (!storable(t) || !storable(stored))
        throw InputError("ONNX export: tensor '" + hint + "' has a type ONNX export does not store (" +
                         std::string(c10::toString(storable(t) ? stored : t)) + ")");
    if (stored != t && !(c10::isFloatingType(t) && c10::isFloatingType(stored)))
        throw InputError("ONNX export: tensor '" + hint + "' (" + std::string(c10::toString(t)) +
                         ") cannot be written as " + std::string(c10::toString(stored)));
    if (stored == torch::kFloat32)
        for (auto& sub : substitutes_) {
            if (sub.values.numel() != value.numel() ||
                !torch::equal(sub.values, value.reshape({-1}).to(torch::kFloat32)))
                continue;
            const auto shape = value.sizes().vec();
            for (const auto& [s, name] : sub.made)
                if (s == shape)
                    return name;
            auto name = sub.make(*this, shape);
            sub.made.emplace_back(shape, name);
            return name;
        }
    // The same tensor given twice (a tied head's table) is stored once.
    for (const auto& i : initializers_)
        if (i.value.data_ptr() == value.data_ptr() && i.value.sizes() == value.sizes() &&
            i.value.scalar_type() == t && i.type == stored && value.is_contiguous())
            return i.name;
    auto name = fresh(hint);
    initializers_.push_back({name, value.contiguous(), stored});
    return name;
}

void Graph::substitute(const std::string& label, torch::Tensor values, Substitute make)
{
    substitutes_.push_back(
        {label, values.to(torch::kFloat32).reshape({-1}).contiguous(), std::move(make), {}});
}

std::vector<std::string> Graph::unused_substitutes() const
{
    std::vector<std::string> unused;
    for (const auto& sub : substitutes_)
        if (sub.made.empty())
            unused.push_back(sub.label);
    return unused;
}

std::string Graph::initializer_once(const std::string& unscoped, const std::function<torch::Tensor()>& make)
{
    const std::string name = scope_ + unscoped;
    for (const auto& i : initializers_)
        if (i.name == name)
            return name;
    if (hint_counts_.count(name))
        throw InputError("ONNX export: the name '" + name + "' is taken by another value");
    return initializer(name, make());
}

std::string Graph::ints(const std::vector<int64_t>& values)
{
    for (const auto& [v, name] : int_constants_)
        if (v == values)
            return name;
    auto name = initializer("const.ints", torch::tensor(values, torch::kLong));
    int_constants_.emplace_back(values, name);
    return name;
}

std::string Graph::scalar(float value)
{
    for (const auto& [v, name] : float_constants_)
        if (std::memcmp(&v, &value, sizeof v) == 0)
            return name;
    auto name = initializer("const.float", torch::full({}, value, torch::kFloat32));
    float_constants_.emplace_back(value, name);
    return name;
}

std::string Graph::int_scalar(int64_t value)
{
    return initializer("const.int", torch::full({}, value, torch::kLong));
}

std::string Graph::op(const std::string& type, std::vector<std::string> inputs,
                      std::vector<Attribute> attributes, const std::string& hint)
{
    auto out = fresh(hint.empty() ? type : hint);
    nodes_.push_back({type, std::move(inputs), {out}, std::move(attributes)});
    return out;
}

std::vector<std::string> Graph::op_outputs(const std::string& type, std::vector<std::string> inputs,
                                           int outputs, std::vector<Attribute> attributes)
{
    std::vector<std::string> out;
    for (int i = 0; i < outputs; ++i)
        out.push_back(fresh(type));
    nodes_.push_back({type, std::move(inputs), out, std::move(attributes)});
    return out;
}

std::string Graph::gather(const std::string& data, const std::string& indices, int64_t axis)
{
    return op("Gather", {data, indices}, {{"axis", axis}});
}

std::string Graph::reshape(const std::string& x, const std::vector<int64_t>& shape)
{
    return op("Reshape", {x, ints(shape)});
}

std::string Graph::transpose(const std::string& x, const std::vector<int64_t>& perm)
{
    return op("Transpose", {x}, {{"perm", perm}});
}

std::string Graph::unsqueeze(const std::string& x, const std::vector<int64_t>& axes)
{
    return op("Unsqueeze", {x, ints(axes)});
}

std::string Graph::squeeze(const std::string& x, const std::vector<int64_t>& axes)
{
    return op("Squeeze", {x, ints(axes)});
}

std::string Graph::concat(const std::vector<std::string>& xs, int64_t axis)
{
    return op("Concat", xs, {{"axis", axis}});
}

std::string Graph::slice(const std::string& x, const std::vector<int64_t>& starts,
                         const std::vector<int64_t>& ends, const std::vector<int64_t>& axes)
{
    return op("Slice", {x, ints(starts), ints(ends), ints(axes)});
}

std::string Graph::reduce_sum(const std::string& x, const std::vector<int64_t>& axes, bool keep_dims)
{
    return op("ReduceSum", {x, ints(axes)}, {{"keepdims", int64_t{keep_dims ? 1 : 0}}});
}

std::string Graph::cast(const std::string& x, int64_t onnx_type)
{
    return op("Cast", {x}, {{"to", onnx_type}});
}

std::string Graph::shape_with_tail(const std::string& x, int64_t leading, const std::vector<int64_t>& tail)
{
    auto head = op("Shape", {x}, {{"end", leading}});
    return concat({head, ints(tail)}, 0);
}

} // namespace embedlab::onnx
