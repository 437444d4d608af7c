// The AVX2/FMA/F16C kernels of half_kernels.hpp. This file alone is compiled with
// -mavx2 -mfma -mf16c (engine/CMakeLists.txt) and includes no torch header;
// half_products.cpp calls it only where the CPU has all three. Elsewhere (arm64, the
// Raspberry Pi build) the names forward to the portable kernels, never chosen there.
#if defined(__x86_64__)
#include <algorithm>
#include <array>
#include <cmath>
#include <immintrin.h>

#include <cstring>

#include "model/half_kernels.hpp"

namespace embedlab::detail {

namespace {

struct F16 {
    static __m256 load8(const uint16_t* p)
    {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static float one(uint16_t bits) { return _cvtsh_ss(bits); }
};

struct BF16 { // a bf16 value is the top half of a float32's bits
    static __m256 load8(const uint16_t* p)
    {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
    static float one(uint16_t bits)
    {
        const uint32_t wide = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &wide, sizeof f);
        return f;
    }
};

float horizontal_sum(__m256 v)
{
    const __m128 pair = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 two = _mm_add_ps(pair, _mm_movehl_ps(pair, pair));
    return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}

// NB rows of x against one weight row w; U vectors of 8 per row per step keep
// enough independent FMAs in flight (4 for one row, 2 each for several).
template <typename Format, int NB> void dot_one_row(const uint16_t* w, int64_t in, const float* x, float* out)
{
    constexpr int U = NB == 1 ? 4 : 2;
    constexpr int64_t step = 8 * U;
    __m256 acc[NB][U];
    for (int n = 0; n < NB; ++n)
        for (int u = 0; u < U; ++u)
            acc[n][u] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + step <= in; i += step) {
        __m256 wv[U];
        for (int u = 0; u < U; ++u)
            wv[u] = Format::load8(w + i + 8 * u);
        for (int n = 0; n < NB; ++n)
            for (int u = 0; u < U; ++u)
                acc[n][u] = _mm256_fmadd_ps(wv[u], _mm256_loadu_ps(x + n * in + i + 8 * u), acc[n][u]);
    }
    for (; i + 8 <= in; i += 8) {
        const __m256 wv = Format::load8(w + i);
        for (int n = 0; n < NB; ++n)
            acc[n][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + n * in + i), acc[n][0]);
    }
    for (int n = 0; n < NB; ++n) {
        __m256 total = acc[n][0];
        for (int u = 1; u < U; ++u)
            total = _mm256_add_ps(total, acc[n][u]);
        float s = horizontal_sum(total);
        for (int64_t j = i; j < in; ++j)
            s += Format::one(w[j]) * x[n * in + j];
        out[n] = s;
    }
}

template <typename Format>
void rows_dot(const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end, const float* x, int64_t rows,
              float* y, int64_t ldy)
{
    float out[4];
    for (int64_t o = o_begin; o < o_end; ++o) {
        const uint16_t* w = W + o * in;
        for (int64_t n = 0; n < rows; n += 4) {
            const int64_t nb = rows - n < 4 ? rows - n : 4;
            const float* xn = x + n * in;
            switch (nb) {
            case 1:
                dot_one_row<Format, 1>(w, in, xn, out);
                break;
            case 2:
                dot_one_row<Format, 2>(w, in, xn, out);
                break;
            case 3:
                dot_one_row<Format, 3>(w, in, xn, out);
                break;
            default:
                dot_one_row<Format, 4>(w, in, xn, out);
                break;
            }
            for (int64_t k = 0; k < nb; ++k)
                y[(n + k) * ldy + o] = out[k];
        }
    }
}

// 64 columns (8 vectors) at a time, then 8, then one by one.
template <typename Format>
void columns_dot(const uint16_t* W, int64_t in, int64_t out, int64_t c_begin, int64_t c_end, const float* x,
                 int64_t rows, float* y, int64_t ldy)
{
    // The weight's rows are read in order, a chunk of columns at a time, each once for every
    // x row: going down one 64-column block at a time read 128 bytes per row strided by the
    // whole row, half the memory bandwidth (gpt2-small's Conv1D layers, issue 63). Each sum
    // still adds its terms in row order with the same fused multiply-adds from zero.
    constexpr int64_t kChunk = 1024; // columns: the rows' sums stay in L1
    const int64_t vector_end = c_begin + (c_end - c_begin) / 8 * 8;
    for (int64_t c0 = c_begin; c0 < vector_end; c0 += kChunk) {
        const int64_t c1 = std::min(vector_end, c0 + kChunk);
        for (int64_t n = 0; n < rows; ++n)
            std::fill(y + n * ldy + c0, y + n * ldy + c1, 0.f);
        int64_t i = 0;
        for (; i + 4 <= in; i += 4) { // four rows per pass over the sums, still added in order
            const uint16_t* w = W + i * out;
            for (int64_t n = 0; n < rows; ++n) {
                const float* xn = x + n * in + i;
                const __m256 x0 = _mm256_broadcast_ss(xn), x1 = _mm256_broadcast_ss(xn + 1),
                             x2 = _mm256_broadcast_ss(xn + 2), x3 = _mm256_broadcast_ss(xn + 3);
                float* yn = y + n * ldy;
                for (int64_t c = c0; c < c1; c += 8) {
                    __m256 acc = _mm256_loadu_ps(yn + c);
                    acc = _mm256_fmadd_ps(Format::load8(w + c), x0, acc);
                    acc = _mm256_fmadd_ps(Format::load8(w + out + c), x1, acc);
                    acc = _mm256_fmadd_ps(Format::load8(w + 2 * out + c), x2, acc);
                    acc = _mm256_fmadd_ps(Format::load8(w + 3 * out + c), x3, acc);
                    _mm256_storeu_ps(yn + c, acc);
                }
            }
        }
        for (; i < in; ++i) {
            const uint16_t* w = W + i * out;
            for (int64_t n = 0; n < rows; ++n) {
                const __m256 xi = _mm256_broadcast_ss(x + n * in + i);
                float* yn = y + n * ldy;
                for (int64_t c = c0; c < c1; c += 8)
                    _mm256_storeu_ps(yn + c,
                                     _mm256_fmadd_ps(Format::load8(w + c), xi, _mm256_loadu_ps(yn + c)));
            }
        }
    }
    for (int64_t n = 0; n < rows; ++n) {
        const float* xn = x + n * in;
        for (int64_t c = vector_end; c < c_end; ++c) {
            float s = 0.f;
            for (int64_t i = 0; i < in; ++i)
                s += Format::one(W[i * out + c]) * xn[i];
            y[n * ldy + c] = s;
        }
    }
}

// RM weight rows against RN prompt rows: each converted weight vector serves RN rows
// and each loaded prompt vector RM weight rows (3 x 4: twelve sums, three weight and
// one prompt vector in the sixteen registers). Sums from zero in the order of i.
template <typename Format, int RM, int RN>
void tile_dot(const uint16_t* w, int64_t in, const float* x, float* y, int64_t ldy)
{
    __m256 acc[RM][RN];
    for (int m = 0; m < RM; ++m)
        for (int n = 0; n < RN; ++n)
            acc[m][n] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= in; i += 8) {
        __m256 wv[RM];
        for (int m = 0; m < RM; ++m)
            wv[m] = Format::load8(w + m * in + i);
        for (int n = 0; n < RN; ++n) {
            const __m256 xv = _mm256_loadu_ps(x + n * in + i);
            for (int m = 0; m < RM; ++m)
                acc[m][n] = _mm256_fmadd_ps(wv[m], xv, acc[m][n]);
        }
    }
    for (int m = 0; m < RM; ++m)
        for (int n = 0; n < RN; ++n) {
            float s = horizontal_sum(acc[m][n]);
            for (int64_t j = i; j < in; ++j)
                s += Format::one(w[m * in + j]) * x[n * in + j];
            y[n * ldy + m] = s;
        }
}

