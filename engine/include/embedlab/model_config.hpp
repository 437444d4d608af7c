// Architecture facts of a decoder-only language model, independent of the
// file format it came from.
//
// Thread safety: plain value type.
#pragma once

#include <cstdint>
#include <string>

namespace embedlab {

enum class Architecture { GPT2, Llama };

inline const char* architecture_name(Architecture a)
{
    return a == Architecture::GPT2 ? "gpt2" : "llama";
}

struct ModelConfig {
    Architecture arch = Architecture::GPT2;
    int64_t vocab_size = 0;
    int64_t hidden_size = 0;       // d
    int64_t num_layers = 0;
    int64_t num_heads = 0;         // query heads
    int64_t num_kv_heads = 0;      // == num_heads unless grouped-query attention
    int64_t intermediate_size = 0; // MLP width (gpt2: 4 d unless n_inner)
    int64_t max_positions = 0;     // learned positions (gpt2) or trained context (llama)
    double norm_eps = 1e-5;
    double rope_theta = 10000.0;   // llama only
    bool tied_embeddings = false;  // output head shares the token embedding
    std::string activation;        // "gelu_new", "gelu", "silu", ...
    int64_t bos_token_id = -1;     // -1: none
    int64_t eos_token_id = -1;

    int64_t head_dim() const { return num_heads > 0 ? hidden_size / num_heads : 0; }
};

} // namespace embedlab
