// Block layouts and arithmetic follow ggml-quants.c (dequantize_row_q4_0 ...).
#include "io/gguf_quants.hpp"

#include <cmath>
#include <cstring>

#include "embedlab/error.hpp"

namespace embedlab::io {

namespace {

constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q4_K = 12,
                   Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30;
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

void q4_0(const uint8_t* b, float* y)
{
    const float d = half(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < QK / 2; ++j) {
        y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
        y[j + QK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
}

void q4_1(const uint8_t* b, float* y)
{
    const float d = half(b), m = half(b + 2);
    const uint8_t* qs = b + 4;
    for (int j = 0; j < QK / 2; ++j) {
        y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
        y[j + QK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
    }
}

void q5(const uint8_t* b, float* y, bool with_min)
{
    const float d = half(b), m = with_min ? half(b + 2) : 0.0f;
    const uint8_t* p = b + (with_min ? 4 : 2);
    const uint32_t qh = load<uint32_t>(p);
    const uint8_t* qs = p + 4;
    for (int j = 0; j < QK / 2; ++j) {
        const uint8_t xh0 = static_cast<uint8_t>(((qh >> j) << 4) & 0x10);
        const uint8_t xh1 = static_cast<uint8_t>((qh >> (j + 12)) & 0x10);
        const int x0 = (qs[j] & 0x0F) | xh0, x1 = (qs[j] >> 4) | xh1;
        if (with_min) {
            y[j] = static_cast<float>(x0) * d + m;
            y[j + QK / 2] = static_cast<float>(x1) * d + m;
        } else {
            y[j] = static_cast<float>(x0 - 16) * d;
            y[j + QK / 2] = static_cast<float>(x1 - 16) * d;
        }
    }
}

void q8_0(const uint8_t* b, float* y, int scale_bytes)
{
    const float d = half(b);
    for (int j = 0; j < QK; ++j)
        y[j] = static_cast<float>(static_cast<int8_t>(b[scale_bytes + j])) * d;
}

void q4_k(const uint8_t* b, float* y)
{
    const float d = half(b), dmin = half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* q = b + 16;
    int is = 0;
    for (int j = 0; j < QK_K; j += 64) {
        uint8_t sc, m;
        scale_min_k4(is, scales, sc, m);
        const float d1 = d * sc, m1 = dmin * m;
        scale_min_k4(is + 1, scales, sc, m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; ++l)
            *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; ++l)
            *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        q += 32;
        is += 2;
    }
}

void q5_k(const uint8_t* b, float* y)
{
    const float d = half(b), dmin = half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48;
    int is = 0;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < QK_K; j += 64) {
        uint8_t sc, m;
        scale_min_k4(is, scales, sc, m);
        const float d1 = d * sc, m1 = dmin * m;
        scale_min_k4(is + 1, scales, sc, m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; ++l)
            *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l)
            *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
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

struct Entry {
    uint32_t type;
    GgmlTypeTraits traits;
};

constexpr Entry kTypes[] = {
    {F32, {"F32", 1, 4}},        {F16, {"F16", 1, 2}},        {BF16, {"BF16", 1, 2}},
    {Q4_0, {"Q4_0", QK, 18}},    {Q4_1, {"Q4_1", QK, 20}},    {Q5_0, {"Q5_0", QK, 22}},
    {Q5_1, {"Q5_1", QK, 24}},    {Q8_0, {"Q8_0", QK, 34}},    {Q8_1, {"Q8_1", QK, 36}},
    {Q4_K, {"Q4_K", QK_K, 144}}, {Q5_K, {"Q5_K", QK_K, 176}}, {Q6_K, {"Q6_K", QK_K, 210}},
    {Q8_K, {"Q8_K", QK_K, 292}},
};

} // namespace

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
    for (const auto& e : kTypes)
        if (e.type == ggml_type)
            return &e.traits;
    return nullptr;
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

void dequantize_row(uint32_t ggml_type, const uint8_t* data, int64_t n, float* out)
{
    const auto* t = ggml_type_traits(ggml_type);
    if (!t)
        throw InputError("ggml type " + std::to_string(ggml_type) +
                         " cannot be dequantised (supported: " + supported_ggml_types() + ")");
    if (n % t->block_elems != 0)
        throw InputError(std::string(t->name) + " stores blocks of " + std::to_string(t->block_elems) +
                         " values; a row of " + std::to_string(n) + " is not a whole number of blocks");
    const int64_t blocks = n / t->block_elems;
    for (int64_t k = 0; k < blocks; ++k) {
        const uint8_t* b = data + k * t->block_bytes;
        float* y = out + k * t->block_elems;
        switch (ggml_type) {
        case F32:
            *y = load<float>(b);
            break;
        case F16:
            *y = half(b);
            break;
        case BF16: {
            const uint32_t bits = static_cast<uint32_t>(load<uint16_t>(b)) << 16;
            std::memcpy(y, &bits, 4);
            break;
        }
        case Q4_0:
            q4_0(b, y);
            break;
        case Q4_1:
            q4_1(b, y);
            break;
        case Q5_0:
            q5(b, y, false);
            break;
        case Q5_1:
            q5(b, y, true);
            break;
        case Q8_0:
            q8_0(b, y, 2);
            break;
        case Q8_1:
            q8_0(b, y, 4); // d, then s (the sum, unused here)
            break;
        case Q4_K:
            q4_k(b, y);
            break;
        case Q5_K:
            q5_k(b, y);
            break;
        case Q6_K:
            q6_k(b, y);
            break;
        default:
            q8_k(b, y);
            break;
        }
    }
}

} // namespace embedlab::io