using TileFn = void (*)(const uint16_t* w, int64_t in, const float* x, float* y, int64_t ldy);

template <typename Format, int RM> constexpr std::array<TileFn, 4> tiles_of_height()
{
    return {tile_dot<Format, RM, 1>, tile_dot<Format, RM, 2>, tile_dot<Format, RM, 3>,
            tile_dot<Format, RM, 4>};
}

// Three weight rows at a time (read from memory once), each against every prompt row
// four at a time (the prompt stays in cache); edge tiles take the smaller shapes.
template <typename Format>
void prompt_dot(const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end, const float* x, int64_t rows,
                float* y, int64_t ldy)
{
    static constexpr std::array<std::array<TileFn, 4>, 3> tiles = {
        tiles_of_height<Format, 1>(), tiles_of_height<Format, 2>(), tiles_of_height<Format, 3>()};
    for (int64_t o = o_begin; o < o_end; o += 3) {
        const int64_t rm = std::min<int64_t>(3, o_end - o);
        for (int64_t n = 0; n < rows; n += 4) {
            const int64_t rn = std::min<int64_t>(4, rows - n);
            tiles[rm - 1][rn - 1](W + o * in, in, x + n * in, y + n * ldy + o, ldy);
        }
    }
}

template <typename Format> void widen(const uint16_t* src, float* dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, Format::load8(src + i));
    for (; i < n; ++i)
        dst[i] = Format::one(src[i]);
}

} // namespace

