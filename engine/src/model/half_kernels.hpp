// Raw kernels for products of float32 rows with half-precision (f16 or bf16) weight
// matrices, accumulated in float32, their float32 twins for one row, and generation's
// passes over a row of logits (max, sum of exps). Torch-free, so that the AVX2 file
// (half_kernels_avx2.cpp, the only file compiled with -mavx2 -mfma -mf16c) holds no
// inline function another file could link to. half_products.hpp chooses between
// the two at run time and splits the work over threads.
// Usage: rows_dot_portable(HalfFormat::F16, W, in, 0, out, x, 1, y, out) for y = W x.
// Thread safety: pure functions over the ranges given; callers split the outputs.
#pragma once

#include <cstdint>

namespace embedlab::detail {

enum class HalfFormat { F16, BF16 };

// W [out, in] (torch::linear's layout), x [rows, in]: for o in [o_begin, o_end) and
// n < rows, y[n * ldy + o] = sum_i x[n * in + i] * W[o * in + i].
void rows_dot_portable(HalfFormat format, const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end,
                       const float* x, int64_t rows, float* y, int64_t ldy);
void rows_dot_avx2(HalfFormat format, const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end,
                   const float* x, int64_t rows, float* y, int64_t ldy);

// rows_dot's result for a prompt (many rows), in tiles of 3 weight rows by 4 prompt rows
// so that each weight row is read from memory once per call (AVX2 only).
void prompt_dot_avx2(HalfFormat format, const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end,
                     const float* x, int64_t rows, float* y, int64_t ldy);

// W [in, out] (GPT-2's Conv1D layout), x [rows, in]: for c in [c_begin, c_end) and
// n < rows, y[n * ldy + c] = sum_i x[n * in + i] * W[i * out + c].
void columns_dot_portable(HalfFormat format, const uint16_t* W, int64_t in, int64_t out, int64_t c_begin,
                          int64_t c_end, const float* x, int64_t rows, float* y, int64_t ldy);
void columns_dot_avx2(HalfFormat format, const uint16_t* W, int64_t in, int64_t out, int64_t c_begin,
                      int64_t c_end, const float* x, int64_t rows, float* y, int64_t ldy);

// The float32 twin of rows_dot for one row x (token-by-token steps on float32 weights):
// y[o] = sum_i x[i] * W[o * in + i] for o in [o_begin, o_end).
void rows_dot_f32_portable(const float* W, int64_t in, int64_t o_begin, int64_t o_end, const float* x,
                           float* y);
void rows_dot_f32_avx2(const float* W, int64_t in, int64_t o_begin, int64_t o_end, const float* x, float* y);

// columns_dot's float32 twin for one row x: y[c] = sum_i x[i] * W[i * out + c].
void columns_dot_f32_portable(const float* W, int64_t in, int64_t out, int64_t c_begin, int64_t c_end,
                              const float* x, float* y);
void columns_dot_f32_avx2(const float* W, int64_t in, int64_t out, int64_t c_begin, int64_t c_end,
                          const float* x, float* y);

// Generation's softmax over one row of logits x[n]: false when some x[i] is not finite,
// else *top = the largest x[i].
bool finite_max_f32_portable(const float* x, int64_t n, float* top);
bool finite_max_f32_avx2(const float* x, int64_t n, float* top);

// sum_i exp(x[i] - shift) for x[i] <= shift: each exp in float32 (std::exp; AVX2: a
// Cephes polynomial within 2 ulp, arguments below -87 taken as -87), summed in double.
double sum_exp_f32_portable(const float* x, int64_t n, float shift);
double sum_exp_f32_avx2(const float* x, int64_t n, float shift);

// dst[i] = src[i] as float32, for i < n (exact: every half value is a float).
void widen_portable(HalfFormat format, const uint16_t* src, float* dst, int64_t n);
void widen_avx2(HalfFormat format, const uint16_t* src, float* dst, int64_t n);

} // namespace embedlab::detail
