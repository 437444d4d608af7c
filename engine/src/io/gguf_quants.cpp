// Block layouts and arithmetic follow ggml-quants.c (dequantize_row_q4_0 ...).
#include "io/gguf_quants.hpp"

#include <cmath>
#include <cstring>

#include "embedlab/error.hpp"

namespace embedlab::io {

namespace {

constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10,
                   Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30;
constexpr int QK = 32, QK_K = 256;

template <typename T> T load(const uint8_t* p)
{
    T v;
    std::memcpy(&v, p, sizeof(T)); // little-endian files on little-endian hosts
    return v;
}

float half(const uint8_t* p)
{
    return half_to_float(load<uint16_t>(p));
}

// Q4_K / Q5_K: 8 six-bit scales and mins packed into 12 bytes.
void scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m)
{
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// Q4_0, Q4_1, Q5_0, Q5_1: 32 weights, the low 4 bits two to a byte in qs, for Q5
// a fifth bit each in the 32 bits of qh. _0 centres them ((x - 8) d, (x - 16) d);
// _1 adds a stored min (x d + m).
template <bool Fifth, bool WithMin> void q4_q5(const uint8_t* b, float* y)
{
    const float d = half(b), m = WithMin ? half(b + 2) : 0.0f;
    const uint8_t* p = b + (WithMin ? 4 : 2);
    const uint32_t qh = Fifth ? load<uint32_t>(p) : 0;
    const uint8_t* qs = p + (Fifth ? 4 : 0);
    constexpr int centre = Fifth ? 16 : 8;
    for (int j = 0; j < QK / 2; ++j) {
        const int x0 = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10);
        const int x1 = (qs[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
        if constexpr (WithMin) {
            y[j] = static_cast<float>(x0) * d + m;
            y[j + QK / 2] = static_cast<float>(x1) * d + m;
        } else {
            y[j] = static_cast<float>(x0 - centre) * d;
            y[j + QK / 2] = static_cast<float>(x1 - centre) * d;
        }
    }
}

// Q8_0 (d), Q8_1 (d, then s, the sum, unused here): 32 signed bytes times d.
template <int ScaleBytes> void q8_0(const uint8_t* b, float* y)
{
    const float d = half(b);
    for (int j = 0; j < QK; ++j)
        y[j] = static_cast<float>(static_cast<int8_t>(b[ScaleBytes + j])) * d;
}

// Q2_K: 256 weights in 16 groups of 16 (scales[16], qs[64], d, dmin); each scales
// byte holds a 4-bit scale (low) and min (high). The 2-bit levels sit four to a
// byte: byte l of each 32-byte half holds weights l, l+32, l+64, l+96 of its 128.
void q2_k(const uint8_t* b, float* y)
{
    const uint8_t* scales = b;
    const uint8_t* q = b + 16;
    const float d = half(b + 80), min = half(b + 82);
    int is = 0;
    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half_group = 0; half_group < 2; ++half_group) { // q[0..16), then q[16..32)
                const uint8_t sc = scales[is++];
                const float dl = d * static_cast<float>(sc & 0xF), ml = min * static_cast<float>(sc >> 4);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * static_cast<float>((q[l + 16 * half_group] >> shift) & 3) - ml;
            }
        }
        q += 32;
    }
}

// Q3_K: 256 weights in 16 groups of 16 (hmask[32], qs[64], scales[12], d). Signed
// 6-bit scales (stored +32): low 4 bits in scales[0..8), two per byte, high 2 bits
// in scales[8..12), four per byte. Levels -4..3: 2 low bits packed as Q2_K, the
// third in hmask (bit j/32 of hmask[j%32]; clear means subtract 4).
void q3_k(const uint8_t* b, float* y)
{
    const uint8_t* hm = b;
    const uint8_t* q = b + 32;
    const uint8_t* sc = b + 96;
    const float d_all = half(b + 108);
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half_group = 0; half_group < 2; ++half_group) {
                const int low = is < 8 ? sc[is] & 0xF : sc[is - 8] >> 4;
                const int scale = (low | (((sc[8 + is % 4] >> (2 * (is / 4))) & 3) << 4)) - 32;
                ++is;
                const float dl = d_all * static_cast<float>(scale);
                for (int l = 16 * half_group; l < 16 * half_group + 16; ++l)
                    *y++ = dl * static_cast<float>(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
            }
            m = static_cast<uint8_t>(m << 1);
        }
        q += 32;
    }
}

// Q4_K, Q5_K: 256 weights in sub-blocks of 32, each with a 6-bit scale and min
// (scale_min_k4), the low 4 bits two to a byte in ql, for Q5_K a fifth bit each in
// qh (bit pair u1/u2, moving up two bits every 64 weights).
template <bool Fifth> void q4_q5_k(const uint8_t* b, float* y)
{
    const float d = half(b), dmin = half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + (Fifth ? 48 : 16);
    int is = 0;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < QK_K; j += 64) {
        uint8_t sc, m;
        scale_min_k4(is, scales, sc, m);
        const float d1 = d * sc, m1 = dmin * m;
        scale_min_k4(is + 1, scales, sc, m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; ++l)
            *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (Fifth && (qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l)
            *y++ = d2 * static_cast<float>((ql[l] >> 4) + (Fifth && (qh[l] & u2) ? 16 : 0)) - m2;
        ql += 32;
        is += 2;
        u1 = static_cast<uint8_t>(u1 << 2);
        u2 = static_cast<uint8_t>(u2 << 2);
    }
}