void rows_dot_avx2(HalfFormat format, const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end,
                   const float* x, int64_t rows, float* y, int64_t ldy)
{
    if (format == HalfFormat::F16)
        rows_dot<F16>(W, in, o_begin, o_end, x, rows, y, ldy);
    else
        rows_dot<BF16>(W, in, o_begin, o_end, x, rows, y, ldy);
}

void prompt_dot_avx2(HalfFormat format, const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end,
                     const float* x, int64_t rows, float* y, int64_t ldy)
{
    if (format == HalfFormat::F16)
        prompt_dot<F16>(W, in, o_begin, o_end, x, rows, y, ldy);
    else
        prompt_dot<BF16>(W, in, o_begin, o_end, x, rows, y, ldy);
}

void columns_dot_avx2(HalfFormat format, const uint16_t* W, int64_t in, int64_t out, int64_t c_begin,
                      int64_t c_end, const float* x, int64_t rows, float* y, int64_t ldy)
{
    if (format == HalfFormat::F16)
        columns_dot<F16>(W, in, out, c_begin, c_end, x, rows, y, ldy);
    else
        columns_dot<BF16>(W, in, out, c_begin, c_end, x, rows, y, ldy);
}

// Four rows at a time, two sums each (eight independent FMA chains), reduced together:
// on short rows (tinyllama's head: 128 values) one row's reduction and loop set-up cost
// as much as its products.
void rows_dot_f32_avx2(const float* W, int64_t in, int64_t o_begin, int64_t o_end, const float* x, float* y)
{
    const int64_t vector_end = in / 16 * 16;
    int64_t o = o_begin;
    for (; o + 4 <= o_end; o += 4) {
        const float* w = W + o * in;
        __m256 a[4][2];
        for (int r = 0; r < 4; ++r)
            a[r][0] = a[r][1] = _mm256_setzero_ps();
        for (int64_t i = 0; i < vector_end; i += 16) {
            const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
            for (int r = 0; r < 4; ++r) {
                a[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * in + i), x0, a[r][0]);
                a[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * in + i + 8), x1, a[r][1]);
            }
        }
        for (int r = 0; r < 4; ++r) {
            float s = horizontal_sum(_mm256_add_ps(a[r][0], a[r][1]));
            for (int64_t i = vector_end; i < in; ++i)
                s += w[r * in + i] * x[i];
            y[o + r] = s;
        }
    }
    for (; o < o_end; ++o) {
        const float* w = W + o * in;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int64_t i = 0; i < vector_end; i += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
        }
        float s = horizontal_sum(_mm256_add_ps(a0, a1));
        for (int64_t i = vector_end; i < in; ++i)
            s += w[i] * x[i];
        y[o] = s;
    }
}

// Like columns_dot: the rows in order, 1,024 columns at a time, four rows per pass.
void columns_dot_f32_avx2(const float* W, int64_t in, int64_t out, int64_t c_begin, int64_t c_end,
                          const float* x, float* y)
{
    constexpr int64_t kChunk = 1024;
    const int64_t vector_end = c_begin + (c_end - c_begin) / 8 * 8;
    for (int64_t c0 = c_begin; c0 < vector_end; c0 += kChunk) {
        const int64_t c1 = std::min(vector_end, c0 + kChunk);
        std::fill(y + c0, y + c1, 0.f);
        int64_t i = 0;
        for (; i + 4 <= in; i += 4) {
            const float* w = W + i * out;
            const __m256 x0 = _mm256_broadcast_ss(x + i), x1 = _mm256_broadcast_ss(x + i + 1),
                         x2 = _mm256_broadcast_ss(x + i + 2), x3 = _mm256_broadcast_ss(x + i + 3);
            for (int64_t c = c0; c < c1; c += 8) {
                __m256 acc = _mm256_loadu_ps(y + c);
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + c), x0, acc);
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + out + c), x1, acc);
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + 2 * out + c), x2, acc);
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + 3 * out + c), x3, acc);
                _mm256_storeu_ps(y + c, acc);
            }
        }
        for (; i < in; ++i) {
            const __m256 xi = _mm256_broadcast_ss(x + i);
            for (int64_t c = c0; c < c1; c += 8)
                _mm256_storeu_ps(
                    y + c, _mm256_fmadd_ps(_mm256_loadu_ps(W + i * out + c), xi, _mm256_loadu_ps(y + c)));
        }
    }
    for (int64_t c = vector_end; c < c_end; ++c) {
        float s = 0.f;
        for (int64_t i = 0; i < in; ++i)
            s += W[i * out + c] * x[i];
        y[c] = s;
    }
}

