// Overflow-checked element counts and byte sizes for the file parsers: a header
// may claim any dimensions, and a product that wraps (GGUF dims [2^62, 4] in F32:
// 2^64 bytes, i.e. 0) would pass the bounds check it is meant to fail. Every such
// product in safetensors_header.cpp, gguf_parser.cpp and llama2c*.cpp goes
// through these. Torch-free (fuzzed: fuzz/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

namespace embedlab::io {

// a * b, or nothing when it does not fit in 64 bits.
inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b)
{
    uint64_t product = 0;
    if (__builtin_mul_overflow(a, b, &product))
        return std::nullopt;
    return product;
}

// a + b, or nothing when it does not fit in 64 bits.
inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b)
{
    uint64_t sum = 0;
    if (__builtin_add_overflow(a, b, &sum))
        return std::nullopt;
    return sum;
}

// The element count of a tensor with these dimensions (non-negative), or nothing
// when it cannot be a tensor: the count, or the product with every zero dimension
// counted as one (libtorch's largest stride, which it computes even for an empty
// tensor), exceeds INT64_MAX.
template <class Dims> std::optional<uint64_t> checked_elements(const Dims& dims)
{
    uint64_t elements = 1, strides = 1;
    for (const auto d : dims) {
        if constexpr (std::is_signed_v<std::decay_t<decltype(d)>>)
            if (d < 0)
                return std::nullopt;
        const auto dim = static_cast<uint64_t>(d);
        if (dim > static_cast<uint64_t>(INT64_MAX))
            return std::nullopt;
        const auto e = checked_mul(elements, dim);
        const auto s = checked_mul(strides, dim == 0 ? 1 : dim);
        if (!e || !s || *s > static_cast<uint64_t>(INT64_MAX))
            return std::nullopt;
        elements = *e;
        strides = *s;
    }
    return elements;
}

// "[a, b, c]", for messages.
template <class Dims> std::string dims_text(const Dims& dims)
{
    std::string s = "[";
    bool first = true;
    for (const auto d : dims) {
        s += (first ? "" : ", ") + std::to_string(d);
        first = false;
    }
    return s + "]";
}

} // namespace embedlab::io
