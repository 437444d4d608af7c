// The llama2.c (legacy version 0) checkpoint header: seven int32 values and the
// float count they imply. Torch-free (fuzzed: fuzz/).
#pragma once

#include <cstdint>
#include <string>

#include "io/mapped_file.hpp"

namespace embedlab::io {

constexpr uint64_t kLlama2cHeaderBytes = 7 * 4;

struct Llama2cHeader {
    int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    bool shared_classifier; // positive vocab_size in the file

    std::string text() const
    {
        return "dim " + std::to_string(dim) + ", hidden_dim " + std::to_string(hidden_dim) + ", n_layers " +
               std::to_string(n_layers) + ", n_heads " + std::to_string(n_heads) + ", n_kv_heads " +
               std::to_string(n_kv_heads) + ", vocab_size " +
               std::to_string(shared_classifier ? vocab_size : -vocab_size) + ", seq_len " +
               std::to_string(seq_len);
    }
    int64_t head_size() const { return dim / n_heads; }
    int64_t kv_dim() const { return head_size() * n_kv_heads; }
};

// Validates the header and the file size it implies; throws InputError naming
// the file.
Llama2cHeader read_llama2c_header(const MappedFile& file);

// Total float count the header implies, or 0 on 64-bit overflow.
uint64_t llama2c_expected_floats(const Llama2cHeader& h);

} // namespace embedlab::io
