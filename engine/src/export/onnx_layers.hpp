// The nodes both model writers build the same way (onnx_decoder.cpp, onnx_encoder.cpp):
// a stored weight, a linear layer, LayerNorm and the MLP activation, each as the
// forward pass (language_model.cpp, encoder_forward.cpp) computes it.
// Thread safety: one writer per graph.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/weights.hpp"
#include "io/onnx_graph.hpp"

namespace embedlab::onnx {

// The model's tensor `name`, stored as float32 (once: the graph names it by `name`). A
// half-precision weight is converted only as the file is written (Initializer).
inline std::string stored_weight(Graph& g, const WeightMap& w, const std::string& name)
{
    return g.initializer(name, w.at(name), torch::kFloat32);
}

// x [N, in] W^T (+ b) for a weight [out, in] as stored (Gemm reads it transposed); the
// bias when the model has one.
inline std::string gemm_linear(Graph& g, const WeightMap& w, const std::string& x, const std::string& name)
{
    std::vector<std::string> in{x, stored_weight(g, w, name + ".weight")};
    if (w.count(name + ".bias"))
        in.push_back(stored_weight(g, w, name + ".bias"));
    return g.op("Gemm", in, {{"transB", int64_t{1}}}, name);
}

// LayerNorm over the last axis with the model's weight and bias.
inline std::string layer_norm(Graph& g, const WeightMap& w, const std::string& x, const std::string& name,
                              double eps)
{
    return g.op("LayerNormalization",
                {x, stored_weight(g, w, name + ".weight"), stored_weight(g, w, name + ".bias")},
                {{"axis", int64_t{-1}}, {"epsilon", static_cast<float>(eps)}}, name);
}

// The MLP activation by its Hugging Face name, as model/activation.hpp maps them.
inline std::string mlp_activation(Graph& g, const std::string& x, const std::string& name)
{
    if (name == "relu")
        return g.op("Relu", {x});
    if (name == "gelu_ggml_f16") // a parity test's emulation of ggml's F16 table, no ONNX op
        throw InputError("activation gelu_ggml_f16 (llama.cpp's F16 GELU table) has no ONNX form");
    const auto half_x = g.mul(x, g.scalar(0.5f));
    if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") { // tanh approximation
        const auto cube = g.mul(g.mul(x, x), x);
        const auto inner = g.mul(g.add(x, g.mul(cube, g.scalar(0.044715f))),
                                 g.scalar(static_cast<float>(std::sqrt(2.0 / M_PI))));
        return g.mul(half_x, g.add(g.scalar(1.0f), g.op("Tanh", {inner})));
    }
    if (name == "gelu")
        return g.mul(half_x,
                     g.add(g.scalar(1.0f), g.op("Erf", {g.mul(x, g.scalar(static_cast<float>(M_SQRT1_2)))})));
    return g.mul(x, g.op("Sigmoid", {x})); // silu / swish
}

} // namespace embedlab::onnx
