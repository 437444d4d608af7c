#include "io/gguf_parser.hpp"

#include "io/checked_size.hpp"
#include "io/gguf_quants.hpp"

#include <algorithm>
#include <cstring>

#include "embedlab/error.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab::io {

namespace {

constexpr int kMaxArrayNesting = 8; // real files nest at most once
constexpr uint32_t kMaxDims = 4;    // GGML_MAX_DIMS

// Smallest encoding of one value of `type`, to bound claimed counts by the bytes left.
uint64_t min_value_size(GgufType type)
{
    switch (type) {
    case GgufType::UInt8:
    case GgufType::Int8:
    case GgufType::Bool:
        return 1;
    case GgufType::UInt16:
    case GgufType::Int16:
        return 2;
    case GgufType::UInt32:
    case GgufType::Int32:
    case GgufType::Float32:
        return 4;
    case GgufType::UInt64:
    case GgufType::Int64:
    case GgufType::Float64:
        return 8;
    case GgufType::String:
        return 8; // length prefix
    case GgufType::Array:
        return 12; // element type + count
    }
    return 1;
}

class Cursor {
public:
    Cursor(const MappedFile& file) : data_(file.data()), size_(file.size()), label_(file.label()) {}

    uint64_t pos() const { return pos_; }
    const uint8_t* here() const { return data_ + pos_; }
    void skip(uint64_t n) { pos_ += n; }
    uint64_t remaining() const { return size_ - pos_; }

    [[noreturn]] void fail(const std::string& problem) const { throw InputError(label_ + ": " + problem); }

    void need(uint64_t n, const std::string& what) const
    {
        if (n > remaining())
            fail("file is truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                 std::to_string(pos_) + " but the file has " + std::to_string(size_) + " bytes");
    }

    template <typename T> T read(const std::string& what)
    {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + pos_, sizeof(T)); // GGUF is little-endian, like our hosts
        pos_ += sizeof(T);
        return v;
    }

    std::string read_string(const std::string& what)
    {
        const auto len = read<uint64_t>(what + " length");
        if (len > remaining())
            fail(what + " claims a string of " + std::to_string(len) + " bytes but only " +
                 std::to_string(remaining()) + " bytes remain; the file is truncated or corrupt");
        std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
        pos_ += len;
        return s;
    }

