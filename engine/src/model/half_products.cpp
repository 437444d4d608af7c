#include "model/half_products.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "embedlab/parallel_for.hpp"

#include "embedlab/error.hpp"
#include "embedlab/text_format.hpp"
#include "io/dtype_convert.hpp"
#include "model/decode_team.hpp"
#include "model/half_kernels.hpp"

namespace embedlab::detail {

namespace {

// A token-by-token product (at most kHalfKernelRows rows) of at least this many weights
// is split over the threads by decode_team.hpp's spinning workers: two threads read the
// weights faster than one (Qwen2.5-0.5B's f16 shape on huge pages, 2026-11-30: see
// docs/measurements.md); a smaller one is done before a worker would have started.
constexpr int64_t kSplitWeights = int64_t{1} << 17;
// A Conv1D product's parts: whole vectors, and a cache line of each weight row per part.
constexpr int64_t kColumnGrain = 64;

// A prompt's product of at most this many multiply-adds runs on the calling thread.
constexpr int64_t kProductsPerTask = int64_t{1} << 20;
// Prompt tiles: at most 32 MB of float32 widened at a time (a 0.5B model's layer matrices
// in one tile: wide enough for sgemm).
constexpr int64_t kTileValues = int64_t{1} << 23;

// body(begin, end) over a product's `out` outputs: on this thread for a weight of fewer
// than kSplitWeights values, else split over the team in parts of `grain` outputs.
void over_outputs(int64_t out, int64_t in, int64_t grain, const std::function<void(int64_t, int64_t)>& body)
{
    if (out * in < kSplitWeights)
        body(0, out);
    else
        run_split(out, grain, body);
}

float widen_one(HalfFormat format, uint16_t bits)
{
    return format == HalfFormat::F16 ? io::f16_to_f32(bits) : io::bf16_to_f32(bits);
}

HalfFormat format_of(const torch::Tensor& W)
{
    return W.scalar_type() == torch::kHalf ? HalfFormat::F16 : HalfFormat::BF16;
}

const uint16_t* half_bits(const torch::Tensor& W)
{
    return static_cast<const uint16_t*>(W.data_ptr());
}

void check_half_weight(const torch::Tensor& W)
{
    if (!is_half(W) || W.dim() != 2 || !W.is_contiguous())
        throw InputError("half-precision product: the weight must be a contiguous 2-D f16/bf16 matrix");
}

// Float32 [count, width] copy of the rows [first, first + count) of a half matrix, on the
// calling thread: between OpenBLAS's sgemm calls its threads spin, and waking libtorch's
// for the copy made the two pools fight over the cores (a fifth of a prompt's time in
// sched_yield, the prompt at half the float32 path's speed).
torch::Tensor widen_rows(const torch::Tensor& W, int64_t first, int64_t count, HalfKernel kernel)
{
    const int64_t width = W.size(1);
    auto out = torch::empty({count, width}, torch::kFloat32);
    const uint16_t* src = half_bits(W) + first * width;
    float* dst = out.data_ptr<float>();
    if (kernel == HalfKernel::Avx2)
        widen_avx2(format_of(W), src, dst, count * width);
    else
        widen_portable(format_of(W), src, dst, count * width);
    return out;
}

HalfKernel half_kernel_from_setting()
{
    const char* value = std::getenv("EMBEDLAB_HALF_KERNEL");
    if (!value || !*value)
        return cpu_runs(HalfKernel::Avx2) ? HalfKernel::Avx2 : HalfKernel::Portable;
    const std::string text = value;
    for (const auto kernel : {HalfKernel::Portable, HalfKernel::Avx2})
        if (text == half_kernel_name(kernel)) {
            if (!cpu_runs(kernel))
                throw InputError("EMBEDLAB_HALF_KERNEL is '" + text +
                                 "', which this CPU cannot run; unset it");
            return kernel;
        }
    throw InputError("EMBEDLAB_HALF_KERNEL is '" + printable(text) + "': expected portable or avx2");
}

HalfPrompt half_prompt_from_setting()
{
    const char* value = std::getenv("EMBEDLAB_HALF_PROMPT");
    if (!value || !*value)
        return HalfPrompt::Tiles;
    const std::string text = value;
    for (const auto prompt : {HalfPrompt::Tiles, HalfPrompt::Sgemm})
        if (text == half_prompt_name(prompt))
            return prompt;
    throw InputError("EMBEDLAB_HALF_PROMPT is '" + printable(text) + "': expected tiles or sgemm");
}

torch::Tensor float_rows(const torch::Tensor& x, int64_t in)
{
    return x.reshape({-1, in}).to(torch::kFloat32).contiguous();
}

torch::Tensor with_bias(torch::Tensor y, const torch::Tensor& bias)
{
    return bias.defined() ? y.add_(bias.to(torch::kFloat32)) : y;
}

} // namespace

void rows_dot_portable(HalfFormat format, const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end,
                       const float* x, int64_t rows, float* y, int64_t ldy)
{
    for (int64_t o = o_begin; o < o_end; ++o)
        for (int64_t n = 0; n < rows; ++n) {
            float s = 0.f;
            for (int64_t i = 0; i < in; ++i)
                s += widen_one(format, W[o * in + i]) * x[n * in + i];
            y[n * ldy + o] = s;
        }
}

void columns_dot_portable(HalfFormat format, const uint16_t* W, int64_t in, int64_t out, int64_t c_begin,
                          int64_t c_end, const float* x, int64_t rows, float* y, int64_t ldy)
{
    for (int64_t n = 0; n < rows; ++n) {
        float* yn = y + n * ldy;
        for (int64_t c = c_begin; c < c_end; ++c)
            yn[c] = 0.f;
        for (int64_t i = 0; i < in; ++i) { // row by row: the weight is read in order
            const float xi = x[n * in + i];
            for (int64_t c = c_begin; c < c_end; ++c)
                yn[c] += widen_one(format, W[i * out + c]) * xi;
        }
    }
}

void rows_dot_f32_portable(const float* W, int64_t in, int64_t o_begin, int64_t o_end, const float* x,
                           float* y)
{
    for (int64_t o = o_begin; o < o_end; ++o) {
        float s = 0.f;
        for (int64_t i = 0; i < in; ++i)
            s += W[o * in + i] * x[i];
        y[o] = s;
    }
}

bool finite_max_f32_portable(const float* x, int64_t n, float* top)
{
    float m = -INFINITY;
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) {
        finite = finite && std::isfinite(x[i]);
        m = std::max(m, x[i]);
    }
    *top = m;
    return finite;
}

