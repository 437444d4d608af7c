// Each block quantizer follows its ggml reference in ggml-quants.c (quantize_row_*_ref
// and the make_*_quants searches they call) operation for operation: float (not
// double) arithmetic in the same order, the same search constants, loop bounds and
// integer truncations. Any change there moves bits; llama-quantize is the oracle.
#include "io/ggml_quantize.hpp"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "embedlab/error.hpp"
#include "io/gguf_quants.hpp"

// ggml's reference build (x86-64 baseline, no FMA) rounds every product and sum on
// its own; keep the compiler from fusing a*b+c on targets that have FMA.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace embedlab::io {

namespace {

constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11,
                   Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30;
constexpr int QK = 32, QK_K = 256;
// A group whose largest magnitude is below this is stored as all zero (GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// ggml's MAX/MIN macros, spelled out so NaN picks the same operand as in ggml.
template <typename T> T max_of(T a, T b)
{
    return a > b ? a : b;
}
template <typename T> T min_of(T a, T b)
{
    return a < b ? a : b;
}

void store_half(uint8_t* p, float f)
{
    const uint16_t h = float_to_half(f);
    std::memcpy(p, &h, 2); // little-endian files on little-endian hosts
}

float load_half(const uint8_t* p)
{
    uint16_t h;
    std::memcpy(&h, p, 2);
    return half_to_float(h);
}

// ggml's nearest_int: adding 1.5 * 2^23 leaves round-half-even(f) in the low mantissa
// bits. Exact for |f| < 2^22; beyond that it yields ggml's own garbage, which callers
// then clamp, so the same bits come out.
int nearest_int(float f)
{
    const float biased = f + 12582912.f;
    int32_t bits;
    std::memcpy(&bits, &biased, 4);
    return (bits & 0x007fffff) - 0x00400000;
}

// ---- the scale searches ------------------------------------------------------------

// The value of largest magnitude (the first of equals), its magnitude in amax: both
// symmetric searches scale by it.
float signed_max(int n, const float* x, float& amax)
{
    float max = 0;
    amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    return max;
}

// The symmetric level of x at inverse scale iscale, in [-nmax, nmax).
int symmetric_level(int nmax, float iscale, float x)
{
    return max_of(-nmax, min_of(nmax - 1, nearest_int(iscale * x)));
}

// The weighted (w = x^2) sums of w x l and w l^2 over the symmetric levels l at iscale;
// stores l + offset in L when L is given. Order of operations as in ggml.
void symmetric_level_sums(int n, int nmax, const float* x, float iscale, int8_t* L, int offset, float& sumlx,
                          float& suml2)
{
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = symmetric_level(nmax, iscale, x[i]);
        if (L)
            L[i] = static_cast<int8_t>(l + offset);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
}

// The signed maximum of a group, or nullopt after zeroing L when the group is all
// (near) zero: ggml stores such groups at level 0 with scale 0.
std::optional<float> group_max_or_zero(int n, const float* x, int8_t* L)
{
    float amax = 0;
    const float max = signed_max(n, x, amax);
    if (amax >= kGroupMaxEps)
        return max;
    for (int i = 0; i < n; ++i)
        L[i] = 0;
    return std::nullopt;
}

// make_qx_quants with rmse_type 1 and no importance weights (Q6_K): symmetric levels
// L in [0, 2 nmax), weights x^2, trying 18 scales around nmax / max.
float search_symmetric(int n, int nmax, const float* x, int8_t* L)
{
    const auto group_max = group_max_or_zero(n, x, L);
    if (!group_max)
        return 0.f;
    const float max = *group_max;
    float sumlx = 0, suml2 = 0;
    symmetric_level_sums(n, nmax, x, static_cast<float>(-nmax) / max, L, nmax, sumlx, suml2);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0)
            continue;
        const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
        symmetric_level_sums(n, nmax, x, iscale, nullptr, 0, sumlx, suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = static_cast<int8_t>(nmax + symmetric_level(nmax, iscale, x[i]));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// make_q3_quants with do_rmse (Q3_K): symmetric levels, then up to 5 passes moving
// single levels while the weighted (x^2) fit improves.
float search_symmetric_refine(int n, int nmax, const float* x, int8_t* L)
{
    const auto group_max = group_max_or_zero(n, x, L); // not nmax: ggml leaves these at 0
    if (!group_max)
        return 0.f;
    float sumlx = 0, suml2 = 0;
    symmetric_level_sums(n, nmax, x, static_cast<float>(-nmax) / *group_max, L, 0, sumlx, suml2);
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            const float li = static_cast<float>(L[i]);
            float slx = sumlx - w * x[i] * li;
            if (slx > 0) {
                float sl2 = suml2 - w * li * li;
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = max_of(-nmax, min_of(nmax - 1, new_l));
                if (new_l != L[i]) {
                    const float nl = static_cast<float>(new_l);
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = static_cast<int8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed)
            break;
    }
    for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// make_qkx2_quants (Q2_K, Q4_K, Q5_K): levels L in [0, nmax] for x ~ scale L - the_min,
// trying nstep + 1 scales (rmin + rdelta is + nmax) / (max - min) and keeping the
// least weighted error (absolute with use_mad, else squared) of a least-squares fit.
float search_affine(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                    uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    auto error = [&](float d) { return use_mad ? std::fabs(d) : d * d; };
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<uint8_t>(max_of(0, min_of(nmax, l)));
        const float diff = scale * static_cast<float>(L[i]) + min - x[i];
        best_error += weights[i] * error(diff);
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = max_of(0, min_of(nmax, nearest_int(iscale * (x[i] - min))));
            Laux[i] = static_cast<uint8_t>(l);
            const float w = weights[i], fl = static_cast<float>(l);
            sum_l += w * fl;
            sum_l2 += w * fl * fl;
            sum_xl += w * fl * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                const float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
                cur_error += weights[i] * error(diff);
            }
            if (cur_error < best_error) {
                std::memcpy(L, Laux, static_cast<size_t>(n));
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// ---- 32-value blocks -----------------------------------------------------------------

// Q8_0: d = amax / 127 (half), then 32 rounded signed bytes.
void q8_0(const float* x, uint8_t* b)
{
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j)
        amax = max_of(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_half(b, d);
    for (int j = 0; j < QK; ++j)
        b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(std::round(x[j] * id))));
}

// Q4_0, Q4_1, Q5_0, Q5_1 (layouts in gguf_quants.cpp). _0: d = signed max / -8 (-16),
// so the largest magnitude lands on level 0; _1: d = (max - min) / 15 (31) above min.
// Levels are truncations of v + 0.5 (v + 8.5, v + 16.5), as ggml does.
template <bool Fifth, bool WithMin> void q4_q5(const float* x, uint8_t* b)
{
    constexpr int levels = Fifth ? 32 : 16;
    float d, min = 0;
    if constexpr (WithMin) {
        float max = -FLT_MAX;
        min = FLT_MAX;
        for (int j = 0; j < QK; ++j) {
            if (x[j] < min)
                min = x[j];
            if (x[j] > max)
                max = x[j];
        }
        d = (max - min) / (levels - 1);
    } else {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; ++j)
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        d = max / -(levels / 2);
    }
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_half(b, d);
    if constexpr (WithMin)
        store_half(b + 2, min);
    uint8_t* p = b + (WithMin ? 4 : 2);
    uint8_t* qs = p + (Fifth ? 4 : 0);
    auto level = [&](float v) -> uint8_t {
        if constexpr (Fifth && WithMin) // Q5_1: no clamp in ggml
            return static_cast<uint8_t>(static_cast<int>((v - min) * id + 0.5f));
        constexpr float bias = WithMin ? 0.5f : levels / 2 + 0.5f;
        const int t = static_cast<int8_t>(static_cast<int>((v - min) * id + bias));
        return static_cast<uint8_t>(min_of(levels - 1, t));
    };
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; ++j) {
        const uint8_t x0 = level(x[j]), x1 = level(x[j + QK / 2]);
        if constexpr (Fifth) {
            qs[j] = static_cast<uint8_t>((x0 & 0x0F) | ((x1 & 0x0F) << 4));
            qh |= ((x0 & 0x10u) >> 4) << j;
            qh |= ((x1 & 0x10u) >> 4) << (j + QK / 2);
        } else {
            qs[j] = static_cast<uint8_t>(x0 | (x1 << 4));
        }
    }
    if constexpr (Fifth)
        std::memcpy(p, &qh, 4);
}