    // A count of items each at least `min_size` bytes, checked before anything is allocated.
    uint64_t read_count(const std::string& what, uint64_t min_size)
    {
        const auto n = read<uint64_t>(what + " count");
        if (n > remaining() / min_size)
            fail("header claims " + std::to_string(n) + " " + what + " but only " +
                 std::to_string(remaining()) + " bytes remain; the file is truncated or corrupt");
        return n;
    }

private:
    const uint8_t* data_;
    uint64_t size_;
    std::string label_;
    uint64_t pos_ = 0;
};

GgufType read_type(Cursor& in, const std::string& what)
{
    const auto t = in.read<uint32_t>(what + " type");
    if (t > static_cast<uint32_t>(GgufType::Float64))
        in.fail(what + " has unknown value type " + std::to_string(t));
    return static_cast<GgufType>(t);
}

uint64_t fixed_value_size(GgufType type)
{
    return type == GgufType::String || type == GgufType::Array ? 0 : min_value_size(type);
}

// A scalar of fixed-size `type` from little-endian bytes.
GgufValue decode_scalar(GgufType type, const uint8_t* p)
{
    GgufValue v;
    v.type = type;
    auto load = [p](auto x) {
        std::memcpy(&x, p, sizeof x);
        return x;
    };
    switch (type) {
    case GgufType::UInt8:
        v.u = load(uint8_t{});
        break;
    case GgufType::Int8:
        v.i = load(int8_t{});
        break;
    case GgufType::UInt16:
        v.u = load(uint16_t{});
        break;
    case GgufType::Int16:
        v.i = load(int16_t{});
        break;
    case GgufType::UInt32:
        v.u = load(uint32_t{});
        break;
    case GgufType::Int32:
        v.i = load(int32_t{});
        break;
    case GgufType::UInt64:
        v.u = load(uint64_t{});
        break;
    case GgufType::Int64:
        v.i = load(int64_t{});
        break;
    case GgufType::Float32:
        v.f = load(float{});
        break;
    case GgufType::Float64:
        v.f = load(double{});
        break;
    case GgufType::Bool:
        v.u = load(uint8_t{}) != 0;
        break;
    case GgufType::String:
    case GgufType::Array:
        break;
    }
    return v;
}

GgufValue read_value(Cursor& in, GgufType type, const std::string& what, int depth)
{
    if (const uint64_t size = fixed_value_size(type)) {
        in.need(size, what);
        GgufValue v = decode_scalar(type, in.here());
        in.skip(size);
        return v;
    }
    GgufValue v;
    v.type = type;
    if (type == GgufType::String) {
        v.s = in.read_string(what);
        return v;
    }
    if (depth >= kMaxArrayNesting)
        in.fail(what + " nests arrays more than " + std::to_string(kMaxArrayNesting) + " deep");
    v.elem_type = read_type(in, what + " element");
    v.count = in.read_count(what + " array elements", min_value_size(v.elem_type));
    if (const uint64_t size = fixed_value_size(v.elem_type)) {
        v.raw = in.here();
        in.skip(v.count * size); // read_count checked count * size <= remaining
    } else if (v.elem_type == GgufType::String) {
        v.strings.reserve(v.count);
        for (uint64_t k = 0; k < v.count; ++k)
            v.strings.push_back(in.read_string(what + " element " + std::to_string(k)));
    } else {
        v.arrays.reserve(v.count);
        for (uint64_t k = 0; k < v.count; ++k)
            v.arrays.push_back(read_value(in, GgufType::Array, what, depth + 1));
    }
    return v;
}

void read_header_start(Cursor& in, GgufFile& out)
{
    in.need(4, "the GGUF magic");
    const auto magic = in.read<std::array<char, 4>>("magic");
    if (std::memcmp(magic.data(), "GGUF", 4) != 0) {
        std::string shown;
        for (char c : magic)
            shown += (c >= 32 && c < 127) ? c : '?';
        in.fail("not a GGUF file (wrong magic '" + shown + "', expected 'GGUF')");
    }
    out.version = in.read<uint32_t>("version");
    if (out.version == 0x02000000u || out.version == 0x03000000u)
        in.fail("big-endian GGUF files are not supported");
    if (out.version == 1)
        in.fail("GGUF version 1 (a pre-release format) is not supported; re-convert the model with a current "
                "llama.cpp");
    if (out.version != 2 && out.version != 3)
        in.fail("unsupported GGUF version " + std::to_string(out.version) + " (supported: 2 and 3)");
}

} // namespace

bool GgufValue::is_integer() const
{
    switch (type) {
    case GgufType::UInt8:
    case GgufType::Int8:
    case GgufType::UInt16:
    case GgufType::Int16:
    case GgufType::UInt32:
    case GgufType::Int32:
    case GgufType::UInt64:
    case GgufType::Int64:
        return true;
    default:
        return false;
    }
}

GgufValue GgufValue::element(uint64_t k) const
{
    return raw && k < count ? decode_scalar(elem_type, raw + k * fixed_value_size(elem_type)) : GgufValue{};
}

const GgufValue* GgufFile::find(const std::string& key) const
{
    const auto it = metadata.find(key);
    return it == metadata.end() ? nullptr : &it->second;
}

