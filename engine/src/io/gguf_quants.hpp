// ggml's quantised block formats, dequantised to float32 exactly as ggml's
// reference dequantize_row_* (and gguf-py's quants.py) do. Torch-free.
//
//   if (const auto* traits = io::ggml_type_traits(tensor.type))
//       io::dequantize_row(tensor.type, bytes, n, out);   // n a multiple of traits->block_elems
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace embedlab::io {

struct GgmlTypeTraits {
    const char* name;
    uint32_t block_elems; // values per block (1 for F32/F16/BF16)
    uint32_t block_bytes; // bytes per block
};

// The types EmbedLab decodes: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K; nullptr for any other.
const GgmlTypeTraits* ggml_type_traits(uint32_t ggml_type);
// The same by ggml's name ("Q6_K"); nullptr for any other.
const GgmlTypeTraits* ggml_type_traits(const std::string& name);
// "F32, F16, BF16, Q4_0, ..." for messages.
std::string supported_ggml_types();

// Bytes of a row of n values; 0 for an unsupported type or n not a whole number of blocks.
uint64_t ggml_row_bytes(uint32_t ggml_type, int64_t n);

// The blocks in a row of n values; InputError when n is not a whole number of them
// (quantize_row and dequantize_row share the check and its message).
int64_t whole_blocks(const GgmlTypeTraits& traits, int64_t n);

// n values of `ggml_type` at `data` -> out[0..n). InputError for an unsupported
// type or n not a multiple of the block size.
void dequantize_row(uint32_t ggml_type, const uint8_t* data, int64_t n, float* out);

// IEEE half -> float, exact (subnormals, infinities, NaN).
float half_to_float(uint16_t h);

} // namespace embedlab::io