void q6_k(const uint8_t* b, float* y)
{
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const uint8_t* sc_bytes = b + 192;
    const float d = half(b + 208);
    for (int n = 0; n < QK_K; n += 128) {
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            auto sc = [&](int k) { return static_cast<float>(static_cast<int8_t>(sc_bytes[k])); };
            y[l] = d * sc(is) * static_cast<float>(q1);
            y[l + 32] = d * sc(is + 2) * static_cast<float>(q2);
            y[l + 64] = d * sc(is + 4) * static_cast<float>(q3);
            y[l + 96] = d * sc(is + 6) * static_cast<float>(q4);
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc_bytes += 8;
    }
}

void q8_k(const uint8_t* b, float* y)
{
    const float d = load<float>(b);
    for (int j = 0; j < QK_K; ++j)
        y[j] = d * static_cast<float>(static_cast<int8_t>(b[4 + j]));
}

void f32(const uint8_t* b, float* y)
{
    *y = load<float>(b);
}

void f16(const uint8_t* b, float* y)
{
    *y = half(b);
}

void bf16(const uint8_t* b, float* y)
{
    const uint32_t bits = static_cast<uint32_t>(load<uint16_t>(b)) << 16;
    std::memcpy(y, &bits, 4);
}

struct Entry {
    uint32_t type;
    GgmlTypeTraits traits;
    void (*block)(const uint8_t* b, float* y); // one block's values
};

constexpr Entry kTypes[] = {
    {F32, {"F32", 1, 4}, f32},
    {F16, {"F16", 1, 2}, f16},
    {BF16, {"BF16", 1, 2}, bf16},
    {Q4_0, {"Q4_0", QK, 18}, q4_q5<false, false>},
    {Q4_1, {"Q4_1", QK, 20}, q4_q5<false, true>},
    {Q5_0, {"Q5_0", QK, 22}, q4_q5<true, false>},
    {Q5_1, {"Q5_1", QK, 24}, q4_q5<true, true>},
    {Q8_0, {"Q8_0", QK, 34}, q8_0<2>},
    {Q8_1, {"Q8_1", QK, 36}, q8_0<4>},
    {Q2_K, {"Q2_K", QK_K, 84}, q2_k},
    {Q3_K, {"Q3_K", QK_K, 110}, q3_k},
    {Q4_K, {"Q4_K", QK_K, 144}, q4_q5_k<false>},
    {Q5_K, {"Q5_K", QK_K, 176}, q4_q5_k<true>},
    {Q6_K, {"Q6_K", QK_K, 210}, q6_k},
    {Q8_K, {"Q8_K", QK_K, 292}, q8_k},
};

const Entry* find_type(uint32_t ggml_type)
{
    for (const auto& e : kTypes)
        if (e.type == ggml_type)
            return &e;
    return nullptr;
}

} // namespace

const GgmlTypeTraits* ggml_type_traits(const std::string& name)
{
    for (const auto& e : kTypes)
        if (name == e.traits.name)
            return &e.traits;
    return nullptr;
}

float half_to_float(uint16_t h)
{
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
    if (exponent == 0) { // zero or subnormal: mantissa * 2^-24
        const float v = std::ldexp(static_cast<float>(mantissa), -24);
        return sign ? -v : v;
    }
    uint32_t bits;
    if (exponent == 31)
        bits = sign | 0x7F800000u | (mantissa << 13); // infinity or NaN
    else
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

const GgmlTypeTraits* ggml_type_traits(uint32_t ggml_type)
{
    const Entry* e = find_type(ggml_type);
    return e ? &e->traits : nullptr;
}

std::string supported_ggml_types()
{
    std::string s;
    for (const auto& e : kTypes)
        s += (s.empty() ? "" : ", ") + std::string(e.traits.name);
    return s;
}

uint64_t ggml_row_bytes(uint32_t ggml_type, int64_t n)
{
    const auto* t = ggml_type_traits(ggml_type);
    if (!t || n < 0 || n % t->block_elems != 0)
        return 0;
    return static_cast<uint64_t>(n / t->block_elems) * t->block_bytes;
}

int64_t whole_blocks(const GgmlTypeTraits& t, int64_t n)
{
    if (n < 0 || n % t.block_elems != 0)
        throw InputError(std::string(t.name) + " stores blocks of " + std::to_string(t.block_elems) +
                         " values; a row of " + std::to_string(n) + " is not a whole number of blocks");
    return n / t.block_elems;
}

void dequantize_row(uint32_t ggml_type, const uint8_t* data, int64_t n, float* out)
{
    const Entry* e = find_type(ggml_type);
    if (!e)
        throw InputError("ggml type " + std::to_string(ggml_type) +
                         " cannot be dequantised (supported: " + supported_ggml_types() + ")");
    const GgmlTypeTraits* t = &e->traits;
    const int64_t blocks = whole_blocks(*t, n);
    for (int64_t k = 0; k < blocks; ++k)
        e->block(data + k * t->block_bytes, out + k * t->block_elems);
}

} // namespace embedlab::io