double sum_exp_f32_portable(const float* x, int64_t n, float shift)
{
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
        sum += std::exp(x[i] - shift);
    return sum;
}

LogSumExp log_sum_exp(std::span<const float> x, HalfKernel kernel)
{
    const bool avx2 = kernel == HalfKernel::Avx2;
    const auto n = static_cast<int64_t>(x.size());
    LogSumExp result;
    float top = 0;
    if (!(avx2 ? finite_max_f32_avx2 : finite_max_f32_portable)(x.data(), n, &top)) {
        result.non_finite =
            std::find_if_not(x.begin(), x.end(), [](float v) { return std::isfinite(v); }) - x.begin();
        return result;
    }
    if (n > 0)
        result.value = top + std::log((avx2 ? sum_exp_f32_avx2 : sum_exp_f32_portable)(x.data(), n, top));
    else
        result.value = -INFINITY;
    return result;
}

int64_t first_max_index(std::span<const float> x, HalfKernel kernel)
{
    float top = 0;
    if (!(kernel == HalfKernel::Avx2 ? finite_max_f32_avx2 : finite_max_f32_portable)(
            x.data(), static_cast<int64_t>(x.size()), &top))
        return std::max_element(x.begin(), x.end()) - x.begin(); // NaN's order, as it was
    return std::find(x.begin(), x.end(), top) - x.begin();
}

