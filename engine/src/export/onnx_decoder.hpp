// The decoder as an ONNX graph (onnx_export.hpp): the forward pass of language_model.cpp
// written node by node, so the two are read side by side. The residual stream is
// [batch * sequence, d] and every linear layer a Gemm on the weight as stored.
// Thread safety: one writer per graph.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"
#include "io/onnx_graph.hpp"

namespace embedlab::onnx {

// A graph input or output: name, element type (kFloat, kInt64) and dimensions, each a
// size or a symbolic name ("batch").
struct GraphValue {
    std::string name;
    int64_t type = kFloat;
    std::vector<std::variant<int64_t, std::string>> dims;
};

struct DecoderGraph {
    std::vector<GraphValue> inputs, outputs;
};

// Adds the whole decoder of `model` to `graph`. InputError naming what cannot be
// written (an embedding without an ONNX lookup, unmerged LoRA adapters).
DecoderGraph write_decoder(const LanguageModel& model, Graph& graph, bool with_past,
                           const ProgressFn& progress);

} // namespace embedlab::onnx
