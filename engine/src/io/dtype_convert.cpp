#include "io/dtype_convert.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>

#include "embedlab/name_table.hpp"

#include "embedlab/parallel_for.hpp"

namespace embedlab::io {

namespace {

struct StoredTypeRow {
    StoredType value;
    const char* name; // as safetensors writes it
    uint64_t size;    // bytes per element
};
constexpr StoredTypeRow kStoredTypes[]{
    {StoredType::F32, "F32", 4}, {StoredType::F16, "F16", 2}, {StoredType::BF16, "BF16", 2}};

} // namespace

const char* stored_type_name(StoredType t)
{
    return name_of(kStoredTypes, t);
}

uint64_t stored_type_size(StoredType t)
{
    return row_with_value(kStoredTypes, t)->size;
}

std::optional<StoredType> stored_type_from_name(const std::string& name)
{
    if (const auto* row = row_with_name(kStoredTypes, name))
        return row->value;
    return std::nullopt;
}

float f16_to_f32(uint16_t h)
{
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0) {
        // Zero or subnormal: mantissa * 2^-24 is exact in float32.
        const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 0x1f) // Inf or NaN (payload kept)
        return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

float bf16_to_f32(uint16_t bits)
{
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

namespace {

int64_t element_count(const std::vector<int64_t>& shape)
{
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d; // callers validated the shape, so no overflow here
    return n;
}

template <float (*Convert)(uint16_t)> void convert_16bit(const uint8_t* src, float* dst, int64_t n)
{
    // memcpy per element: the source may be unaligned.
    at::parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            uint16_t bits;
            std::memcpy(&bits, src + 2 * i, 2);
            dst[i] = Convert(bits);
        }
    });
}

// `shape`'s bytes at `offset` copied into the innermost KeepHalfMatrices scope's arena
// (the file's pages released); undefined outside a scope or when the arena is full.
torch::Tensor copied_into_arena(const std::shared_ptr<MappedFile>& file, uint64_t offset,
                                const std::vector<int64_t>& shape, const torch::TensorOptions& options)
{
    const auto arena = KeepHalfMatrices::arena_for(*file);
    const uint64_t bytes = static_cast<uint64_t>(element_count(shape)) * options.dtype().itemsize();
    void* copy = arena ? arena->copy_in(file->data() + offset, bytes) : nullptr;
    if (!copy)
        return {};
    file->release(offset, bytes);
    return torch::from_blob(
        copy, shape, [arena](void*) {}, options);
}

} // namespace

torch::Tensor tensor_from_mapped(const std::shared_ptr<MappedFile>& file, uint64_t offset, StoredType type,
                                 const std::vector<int64_t>& shape)
{
    const int64_t n = element_count(shape);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
    if (n == 0)
        return torch::empty(shape, f32);

    const uint8_t* src = file->data() + offset;
    if (type == StoredType::F32) {
        // A generation load's float32 matrices go to the huge-page arena as half ones do.
        if (shape.size() == 2)
            if (auto copy = copied_into_arena(file, offset, shape, f32); copy.defined())
                return copy;
        if (reinterpret_cast<uintptr_t>(src) % alignof(float) == 0) {
            std::shared_ptr<MappedFile> keep_alive = file;
            return torch::from_blob(
                const_cast<uint8_t*>(src), shape, [keep_alive](void*) mutable { keep_alive.reset(); }, f32);
        }
        torch::Tensor out = torch::empty(shape, f32);
        std::memcpy(out.data_ptr<float>(), src, static_cast<size_t>(n) * 4);
        file->release(offset, static_cast<uint64_t>(n) * 4);
        return out;
    }

    torch::Tensor out = torch::empty(shape, f32);
    if (type == StoredType::F16)
        convert_16bit<f16_to_f32>(src, out.data_ptr<float>(), n);
    else
        convert_16bit<bf16_to_f32>(src, out.data_ptr<float>(), n);
    file->release(offset, static_cast<uint64_t>(n) * 2);
    return out;
}

