// The ggml block formats `compress --method quant --type` takes (issue 38), by the
// names llama-quantize's --token-embedding-type takes, with ggml's type ids, block
// sizes and bits per value (block scales included). Torch-free: the GUI's method
// panel and the manifest reader list and check them too.
//
//   const auto* t = embedlab::find_quant_type("Q4_K");  // any case; null when unknown
//   t->block_values;                                    // 256: d must be a multiple
//   embedlab::quant_type_names(128);                    // "f16, bf16, q8_0, ..." (those that fit)
//
// Thread safety: constant data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embedlab {

struct QuantType {
    const char* name;      // lower case, as llama-quantize takes it
    uint32_t ggml_type;    // ggml's type id
    int64_t block_values;  // values per block: 256 (K-types), 32, or 1 (f16, bf16)
    double bits_per_value; // block scales included: q4_k 4.5, q6_k 6.5625, q8_0 8.5
};

// Every type, largest first.
const std::vector<QuantType>& quant_types();
// The type called `name` in any case ("Q4_K" is "q4_k"), or null.
const QuantType* find_quant_type(const std::string& name);
// "f16, bf16, q8_0, ..." (every type), or those whose blocks divide a row of d > 0 values.
std::string quant_type_names(int64_t d = 0);
// Why `t` cannot store rows of d values ("q4_k stores blocks of 256 values, and the
// width d = 128 is not a multiple of 256 (llama.cpp refuses it too); the types that fit
// d = 128: <prefix>f16, ..."), or "" when its blocks divide d. `fitting_prefix`
// names types beyond the block formats that fit too (export's "f32, ").
std::string quant_type_misfit(const QuantType& t, int64_t d, const std::string& fitting_prefix = "");

} // namespace embedlab
