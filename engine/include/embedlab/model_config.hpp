// Architecture facts of a decoder-only language model, independent of the
// file format it came from.
//
// Thread safety: plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embedlab {

enum class Architecture { GPT2, Llama };

inline const char* architecture_name(Architecture a)
{
    return a == Architecture::GPT2 ? "gpt2" : "llama";
}

struct ModelConfig {
    Architecture arch = Architecture::GPT2;
    int64_t vocab_size = 0;
    int64_t hidden_size = 0; // d
    int64_t num_layers = 0;
    int64_t num_heads = 0;         // query heads
    int64_t num_kv_heads = 0;      // == num_heads unless grouped-query attention
    int64_t intermediate_size = 0; // MLP width (gpt2: 4 d unless n_inner)
    int64_t max_positions = 0;     // learned positions (gpt2) or trained context (llama)
    double norm_eps = 1e-5;
    double rope_theta = 10000.0;  // llama only
    bool tied_embeddings = false; // output head shares the token embedding
    std::string activation;       // "gelu_new", "gelu", "silu", ...
    int64_t bos_token_id = -1;    // -1: none
    int64_t eos_token_id = -1;

    // FLAT-LLM compressed models (METHODS 3): per decoder layer, the value
    // dimension of each head and the MLP width. Empty: head_dim() and
    // intermediate_size in every layer.
    std::vector<int64_t> value_head_dims;
    std::vector<int64_t> mlp_widths;

    int64_t head_dim() const { return num_heads > 0 ? hidden_size / num_heads : 0; }
    int64_t value_dim(int64_t layer) const
    {
        return value_head_dims.empty() ? head_dim() : value_head_dims[static_cast<size_t>(layer)];
    }
    int64_t mlp_width(int64_t layer) const
    {
        return mlp_widths.empty() ? intermediate_size : mlp_widths[static_cast<size_t>(layer)];
    }
};

} // namespace embedlab