namespace {
thread_local KeepHalfMatrices* innermost_keep_half = nullptr;
} // namespace

KeepHalfMatrices::KeepHalfMatrices() : previous_(innermost_keep_half)
{
    innermost_keep_half = this;
}

KeepHalfMatrices::~KeepHalfMatrices()
{
    innermost_keep_half = previous_;
}

bool KeepHalfMatrices::active()
{
    return innermost_keep_half != nullptr;
}

std::shared_ptr<WeightArena> KeepHalfMatrices::arena_for(const MappedFile& file)
{
    KeepHalfMatrices* scope = innermost_keep_half;
    if (!scope)
        return nullptr;
    for (const auto& [mapped, arena] : scope->arenas_)
        if (mapped == &file)
            return arena;
    return scope->arenas_.emplace_back(&file, std::make_shared<WeightArena>(file.size())).second;
}

torch::Tensor half_tensor_from_mapped(const std::shared_ptr<MappedFile>& file, uint64_t offset,
                                      StoredType type, const std::vector<int64_t>& shape)
{
    const auto options =
        torch::TensorOptions().dtype(type == StoredType::F16 ? torch::kHalf : torch::kBFloat16);
    const int64_t n = element_count(shape);
    const uint8_t* src = file->data() + offset;
    if (n > 0)
        if (auto copy = copied_into_arena(file, offset, shape, options); copy.defined())
            return copy;
    if (n > 0 && reinterpret_cast<uintptr_t>(src) % 2 == 0) {
        std::shared_ptr<MappedFile> keep_alive = file;
        return torch::from_blob(
            const_cast<uint8_t*>(src), shape, [keep_alive](void*) mutable { keep_alive.reset(); }, options);
    }
    torch::Tensor out = torch::empty(shape, options);
    std::memcpy(out.data_ptr(), src, static_cast<size_t>(n) * 2);
    file->release(offset, static_cast<uint64_t>(n) * 2);
    return out;
}

namespace {

// Exponent all ones: Inf when the mantissa is zero, NaN otherwise. Blocks are
// tested branch-free (vectorised) and only a hit is looked at value by value.
template <typename Bits> NonFinite scan_bits(const uint8_t* src, int64_t n, Bits exponent, Bits mantissa)
{
    std::atomic<bool> nan{false}, inf{false};
    at::parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t end) {
        constexpr int64_t block = 4096;
        for (int64_t b = begin; b < end && !(nan && inf); b += block) {
            const int64_t e = std::min(end, b + block);
            bool any = false;
            for (int64_t i = b; i < e; ++i) {
                Bits bits;
                std::memcpy(&bits, src + sizeof(Bits) * i, sizeof(Bits)); // the source may be unaligned
                any |= (bits & exponent) == exponent;
            }
            for (int64_t i = b; any && i < e; ++i) {
                Bits bits;
                std::memcpy(&bits, src + sizeof(Bits) * i, sizeof(Bits));
                if ((bits & exponent) == exponent)
                    (bits & mantissa ? nan : inf) = true;
            }
        }
    });
    return {nan, inf};
}

} // namespace

NonFinite scan_non_finite(const uint8_t* src, StoredType type, int64_t n)
{
    switch (type) {
    case StoredType::F32:
        return scan_bits<uint32_t>(src, n, 0x7f800000u, 0x007fffffu);
    case StoredType::F16:
        return scan_bits<uint16_t>(src, n, 0x7c00u, 0x03ffu);
    case StoredType::BF16:
        return scan_bits<uint16_t>(src, n, 0x7f80u, 0x007fu);
    }
    return {};
}

std::string non_finite_warning(const std::string& name, NonFinite f)
{
    if (!f.nan && !f.inf)
        return "";
    return std::string(f.nan && f.inf ? "NaN and Inf" : f.nan ? "NaN" : "Inf") + " in tensor " + name;
}

std::string summarize_stored_types(const std::set<std::string>& names)
{
    if (names.empty())
        return "";
    return names.size() == 1 ? *names.begin() : "mixed";
}

} // namespace embedlab::io