// ---- 256-value super-blocks ----------------------------------------------------------

// Packs levels 0..3 of 256 values four to a byte (Q2_K, Q3_K's low bits): byte l of
// each 32-byte half holds values l, l+32, l+64, l+96 of its 128.
template <typename Level> void pack_2bit(const Level* L, uint8_t* qs)
{
    for (int j = 0; j < QK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                                 (L[j + l + 96] << 6));
}

// Q2_K: 16 groups of 16 with 4-bit scale and min (scales[16], qs[64], d, dmin).
void q2_k(const float* x, uint8_t* b)
{
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    uint8_t* sc = b;
    float max_scale = 0, max_min = 0; // minus the min, scales are positive
    for (int j = 0; j < QK_K / 16; ++j) {
        for (int l = 0; l < 16; ++l)
            weights[l] = std::fabs(x[16 * j + l]);
        scales[j] =
            search_affine(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    if (max_scale > 0) {
        const float iscale = q4scale / max_scale;
        for (int j = 0; j < QK_K / 16; ++j)
            sc[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
        store_half(b + 80, max_scale / q4scale);
    } else {
        std::memset(sc, 0, QK_K / 16);
        store_half(b + 80, 0.f);
    }
    if (max_min > 0) {
        const float iscale = q4scale / max_min;
        for (int j = 0; j < QK_K / 16; ++j)
            sc[j] = static_cast<uint8_t>(sc[j] | (nearest_int(iscale * mins[j]) << 4));
        store_half(b + 82, max_min / q4scale);
    } else {
        store_half(b + 82, 0.f);
    }
    // Re-fit the levels to the stored (rounded) scales; a zero scale keeps the search's.
    const float d_all = load_half(b + 80), dmin_all = load_half(b + 82);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = d_all * static_cast<float>(sc[j] & 0xF);
        if (d == 0)
            continue;
        const float dm = dmin_all * static_cast<float>(sc[j] >> 4);
        for (int ii = 0; ii < 16; ++ii)
            L[16 * j + ii] =
                static_cast<uint8_t>(max_of(0, min_of(3, nearest_int((x[16 * j + ii] + dm) / d))));
    }
    pack_2bit(L, b + 16);
}

// Q3_K: 16 groups of 16 with signed 6-bit scales (hmask[32], qs[64], scales[12], d);
// levels -4..3 stored as 2 low bits in qs and the third in hmask.
void q3_k(const float* x, uint8_t* b)
{
    int8_t L[QK_K];
    float scales[QK_K / 16];
    uint8_t* hmask = b;
    uint8_t* sc = b + 96;
    for (int j = 0; j < QK_K / 16; ++j)
        scales[j] = search_symmetric_refine(16, 4, x + 16 * j, L + 16 * j);
    float amax = 0;
    const float max_scale = signed_max(QK_K / 16, scales, amax);
    std::memset(sc, 0, 12);
    if (max_scale != 0) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < QK_K / 16; ++j) {
            // 6 bits: low 4 in sc[0..8) (two per byte), high 2 in sc[8..12) (four per byte)
            int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
            l = static_cast<int8_t>(max_of<int>(-32, min_of<int>(31, l)) + 32);
            if (j < 8)
                sc[j] = static_cast<uint8_t>(l & 0xF);
            else
                sc[j - 8] = static_cast<uint8_t>(sc[j - 8] | ((l & 0xF) << 4));
            l = static_cast<int8_t>(l >> 4);
            sc[j % 4 + 8] = static_cast<uint8_t>(sc[j % 4 + 8] | (l << (2 * (j / 4))));
        }
        store_half(b + 108, 1 / iscale);
    } else {
        store_half(b + 108, 0.f);
    }
    const float d_all = load_half(b + 108);
    for (int j = 0; j < QK_K / 16; ++j) {
        const int low = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
        const int s = (low | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
        const float d = d_all * static_cast<float>(s);
        if (d == 0)
            continue;
        for (int ii = 0; ii < 16; ++ii)
            L[16 * j + ii] = static_cast<int8_t>(max_of(-4, min_of(3, nearest_int(x[16 * j + ii] / d))) + 4);
    }
    // Third bit: value j sets bit j / 32 of hmask[j % 32].
    std::memset(hmask, 0, QK_K / 8);
    for (int j = 0; j < QK_K; ++j)
        if (L[j] > 3) {
            hmask[j % 32] = static_cast<uint8_t>(hmask[j % 32] | (1u << (j / 32)));
            L[j] = static_cast<int8_t>(L[j] - 4);
        }
    pack_2bit(L, b + 32);
}

// Q4_K, Q5_K: 8 groups of 32 with 6-bit scale and min packed as gguf_quants.cpp's
// scale_min_k4 reads them (d, dmin, scales[12], [qh[32]], qs[128]).
template <bool Fifth> void q4_q5_k(const float* x, uint8_t* b)
{
    constexpr int nmax = Fifth ? 31 : 15;
    uint8_t L[QK_K], Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    uint8_t* sc = b + 4;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        const float* xj = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l)
            sum_x2 += xj[l] * xj[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = av_x + std::fabs(xj[l]);
        scales[j] =
            Fifth ? search_affine(32, nmax, xj, weights, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15, false)
                  : search_affine(32, nmax, xj, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20, false);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        const uint8_t ls = min_of<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
        const uint8_t lm = min_of<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
        if (j < 4) {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else { // low 4 bits in sc[8..12), high 2 in the top of sc[0..8)
            sc[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
            sc[j - 4] = static_cast<uint8_t>(sc[j - 4] | ((ls >> 4) << 6));
            sc[j] = static_cast<uint8_t>(sc[j] | ((lm >> 4) << 6));
        }
    }
    store_half(b, max_scale / 63.f);
    store_half(b + 2, max_min / 63.f);
    const float d_all = load_half(b), dmin_all = load_half(b + 2);
    for (int j = 0; j < QK_K / 32; ++j) {
        const int ls = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        const int lm = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        const float d = d_all * static_cast<float>(ls);
        if (d == 0)
            continue;
        const float dm = dmin_all * static_cast<float>(lm);
        for (int ii = 0; ii < 32; ++ii)
            L[32 * j + ii] =
                static_cast<uint8_t>(max_of(0, min_of(nmax, nearest_int((x[32 * j + ii] + dm) / d))));
    }
    // Low 4 bits: byte l of each 32 holds values l (low nibble) and l+32 of its 64;
    // Q5_K's fifth bits go to qh[l], two bits per 64 values.
    uint8_t* qh = b + 16;
    uint8_t* ql = b + (Fifth ? 48 : 16);
    if constexpr (Fifth)
        std::memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < QK_K; n += 64) {
        for (int l = 0; l < 32; ++l) {
            int l1 = L[n + l], l2 = L[n + l + 32];
            if (Fifth && l1 > 15) {
                l1 -= 16;
                qh[l] |= m1;
            }
            if (Fifth && l2 > 15) {
                l2 -= 16;
                qh[l] |= m2;
            }
            ql[l] = static_cast<uint8_t>(l1 | (l2 << 4));
        }
        m1 = static_cast<uint8_t>(m1 << 2);
        m2 = static_cast<uint8_t>(m2 << 2);
        ql += 32;
    }
}

// Q6_K: 16 groups of 16 with signed 8-bit scales (ql[128], qh[64], scales[16], d);
// levels -32..31 stored +32, low 4 bits in ql, high 2 in qh.
void q6_k(const float* x, uint8_t* b)
{
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int ib = 0; ib < QK_K / 16; ++ib)
        scales[ib] = search_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
    float max_abs_scale = 0;
    const float max_scale = signed_max(QK_K / 16, scales, max_abs_scale);
    if (max_abs_scale < kGroupMaxEps) { // whole block zero, d included
        std::memset(b, 0, 210);
        store_half(b + 208, 0.f);
        return;
    }
    int8_t* sc = reinterpret_cast<int8_t*>(b + 192);
    const float iscale = -128.f / max_scale;
    store_half(b + 208, 1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib)
        sc[ib] = static_cast<int8_t>(min_of(127, nearest_int(iscale * scales[ib])));
    const float d_all = load_half(b + 208);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = d_all * static_cast<float>(sc[j]);
        if (d == 0)
            continue;
        for (int ii = 0; ii < 16; ++ii)
            L[16 * j + ii] =
                static_cast<int8_t>(max_of(-32, min_of(31, nearest_int(x[16 * j + ii] / d))) + 32);
    }
    uint8_t* ql = b;
    uint8_t* qh = b + 128;
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            const int v0 = L[j + l], v1 = L[j + l + 32], v2 = L[j + l + 64], v3 = L[j + l + 96];
            ql[l] = static_cast<uint8_t>((v0 & 0xF) | ((v2 & 0xF) << 4));
            ql[l + 32] = static_cast<uint8_t>((v1 & 0xF) | ((v3 & 0xF) << 4));
            qh[l] = static_cast<uint8_t>((v0 >> 4) | ((v1 >> 4) << 2) | ((v2 >> 4) << 4) | ((v3 >> 4) << 6));
        }
        ql += 64;
        qh += 32;
    }
}