GgufFile parse_gguf(const MappedFile& file)
{
    Cursor in(file);
    GgufFile out;
    read_header_start(in, out);

    // Minimal sizes: a tensor info has a name length, n_dims, one dim, type and
    // offset (32 bytes); a key/value a key length, type and one byte (13 bytes).
    const uint64_t n_tensors = in.read_count("tensors", 32);
    const uint64_t n_kv = in.read_count("metadata key/values", 13);

    for (uint64_t k = 0; k < n_kv; ++k) {
        const std::string key = in.read_string("metadata key " + std::to_string(k));
        const std::string what = "metadata '" + key + "'";
        const GgufType type = read_type(in, what);
        GgufValue value = read_value(in, type, what, 0);
        if (!out.metadata.emplace(key, std::move(value)).second)
            in.fail("duplicate metadata key '" + printable(key) + "'");
    }

    out.tensors.reserve(n_tensors);
    for (uint64_t k = 0; k < n_tensors; ++k) {
        const std::string what = "tensor info " + std::to_string(k);
        GgufTensorInfo t;
        t.name = in.read_string(what + " name");
        const auto n_dims = in.read<uint32_t>(what + " n_dims");
        if (n_dims == 0 || n_dims > kMaxDims)
            in.fail("tensor '" + printable(t.name) + "' has " + std::to_string(n_dims) +
                    " dimensions (expected 1 to " + std::to_string(kMaxDims) + ")");
        for (uint32_t d = 0; d < n_dims; ++d) {
            const auto ne = in.read<uint64_t>(what + " dimension");
            if (ne > static_cast<uint64_t>(INT64_MAX))
                in.fail("tensor '" + printable(t.name) + "' has an impossible dimension " +
                        std::to_string(ne));
            t.ne.push_back(static_cast<int64_t>(ne));
        }
        t.type = in.read<uint32_t>(what + " type");
        t.offset = in.read<uint64_t>(what + " offset");
        out.tensors.push_back(std::move(t));
    }

    if (const GgufValue* a = out.find("general.alignment")) {
        const bool is_unsigned = a->type == GgufType::UInt8 || a->type == GgufType::UInt16 ||
                                 a->type == GgufType::UInt32 || a->type == GgufType::UInt64;
        const uint64_t alignment = is_unsigned ? a->u : 0;
        if (alignment == 0 || (alignment & (alignment - 1)) != 0)
            in.fail("general.alignment must be a power of two");
        out.alignment = alignment;
    }
    const uint64_t padding = (out.alignment - in.pos() % out.alignment) % out.alignment;
    in.need(padding, "padding before the tensor data");
    out.data_start = in.pos() + padding;
    return out;
}

std::string ggml_type_name(uint32_t type)
{
    static const char* const names[] = {
        "F32",   "F16",    "Q4_0", "Q4_1", "Q4_2", "Q4_3",    "Q5_0",   "Q5_1",    "Q8_0",  "Q8_1",   "Q2_K",
        "Q3_K",  "Q4_K",   "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
        "IQ2_S", "IQ4_XS", "I8",   "I16",  "I32",  "I64",     "F64",    "IQ1_M",   "BF16",
    };
    if (type < std::size(names))
        return names[type];
    return "type " + std::to_string(type);
}

std::optional<uint64_t> ggml_float_type_size(uint32_t type)
{
    switch (type) {
    case 0:
        return 4; // F32
    case 1:
        return 2; // F16
    case 30:
        return 2; // BF16
    default:
        return std::nullopt;
    }
}

