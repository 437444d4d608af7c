// Products of float32 rows with weight matrices kept in half precision (f16 or
// bf16: an f16/bf16 model's linear layers at generation), accumulated in float32.
// A few rows (token-by-token decoding) stream the half weights once through a
// matrix-vector kernel, split over the threads by decode_team.hpp; more rows (a prompt) go through the AVX2
// kernel's tiles of 3 weight rows by 4 prompt rows, split over output rows with
// at::parallel_for (or widen the weight to float32 a tile at a time for sgemm: the
// portable kernel, EMBEDLAB_HALF_PROMPT=sgemm), so no float32 copy of a whole matrix
// is ever held. Also generation's per-token row work on the same AVX2/portable choice:
// matrix_vector for float32 weights, log_sum_exp and first_max_index over the logits.
// Usage: if (detail::is_half(W)) y = detail::half_times_transposed(x, W, bias);
// Thread safety: pure functions; safe to call from several threads.
#pragma once

#include <span>

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

// Up to this many rows go through the matrix-vector kernel; more (a prompt) take the
// prompt path.
constexpr int64_t kHalfKernelRows = 4;

// A prompt's product with a half W [out, in]: Tiles reads the half weight once through the
// AVX2 kernel's 3 x 4 tiles (the portable kernel always takes Sgemm); Sgemm widens the
// weight to float32 a tile at a time for sgemm.
enum class HalfPrompt { Tiles, Sgemm };
// Tiles, or EMBEDLAB_HALF_PROMPT (tiles, sgemm: for measuring one against the other;
// InputError for another name). Read once.
HalfPrompt half_prompt_setting();
const char* half_prompt_name(HalfPrompt prompt); // "tiles", "sgemm"

// x [.., in] W^T (+ bias) for a half W [out, in] (torch::linear's layout); float32 result.
torch::Tensor half_times_transposed(const torch::Tensor& x, const torch::Tensor& W, const torch::Tensor& bias,
                                    HalfKernel kernel = fastest_half_kernel(),
                                    HalfPrompt prompt = half_prompt_setting());

// bias + x W for a half W [in, out] (GPT-2's Conv1D layout), x [N, in]; float32 result.
// W may also be the transposed view of a contiguous [out, in] matrix (a GGUF's gpt2).
torch::Tensor half_add_times(const torch::Tensor& bias, const torch::Tensor& x, const torch::Tensor& W,
                             HalfKernel kernel = fastest_half_kernel());

// y = W x for one float32 row x [in] and a contiguous W [out, in], float32 or f16/bf16
// (TokenDecoder's products), split over the threads when W is large. kernel picks AVX2 or
// portable for both element types.
void matrix_vector(const torch::Tensor& W, const float* x, float* y,
                   HalfKernel kernel = fastest_half_kernel());
// y = x W for GPT-2's Conv1D layout: a contiguous W [in, out], float32 or f16/bf16.
void matrix_vector_columns(const torch::Tensor& W, const float* x, float* y,
                           HalfKernel kernel = fastest_half_kernel());

// log sum_i exp(x[i]) over a row of logits, each exp in float32 and their sum in double
// (log-probabilities at generation: x[i] minus this), or the index of the first value
// that is not finite.
struct LogSumExp {
    double value = 0;
    int64_t non_finite = -1;
};
LogSumExp log_sum_exp(std::span<const float> x, HalfKernel kernel = fastest_half_kernel());

// The index of the first largest x[i], as std::max_element gives it (the greedy token),
// for a non-empty x.
int64_t first_max_index(std::span<const float> x, HalfKernel kernel = fastest_half_kernel());

} // namespace embedlab::detail