// ---- one-value "blocks" --------------------------------------------------------------

void f32(const float* x, uint8_t* b)
{
    std::memcpy(b, x, 4);
}

void f16(const float* x, uint8_t* b)
{
    store_half(b, *x);
}

void bf16(const float* x, uint8_t* b)
{
    const uint16_t h = float_to_bf16(*x);
    std::memcpy(b, &h, 2);
}

struct Quantizer {
    uint32_t type;
    void (*block)(const float* x, uint8_t* b); // one block
};

constexpr Quantizer kQuantizers[] = {
    {F32, f32},
    {F16, f16},
    {BF16, bf16},
    {Q4_0, q4_q5<false, false>},
    {Q4_1, q4_q5<false, true>},
    {Q5_0, q4_q5<true, false>},
    {Q5_1, q4_q5<true, true>},
    {Q8_0, q8_0},
    {Q2_K, q2_k},
    {Q3_K, q3_k},
    {Q4_K, q4_q5_k<false>},
    {Q5_K, q4_q5_k<true>},
    {Q6_K, q6_k},
};

const Quantizer* find_quantizer(uint32_t ggml_type)
{
    for (const auto& q : kQuantizers)
        if (q.type == ggml_type)
            return &q;
    return nullptr;
}

std::string quantizable_types()
{
    std::string s;
    for (const auto& q : kQuantizers)
        s += (s.empty() ? "" : ", ") + std::string(ggml_type_traits(q.type)->name);
    return s;
}

} // namespace

