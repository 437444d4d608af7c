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

// n ids spread over [0, vocab) by a fixed stride: a deterministic stand-in for text.
inline std::vector<int32_t> spread_ids(int64_t n, int64_t vocab, int64_t stride = 7919, int64_t offset = 13)
{
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i)
        ids.push_back(static_cast<int32_t>((i * stride + offset) % vocab));
    return ids;
}

// A Hugging Face style directory (config.json, model.safetensors and a support
// file) holding the random tiny model.
inline std::filesystem::path write_tiny_hf_model(const std::filesystem::path& dir, Architecture arch);
// The same for any small config (gpt2 or llama) and its weights.
inline std::filesystem::path write_tiny_hf_model(const std::filesystem::path& dir, const ModelConfig& c,
                                                 const WeightMap& weights);

} // namespace embedlab::test

#include <nlohmann/json.hpp>

#include "embedlab/file_output.hpp"
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

inline std::filesystem::path embedlab::test::write_tiny_hf_model(const std::filesystem::path& dir,
                                                                 Architecture arch)
{
    const ModelConfig c = tiny_config(arch);
    return write_tiny_hf_model(dir, c, random_weights(c));
}

inline std::filesystem::path embedlab::test::write_tiny_hf_model(const std::filesystem::path& dir,
                                                                 const ModelConfig& c,
                                                                 const WeightMap& weights)
{
    std::filesystem::create_directories(dir);
    nlohmann::json config;
    if (c.arch == Architecture::GPT2)
        config = {{"model_type", "gpt2"},          {"vocab_size", c.vocab_size},
                  {"n_embd", c.hidden_size},       {"n_layer", c.num_layers},
                  {"n_head", c.num_heads},         {"n_positions", c.max_positions},
                  {"n_inner", c.intermediate_size}};
    else
        config = {{"model_type", "llama"},
                  {"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_attention_heads", c.num_heads},
                  {"num_key_value_heads", c.num_kv_heads},
                  {"intermediate_size", c.intermediate_size},
                  {"max_position_embeddings", c.max_positions},
                  {"tie_word_embeddings", false}};
    write_file_atomic(dir / "config.json", config.dump());
    write_file_atomic(dir / "tokenizer_config.json", "{}"); // a support file to be copied
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& [name, t] : weights)
        tensors.emplace_back(name, t);
    write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
    return dir;
}
