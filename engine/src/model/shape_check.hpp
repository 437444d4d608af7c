// Expected tensor names and shapes of each architecture, checked on load so a
// wrong file fails with the tensor's name instead of deep inside a matmul.
#pragma once

#include <string>
#include <vector>

#include "embedlab/model_config.hpp"
#include "embedlab/weights.hpp"

namespace embedlab::detail {

struct ExpectedTensor {
    std::string name;
    std::vector<int64_t> shape;
};

// value_head_dims / mlp_widths: one entry per layer, each within the uncompressed size.
void check_layer_dims(const ModelConfig& c, const std::string& label);
// Tensors outside the layers (`layer` == -1) or of one layer.
std::vector<ExpectedTensor> expected_layer_tensors(const ModelConfig& c, int64_t layer);
// All of them, globals first.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c);
// embedding_stored = false: the token embedding is supplied separately.
void check_weights(const ModelConfig& c, const WeightMap& weights, const std::string& label,
                   bool embedding_stored = true);

} // namespace embedlab::detail