uint16_t float_to_half(float f)
{
    // Integer form of ggml's float trick (the two agree on all 2^32 inputs).
    uint32_t w;
    std::memcpy(&w, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((w >> 16) & 0x8000u);
    const uint32_t a = w & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return sign | 0x7E00u; // NaN: quiet, payload dropped
    if (a >= 0x477FF000u)
        return sign | 0x7C00u; // >= 65520 rounds to infinity
    const uint32_t e = a >> 23;
    if (e < 102)
        return sign; // below 2^-25: rounds to zero
    uint32_t mant, shift, h;
    if (e < 113) { // half subnormal: units of 2^-24
        mant = (a & 0x7FFFFFu) | 0x800000u;
        shift = 126 - e;
        h = 0;
    } else {
        mant = a & 0x7FFFFFu;
        shift = 13;
        h = (e - 112) << 10;
    }
    h += mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1))) // a carry into the exponent is right
        ++h;
    return static_cast<uint16_t>(sign | h);
}

uint16_t float_to_bf16(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return static_cast<uint16_t>((u >> 16) | 64); // NaN: force the quiet bit
    return static_cast<uint16_t>((u + (0x7FFFu + ((u >> 16) & 1))) >> 16);
}

bool ggml_type_can_quantize(uint32_t ggml_type)
{
    return find_quantizer(ggml_type) != nullptr;
}

void quantize_row(uint32_t ggml_type, const float* x, int64_t n, uint8_t* out)
{
    const Quantizer* q = find_quantizer(ggml_type);
    if (!q) {
        const GgmlTypeTraits* known = ggml_type_traits(ggml_type);
        throw InputError("ggml type " + std::to_string(ggml_type) +
                         (known ? " (" + std::string(known->name) + ")" : "") +
                         " cannot be quantised (supported: " + quantizable_types() + ")");
    }
    const GgmlTypeTraits* t = ggml_type_traits(ggml_type);
    const int64_t blocks = whole_blocks(*t, n);
    for (int64_t k = 0; k < blocks; ++k)
        q->block(x + k * t->block_elems, out + k * t->block_bytes);
}

} // namespace embedlab::io
