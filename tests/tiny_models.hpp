// Small random models built in memory, so forward-pass invariants are tested
// without ../shared.
#pragma once

#include "embedlab/model.hpp"

namespace embedlab::test {

inline ModelConfig tiny_config(Architecture arch)
{
    ModelConfig c;
    c.arch = arch;
    c.vocab_size = 50;
    c.hidden_size = 16;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = arch == Architecture::Llama ? 2 : 4;
    c.intermediate_size = arch == Architecture::Llama ? 24 : 64;
    c.max_positions = 32;
    c.tied_embeddings = arch == Architecture::GPT2;
    c.activation = arch == Architecture::GPT2 ? "gelu_new" : "silu";
    return c;
}

inline WeightMap random_weights(const ModelConfig& c, uint64_t seed = 7);

} // namespace embedlab::test

#include "model/shape_check.hpp"

inline embedlab::WeightMap embedlab::test::random_weights(const ModelConfig& c, uint64_t seed)
{
    torch::manual_seed(seed);
    WeightMap w;
    for (const auto& e : detail::expected_tensors(c)) {
        const bool norm = e.name.find("ln_") != std::string::npos || e.name.find("norm") != std::string::npos;
        if (norm && e.name.find(".bias") == std::string::npos)
            w[e.name] = 1.0 + 0.1 * torch::randn(e.shape);
        else
            w[e.name] = 0.2 * torch::randn(e.shape);
    }
    return w;
}
