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

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c);
// embedding_stored = false: the token embedding is supplied separately.
void check_weights(const ModelConfig& c, const WeightMap& weights, const std::string& label,
                   bool embedding_stored = true);

} // namespace embedlab::detail
