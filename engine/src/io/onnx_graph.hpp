// The graph an ONNX export builds (onnx_export.hpp): values by name, nodes in the
// order they run, and initializers (the stored tensors). No protobuf here, so that the
// methods' files, which add their own lookups (TokenEmbedding::onnx_lookup), compile
// without it; onnx_export.cpp writes the graph out with the ONNX project's classes.
//
//   onnx::Graph g;
//   auto rows = g.gather(g.initializer("embed.Z", Z), ids);     // [.., k]
//   auto x = g.add(g.matmul(rows, g.initializer("embed.P", P)), g.initializer("embed.mu", mu));
//
// Every helper returns its output's name. Names are made unique from a hint, so two
// calls never clash. Operators are ONNX's default domain at opset 17 (onnx_export.hpp).
// Thread safety: one graph per export, used from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <torch/types.h>

namespace embedlab::onnx {

struct Attribute {
    std::string name;
    std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>> value;
};

struct Node {
    std::string op;
    std::vector<std::string> inputs, outputs;
    std::vector<Attribute> attributes;
};

// A stored tensor: the tensor as given (a model's weight is referenced, not copied) and the
// element type the file holds. A weight held at another float type is converted only as it
// is written, a block at a time, so an export never holds a converted copy of the model.
struct Initializer {
    std::string name;
    torch::Tensor value;    // contiguous
    torch::ScalarType type; // in the file: value's own, or another float type
    uint64_t bytes() const; // in the file
    // Passes the bytes the file holds to `write` in order: value's own memory when the type
    // is its own, else converted blocks of at most 4 MiB.
    void write_bytes(const std::function<void(std::string_view)>& write) const;
};

class Graph {
public:
    // A stored tensor (float32, float16, bfloat16, int64, int32, int8 or uint8, kept in its
    // own type, or in `as`: a float tensor written as another float type), named from `hint`.
    // The tensor is held as given (made contiguous); `as` converts it only when written.
    std::string initializer(const std::string& hint, const torch::Tensor& value,
                            std::optional<torch::ScalarType> as = std::nullopt);
    // The initializer called `name` if the graph has one, else make()'s tensor stored under
    // that name: a tensor a method derives for its lookup (split, packed, converted) is
    // stored once though onnx_lookup runs twice (for the rows and in the tied head).
    std::string initializer_once(const std::string& name, const std::function<torch::Tensor()>& make);

    // A float tensor the export finds stored in another form (a factor a compressed
    // directory keeps at a ggml type, compress --store): wherever initializer() is given a
    // float32 tensor holding exactly these values (in any shape of as many values), the
    // nodes `make` writes compute it from what is stored, once, reshaped to that shape.
    using Substitute = std::function<std::string(Graph&, const std::vector<int64_t>& shape)>;
    void substitute(const std::string& label, torch::Tensor values, Substitute make);
    // The labels of substitutes no initializer() asked for (left as float32 tensors).
    std::vector<std::string> unused_substitutes() const;
    // initializer_once's names are taken under this prefix while a Scope lives (two
    // substitutes built by the same lookup keep their tensors apart).
    class Scope {
    public:
        Scope(Graph& g, const std::string& prefix) : g_(g), saved_(g.scope_) { g.scope_ += prefix; }
        ~Scope() { g_.scope_ = saved_; }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        Graph& g_;
        std::string saved_;
    };
    // 1-D int64 constants (shapes, axes, offsets) and float32 scalars, stored once each.
    std::string ints(const std::vector<int64_t>& values);
    std::string scalar(float value);
    std::string int_scalar(int64_t value);

    // One node with one output (or `outputs` of them), named from `hint` (default: op).
    std::string op(const std::string& type, std::vector<std::string> inputs,
                   std::vector<Attribute> attributes = {}, const std::string& hint = {});
    std::vector<std::string> op_outputs(const std::string& type, std::vector<std::string> inputs, int outputs,
                                        std::vector<Attribute> attributes = {});

    std::string add(const std::string& a, const std::string& b) { return op("Add", {a, b}); }
    std::string sub(const std::string& a, const std::string& b) { return op("Sub", {a, b}); }
    std::string mul(const std::string& a, const std::string& b) { return op("Mul", {a, b}); }
    std::string div(const std::string& a, const std::string& b) { return op("Div", {a, b}); }
    std::string matmul(const std::string& a, const std::string& b) { return op("MatMul", {a, b}); }
    // data[indices] along `axis` (ONNX Gather: indices of any shape).
    std::string gather(const std::string& data, const std::string& indices, int64_t axis = 0);
    std::string reshape(const std::string& x, const std::vector<int64_t>& shape);
    // x reshaped to the 1-D int64 shape computed in the graph (`shape`, a value name).
    std::string reshape_to(const std::string& x, const std::string& shape)
    {
        return op("Reshape", {x, shape});
    }
    std::string transpose(const std::string& x, const std::vector<int64_t>& perm);
    std::string unsqueeze(const std::string& x, const std::vector<int64_t>& axes);
    std::string squeeze(const std::string& x, const std::vector<int64_t>& axes);
    std::string concat(const std::vector<std::string>& xs, int64_t axis);
    // x[starts:ends] along `axes` (ONNX Slice; ends past the size clip).
    std::string slice(const std::string& x, const std::vector<int64_t>& starts,
                      const std::vector<int64_t>& ends, const std::vector<int64_t>& axes);
    std::string reduce_sum(const std::string& x, const std::vector<int64_t>& axes, bool keep_dims);
    std::string cast(const std::string& x, int64_t onnx_type);
    // The leading dimensions of x followed by `tail`, as a 1-D int64 shape: [.., tail...].
    std::string shape_with_tail(const std::string& x, int64_t leading, const std::vector<int64_t>& tail);

    // What the export should tell its user about this graph (a method that stores more
    // than it does, or not exactly what it computes); the export report carries them.
    void note(std::string text);
    const std::vector<std::string>& notes() const { return notes_; }

    const std::vector<Node>& nodes() const { return nodes_; }
    const std::vector<Initializer>& initializers() const { return initializers_; }
    // Names a value from `hint`, unique in the graph.
    std::string fresh(const std::string& hint);

private:
    std::vector<Node> nodes_;
    std::vector<Initializer> initializers_;
    std::vector<std::pair<std::vector<int64_t>, std::string>> int_constants_;
    std::vector<std::pair<float, std::string>> float_constants_;
    std::map<std::string, int> hint_counts_;
    struct Substitution {
        std::string label;
        torch::Tensor values; // float32, flattened
        Substitute make;
        std::vector<std::pair<std::vector<int64_t>, std::string>> made; // by shape
    };
    std::vector<Substitution> substitutes_;
    std::string scope_;
    std::vector<std::string> notes_;
};

// ONNX's element type codes (TensorProto.DataType) for Cast.
inline constexpr int64_t kFloat = 1, kUint8 = 2, kInt8 = 3, kInt32 = 6, kInt64 = 7, kFloat16 = 10;

} // namespace embedlab::onnx
