// Products of float32 rows with weight matrices kept in half precision (f16 or
// bf16: an f16/bf16 model's linear layers at generation), accumulated in float32.
// A few rows (token-by-token decoding) stream the half weights once through a
// matrix-vector kernel, split over output rows with at::parallel_for; more rows
// (a prompt) widen the weight to float32 a tile at a time and multiply each tile
// with sgemm, so no float32 copy of a whole matrix is ever held.
// Usage: if (detail::is_half(W)) y = detail::half_times_transposed(x, W, bias);
// Thread safety: pure functions; safe to call from several threads.
#pragma once

#include <torch/types.h>

namespace embedlab::detail {

// f16 or bf16.
bool is_half(const torch::Tensor& t);

// Portable: plain C++ on every CPU; Avx2: F16C conversion and FMA (chosen when the CPU has AVX2, FMA and
// F16C).
enum class HalfKernel { Portable, Avx2 };
// The fastest the CPU runs, or EMBEDLAB_HALF_KERNEL (portable, avx2: for measuring one
// against the other; InputError for another name or one the CPU cannot run). Read once.
HalfKernel fastest_half_kernel();
const char* half_kernel_name(HalfKernel kernel); // "portable", "avx2"
bool cpu_runs(HalfKernel kernel);

// Up to this many rows go through the matrix-vector kernel; more take the tiled sgemm.
constexpr int64_t kHalfKernelRows = 4;

// x [.., in] W^T (+ bias) for a half W [out, in] (torch::linear's layout); float32 result.
torch::Tensor half_times_transposed(const torch::Tensor& x, const torch::Tensor& W, const torch::Tensor& bias,
                                    HalfKernel kernel = fastest_half_kernel());

// bias + x W for a half W [in, out] (GPT-2's Conv1D layout), x [N, in]; float32 result.
// W may also be the transposed view of a contiguous [out, in] matrix (a GGUF's gpt2).
torch::Tensor half_add_times(const torch::Tensor& bias, const torch::Tensor& x, const torch::Tensor& W,
                             HalfKernel kernel = fastest_half_kernel());

} // namespace embedlab::detail
