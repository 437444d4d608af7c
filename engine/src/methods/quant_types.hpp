// The ggml block formats `compress --method quant --type` takes (issue 38), by the
// names llama-quantize's --token-embedding-type takes, with ggml's type ids; their
// block sizes and bytes are io::ggml_type_traits'. Torch-free; internal to the engine.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>

#include "io/gguf_quants.hpp"

namespace embedlab::quant_types {

struct QuantType {
    const char* name; // lower case, as llama-quantize takes it
    uint32_t ggml_type;
};

// In the order the help lists them: largest first.
inline constexpr QuantType kQuantTypes[] = {{"f16", 1},   {"bf16", 30}, {"q8_0", 8},  {"q6_k", 14},
                                            {"q5_k", 13}, {"q5_1", 7},  {"q5_0", 6},  {"q4_k", 12},
                                            {"q4_1", 3},  {"q4_0", 2},  {"q3_k", 11}, {"q2_k", 10}};

// The type called `name` in any case ("Q4_K" is "q4_k"), or null.
inline const QuantType* find_quant_type(const std::string& name)
{
    std::string lower = name;
    for (char& c : lower)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& t : kQuantTypes)
        if (lower == t.name)
            return &t;
    return nullptr;
}

// Values per block (32, 256; 1 for f16 and bf16).
inline int64_t block_values(const QuantType& t)
{
    return io::ggml_type_traits(t.ggml_type)->block_elems;
}

// Bits per value, block scales included (q4_k: 4.5, q6_k: 6.5625, q8_0: 8.5).
inline double bits_per_value(const QuantType& t)
{
    const auto* traits = io::ggml_type_traits(t.ggml_type);
    return 8.0 * traits->block_bytes / traits->block_elems;
}

// "f16, bf16, q8_0, ..." (every type), or those whose blocks fit a row of d values.
inline std::string names(int64_t d = 0)
{
    std::string s;
    for (const auto& t : kQuantTypes)
        if (d <= 0 || d % block_values(t) == 0)
            s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}

} // namespace embedlab::quant_types
