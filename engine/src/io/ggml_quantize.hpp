// Float32 rows -> ggml's block formats, bit-identical to ggml's reference
// quantizers (quantize_row_*_ref, ggml_fp32_to_fp16_row, ggml_fp32_to_bf16_row_ref):
// the bytes llama-quantize writes when no importance matrix is given. Torch-free.
// The inverse is dequantize_row (gguf_quants.hpp).
//
//   std::vector<uint8_t> out(io::ggml_row_bytes(type, n));
//   io::quantize_row(type, x, n, out.data());   // n a multiple of the block size
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

namespace embedlab::io {

// True for the types quantize_row writes: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (ggml's type ids).
bool ggml_type_can_quantize(uint32_t ggml_type);

// x[0..n) -> ggml_row_bytes(ggml_type, n) bytes at out. InputError for a type
// ggml_type_can_quantize rejects or n not a multiple of the type's block size.
void quantize_row(uint32_t ggml_type, const float* x, int64_t n, uint8_t* out);

// float -> IEEE half, round to nearest even, overflow to infinity, NaN -> 0x7E00
// with the sign kept (ggml's GGML_FP32_TO_FP16).
uint16_t float_to_half(float f);
// float -> bfloat16, round to nearest even; NaN keeps its top bits and is made
// quiet (ggml_compute_fp32_to_bf16).
uint16_t float_to_bf16(float f);

} // namespace embedlab::io