std::vector<uint64_t> check_gguf_tensor_data(const GgufFile& gguf, const MappedFile& file)
{
    const std::string label = file.label();
    const uint64_t data_size = file.size() - gguf.data_start;
    std::vector<uint64_t> sizes;
    for (const GgufTensorInfo& t : gguf.tensors) {
        const GgmlTypeTraits* traits = ggml_type_traits(t.type);
        if (!traits)
            throw InputError(
                label + ": tensor '" + printable(t.name) + "' has " +
                (ggml_type_name(t.type).rfind("type ", 0) != 0
                     ? "type " + ggml_type_name(t.type) + " (" + std::to_string(t.type) + ")"
                     : "ggml type number " + std::to_string(t.type) + ", which is no ggml type") +
                ", and EmbedLab cannot dequantise it (supported: " + supported_ggml_types() + ")");
        if (t.ne.empty() || t.ne[0] % traits->block_elems != 0)
            throw InputError(label + ": tensor '" + printable(t.name) + "' has rows of " +
                             std::to_string(t.ne.empty() ? 0 : t.ne[0]) + " values, not a whole number of " +
                             traits->name + " blocks of " + std::to_string(traits->block_elems));
        // Checked: ggml_row_bytes wraps for rows past 2^64 bytes, and the product of
        // the dimensions may wrap to anything (dims [2^62, 4] in F32: 0 bytes).
        std::optional<uint64_t> bytes;
        if (checked_elements(t.ne))
            bytes = checked_mul(static_cast<uint64_t>(t.ne[0]) / traits->block_elems, traits->block_bytes);
        for (size_t k = 1; k < t.ne.size() && bytes; ++k)
            bytes = checked_mul(*bytes, static_cast<uint64_t>(t.ne[k]));
        if (!bytes)
            throw InputError(label + ": tensor '" + printable(t.name) + "' has dimensions " +
                             dims_text(t.ne) + ": impossibly large (its element count or " + traits->name +
                             " byte size does not fit in 64 bits); the file is corrupt");
        if (t.offset > data_size || *bytes > data_size - t.offset)
            throw InputError(label + ": tensor '" + printable(t.name) + "' (" + std::to_string(*bytes) +
                             " bytes at data offset " + std::to_string(t.offset) +
                             ") lies outside the data section (" + std::to_string(data_size) +
                             " bytes); the file is truncated or corrupt");
        sizes.push_back(*bytes);
    }

    std::vector<size_t> order(gguf.tensors.size());
    for (size_t k = 0; k < order.size(); ++k)
        order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return gguf.tensors[a].offset < gguf.tensors[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
        const auto& prev = gguf.tensors[order[k - 1]];
        const auto& cur = gguf.tensors[order[k]];
        if (cur.offset < prev.offset + sizes[order[k - 1]])
            throw InputError(label + ": tensors '" + prev.name + "' and '" + cur.name +
                             "' overlap in the data section");
    }
    return sizes;
}

void GgufKeys::fail(const std::string& problem) const
{
    throw InputError(where_ + ": " + problem);
}

std::optional<int64_t> GgufKeys::integer(const std::string& key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return std::nullopt;
    if (!v->is_integer())
        fail("metadata '" + key + "' must be an integer");
    const bool is_signed = v->type == GgufType::Int8 || v->type == GgufType::Int16 ||
                           v->type == GgufType::Int32 || v->type == GgufType::Int64;
    return is_signed ? v->i : static_cast<int64_t>(std::min<uint64_t>(v->u, INT64_MAX));
}

double GgufKeys::real(const std::string& key, double fallback) const
{
    const GgufValue* v = find(key);
    if (!v)
        return fallback;
    if (!v->is_float())
        fail("metadata '" + key + "' must be a float");
    return v->f;
}

std::optional<std::string> GgufKeys::string(const std::string& key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return std::nullopt;
    if (v->type != GgufType::String)
        fail("metadata '" + key + "' must be a string");
    return v->s;
}

bool GgufKeys::boolean(const std::string& key, bool fallback) const
{
    const GgufValue* v = find(key);
    if (!v)
        return fallback;
    if (v->type != GgufType::Bool)
        fail("metadata '" + key + "' must be a bool");
    return v->u != 0;
}

const GgufValue* GgufKeys::array(const std::string& key, GgufType element) const
{
    const GgufValue* v = find(key);
    if (v && (v->type != GgufType::Array || v->elem_type != element))
        fail("metadata '" + key + "' is not an array of " +
             (element == GgufType::String  ? "strings"
              : element == GgufType::Int32 ? "int32"
                                           : "the expected type"));
    return v;
}

} // namespace embedlab::io