void matrix_vector(const torch::Tensor& W, const float* x, float* y, HalfKernel kernel)
{
    const int64_t out = W.size(0), in = W.size(1);
    const bool avx2 = kernel == HalfKernel::Avx2;
    std::function<void(int64_t, int64_t)> rows;
    if (is_half(W)) {
        const auto format = format_of(W);
        const uint16_t* w = half_bits(W);
        rows = [=](int64_t begin, int64_t end) {
            (avx2 ? rows_dot_avx2 : rows_dot_portable)(format, w, in, begin, end, x, 1, y, out);
        };
    } else {
        const float* w = W.data_ptr<float>();
        rows = [=](int64_t begin, int64_t end) {
            (avx2 ? rows_dot_f32_avx2 : rows_dot_f32_portable)(w, in, begin, end, x, y);
        };
    }
    over_outputs(out, in, 16, rows);
}

void columns_dot_f32_portable(const float* W, int64_t in, int64_t out, int64_t c_begin, int64_t c_end,
                              const float* x, float* y)
{
    std::fill(y + c_begin, y + c_end, 0.f);
    for (int64_t i = 0; i < in; ++i) // row by row: the weight is read in order
        for (int64_t c = c_begin; c < c_end; ++c)
            y[c] += W[i * out + c] * x[i];
}

void matrix_vector_columns(const torch::Tensor& W, const float* x, float* y, HalfKernel kernel)
{
    const int64_t in = W.size(0), out = W.size(1);
    const bool avx2 = kernel == HalfKernel::Avx2;
    std::function<void(int64_t, int64_t)> columns;
    if (is_half(W)) {
        const auto format = format_of(W);
        const uint16_t* w = half_bits(W);
        columns = [=](int64_t begin, int64_t end) {
            (avx2 ? columns_dot_avx2 : columns_dot_portable)(format, w, in, out, begin, end, x, 1, y, out);
        };
    } else {
        const float* w = W.data_ptr<float>();
        columns = [=](int64_t begin, int64_t end) {
            (avx2 ? columns_dot_f32_avx2 : columns_dot_f32_portable)(w, in, out, begin, end, x, y);
        };
    }
    over_outputs(out, in, kColumnGrain, columns);
}

void widen_portable(HalfFormat format, const uint16_t* src, float* dst, int64_t n)
{
    for (int64_t i = 0; i < n; ++i)
        dst[i] = widen_one(format, src[i]);
}

bool is_half(const torch::Tensor& t)
{
    return t.defined() && (t.scalar_type() == torch::kHalf || t.scalar_type() == torch::kBFloat16);
}

bool cpu_runs(HalfKernel kernel)
{
#if defined(__x86_64__)
    static const bool avx2 =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    constexpr bool avx2 = false; // the Raspberry Pi's arm64: the portable kernels
#endif
    return kernel == HalfKernel::Portable || avx2;
}

HalfKernel fastest_half_kernel()
{
    static const HalfKernel kernel = half_kernel_from_setting();
    return kernel;
}

const char* half_kernel_name(HalfKernel kernel)
{
    return kernel == HalfKernel::Avx2 ? "avx2" : "portable";
}

HalfPrompt half_prompt_setting()
{
    static const HalfPrompt prompt = half_prompt_from_setting();
    return prompt;
}

const char* half_prompt_name(HalfPrompt prompt)
{
    return prompt == HalfPrompt::Tiles ? "tiles" : "sgemm";
}

