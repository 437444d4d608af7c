// The GGUF container (v2, v3): header, metadata key/values and tensor infos,
// validated against the file size before anything is allocated. Knows nothing
// about model architectures (gguf.cpp does).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/mapped_file.hpp"

namespace embedlab::io {

enum class GgufType : uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

struct GgufValue {
    GgufType type = GgufType::UInt8;
    // Scalars keep their value in the widest field of their kind.
    uint64_t u = 0; // unsigned integers, bool
    int64_t i = 0;  // signed integers
    double f = 0;   // floats
    std::string s;  // string

    // Arrays. Fixed-size elements stay in the mapped file (`raw`, decoded on
    // access) so a huge array costs no memory; strings and nested arrays are
    // decoded.
    GgufType elem_type = GgufType::UInt8;
    uint64_t count = 0;
    const uint8_t* raw = nullptr;
    std::vector<std::string> strings;
    std::vector<GgufValue> arrays;

    bool is_integer() const;
    bool is_float() const { return type == GgufType::Float32 || type == GgufType::Float64; }
    // Element k of a fixed-size-element array, as a scalar value.
    GgufValue element(uint64_t k) const;
};

struct GgufTensorInfo {
    std::string name;
    std::vector<int64_t> ne; // ggml order: ne[0] varies fastest
    uint32_t type = 0;       // ggml_type
    uint64_t offset = 0;     // relative to the data section
};

struct GgufFile {
    uint32_t version = 0;
    std::map<std::string, GgufValue> metadata;
    std::vector<GgufTensorInfo> tensors;
    uint64_t alignment = 32;
    uint64_t data_start = 0; // absolute offset of the aligned data section

    const GgufValue* find(const std::string& key) const;
};

// Parses and validates the container structure; tensor types and data bounds
// are checked by check_gguf_tensor (types other readers support may differ).
GgufFile parse_gguf(const MappedFile& file);

// Name of a ggml tensor type ("F32", "Q4_0", ...) or "type N".
std::string ggml_type_name(uint32_t type);

// Bytes per element of the float types we load (F32, F16, BF16), else nullopt.
std::optional<uint64_t> ggml_float_type_size(uint32_t type);

// Checks every tensor: a type EmbedLab decodes (gguf_quants.hpp), whole blocks per
// row, bytes inside the data section,
// no two tensors overlapping. Returns each tensor's byte size (same order).
// Throws InputError naming the file and the tensor.
std::vector<uint64_t> check_gguf_tensor_data(const GgufFile& gguf, const MappedFile& file);

// Typed reads of a parsed file's metadata, each refusal an InputError "<where>: <problem>"
// naming the key: the model reader (gguf.cpp) and the tokenizer reader build on it.
class GgufKeys {
public:
    GgufKeys(const GgufFile& gguf, std::string where) : gguf_(gguf), where_(std::move(where)) {}
    [[noreturn]] void fail(const std::string& problem) const;
    const GgufValue* find(const std::string& key) const { return gguf_.find(key); }
    std::optional<int64_t> integer(const std::string& key) const; // unsigned values clamp at INT64_MAX
    double real(const std::string& key, double fallback) const;
    std::optional<std::string> string(const std::string& key) const;
    bool boolean(const std::string& key, bool fallback) const;
    // The array at `key` of `element`s, or null when absent.
    const GgufValue* array(const std::string& key, GgufType element) const;

private:
    const GgufFile& gguf_;
    std::string where_;
};

} // namespace embedlab::io