bool finite_max_f32_avx2(const float* x, int64_t n, float* top)
{
    // x - x is NaN exactly when x is infinite or NaN; the sum of those stays NaN.
    __m256 most = _mm256_set1_ps(-INFINITY), probe = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        most = _mm256_max_ps(most, v);
        probe = _mm256_add_ps(probe, _mm256_sub_ps(v, v));
    }
    std::array<float, 8> lanes, probes;
    _mm256_storeu_ps(lanes.data(), most);
    _mm256_storeu_ps(probes.data(), probe);
    float m = -INFINITY, p = 0.f;
    for (int k = 0; k < 8; ++k) {
        m = std::max(m, lanes[static_cast<size_t>(k)]);
        p += probes[static_cast<size_t>(k)];
    }
    for (; i < n; ++i) {
        m = std::max(m, x[i]);
        p += x[i] - x[i];
    }
    *top = m;
    return p == 0.f;
}

namespace {

// exp(v) for v in [-87, 0]: Cephes' expf (exp(r) * 2^k, r = v - k ln 2 in [-ln2/2, ln2/2]).
__m256 exp_nonpositive(__m256 v)
{
    v = _mm256_max_ps(v, _mm256_set1_ps(-87.f));
    const __m256 k =
        _mm256_floor_ps(_mm256_fmadd_ps(v, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), v);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    for (const float c :
         {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
        y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.f)));
    const __m256i exponent =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(exponent));
}

} // namespace

double sum_exp_f32_avx2(const float* x, int64_t n, float shift)
{
    const __m256 s = _mm256_set1_ps(shift);
    __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
        low = _mm256_add_pd(low, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        high = _mm256_add_pd(high, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    std::array<double, 4> lanes;
    _mm256_storeu_pd(lanes.data(), _mm256_add_pd(low, high));
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < n; ++i)
        sum += std::exp(x[i] - shift);
    return sum;
}

void widen_avx2(HalfFormat format, const uint16_t* src, float* dst, int64_t n)
{
    if (format == HalfFormat::F16)
        widen<F16>(src, dst, n);
    else
        widen<BF16>(src, dst, n);
}

} // namespace embedlab::detail

#else // not x86-64

#include "model/half_kernels.hpp"

namespace embedlab::detail {

void rows_dot_avx2(HalfFormat format, const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end,
                   const float* x, int64_t rows, float* y, int64_t ldy)
{
    rows_dot_portable(format, W, in, o_begin, o_end, x, rows, y, ldy);
}

void prompt_dot_avx2(HalfFormat format, const uint16_t* W, int64_t in, int64_t o_begin, int64_t o_end,
                     const float* x, int64_t rows, float* y, int64_t ldy)
{
    rows_dot_portable(format, W, in, o_begin, o_end, x, rows, y, ldy);
}

void columns_dot_avx2(HalfFormat format, const uint16_t* W, int64_t in, int64_t out, int64_t c_begin,
                      int64_t c_end, const float* x, int64_t rows, float* y, int64_t ldy)
{
    columns_dot_portable(format, W, in, out, c_begin, c_end, x, rows, y, ldy);
}

void rows_dot_f32_avx2(const float* W, int64_t in, int64_t o_begin, int64_t o_end, const float* x, float* y)
{
    rows_dot_f32_portable(W, in, o_begin, o_end, x, y);
}

void columns_dot_f32_avx2(const float* W, int64_t in, int64_t out, int64_t c_begin, int64_t c_end,
                          const float* x, float* y)
{
    columns_dot_f32_portable(W, in, out, c_begin, c_end, x, y);
}

void widen_avx2(HalfFormat format, const uint16_t* src, float* dst, int64_t n)
{
    widen_portable(format, src, dst, n);
}

bool finite_max_f32_avx2(const float* x, int64_t n, float* top)
{
    return finite_max_f32_portable(x, n, top);
}

double sum_exp_f32_avx2(const float* x, int64_t n, float shift)
{
    return sum_exp_f32_portable(x, n, shift);
}

} // namespace embedlab::detail

#endif