torch::Tensor half_times_transposed(const torch::Tensor& x, const torch::Tensor& W, const torch::Tensor& bias,
                                    HalfKernel kernel, HalfPrompt prompt)
{
    // A GGUF's gpt2 matrix: stored [out, in], held as its transposed view, read row by row.
    if (is_half(W) && W.dim() == 2 && !W.is_contiguous() && W.t().is_contiguous())
        return half_times_transposed(x, W.t(), bias, kernel, prompt);
    check_half_weight(W);
    const int64_t out = W.size(0), in = W.size(1);
    const auto rows = float_rows(x, in);
    const int64_t N = rows.size(0);
    auto shape = x.sizes().vec();
    shape.back() = out;
    if (N > kHalfKernelRows && kernel == HalfKernel::Avx2 && prompt == HalfPrompt::Tiles) {
        auto y = torch::empty({N, out}, torch::kFloat32);
        const auto format = format_of(W);
        const uint16_t* w = half_bits(W);
        const float* xs = rows.data_ptr<float>();
        float* ys = y.data_ptr<float>();
        const int64_t triples = (out + 2) / 3; // the kernel's tiles are 3 weight rows high
        const int64_t grain = std::max<int64_t>(1, kProductsPerTask / std::max<int64_t>(3 * in * N, 1));
        at::parallel_for(0, triples, grain, [&](int64_t begin, int64_t end) {
            prompt_dot_avx2(format, w, in, 3 * begin, std::min(out, 3 * end), xs, N, ys, out);
        });
        return with_bias(y, bias).view(shape);
    }
    if (N > kHalfKernelRows) {
        auto y = torch::empty({N, out}, torch::kFloat32);
        const int64_t tile = std::max<int64_t>(1, kTileValues / std::max<int64_t>(in, 1));
        for (int64_t first = 0; first < out; first += tile) {
            const int64_t count = std::min(tile, out - first);
            y.narrow(1, first, count).copy_(torch::mm(rows, widen_rows(W, first, count, kernel).t()));
        }
        return with_bias(y, bias).view(shape);
    }
    auto y = torch::empty({N, out}, torch::kFloat32);
    const auto format = format_of(W);
    const uint16_t* w = half_bits(W);
    const float* xs = rows.data_ptr<float>();
    float* ys = y.data_ptr<float>();
    const auto rows_dot = kernel == HalfKernel::Avx2 ? rows_dot_avx2 : rows_dot_portable;
    over_outputs(out, in, 16,
                 [&](int64_t begin, int64_t end) { rows_dot(format, w, in, begin, end, xs, N, ys, out); });
    return with_bias(y, bias).view(shape);
}

torch::Tensor half_add_times(const torch::Tensor& bias, const torch::Tensor& x, const torch::Tensor& W,
                             HalfKernel kernel)
{
    // A GGUF's gpt2 matrix: stored [out, in], held as its transposed view, read row by row.
    if (is_half(W) && W.dim() == 2 && !W.is_contiguous() && W.t().is_contiguous())
        return half_times_transposed(x, W.t(), bias, kernel);
    check_half_weight(W);
    const int64_t in = W.size(0), out = W.size(1);
    const auto rows = float_rows(x, in);
    const int64_t N = rows.size(0);
    auto shape = x.sizes().vec();
    shape.back() = out;
    if (N > kHalfKernelRows) { // tiles of the weight's rows: y += x[:, tile] W[tile, :]
        auto y = bias.defined() ? bias.to(torch::kFloat32).expand({N, out}).contiguous()
                                : torch::zeros({N, out}, torch::kFloat32);
        const int64_t tile = std::max<int64_t>(1, kTileValues / std::max<int64_t>(out, 1));
        for (int64_t first = 0; first < in; first += tile) {
            const int64_t count = std::min(tile, in - first);
            y.addmm_(rows.narrow(1, first, count), widen_rows(W, first, count, kernel));
        }
        return y.view(shape);
    }
    auto y = torch::empty({N, out}, torch::kFloat32);
    const auto format = format_of(W);
    const uint16_t* w = half_bits(W);
    const float* xs = rows.data_ptr<float>();
    float* ys = y.data_ptr<float>();
    const auto columns_dot = kernel == HalfKernel::Avx2 ? columns_dot_avx2 : columns_dot_portable;
    over_outputs(out, in, kColumnGrain, [&](int64_t begin, int64_t end) {
        columns_dot(format, w, in, out, begin, end, xs, N, ys, out);
    });
    return with_bias(y, bias).view(shape);
}

} // namespace embedlab::detail
