#include "io/gguf_output.hpp"

#include "embedlab/output_checks.hpp"
#include "io/gguf_parser.hpp"
#include "io/gguf_quants.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <unistd.h>

namespace embedlab::io {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kAlignment = 32; // GGUF's default; general.alignment is not written
constexpr uint32_t kTypeUInt32 = 4, kTypeInt32 = 5, kTypeFloat32 = 6, kTypeBool = 7, kTypeString = 8,
                   kTypeArray = 9;

template <typename T> void append(std::string& out, T value)
{
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T)); // little-endian hosts only (x86-64, aarch64)
    out.append(bytes, sizeof(T));
}

void append_string(std::string& out, const std::string& s)
{
    append<uint64_t>(out, s.size());
    out += s;
}

// An array value: the element type, the count, then every element as `write` appends it.
template <typename T, typename Write>
std::string array_payload(uint32_t type, const std::vector<T>& values, Write write)
{
    std::string p;
    append<uint32_t>(p, type);
    append<uint64_t>(p, values.size());
    for (const T& v : values)
        write(p, v);
    return p;
}

uint64_t padded(uint64_t n)
{
    return (n + kAlignment - 1) / kAlignment * kAlignment;
}

// Appends elements [0, n) of `data` in the stored type to `out` (n a multiple of 32 for
// Q8_0): ggml's reference conversions (ggml_quantize.hpp), as llama-quantize writes them.
void encode(GgufTensorType type, const float* data, int64_t n, std::string& out)
{
    const size_t at = out.size();
    out.resize(at + gguf_tensor_bytes(type, n));
    quantize_row(static_cast<uint32_t>(type), data, n, reinterpret_cast<uint8_t*>(out.data() + at));
}

// Name and shape: what the header needs, checked before any value is read.
void check_tensor_shape(const GgufTensorSource& t)
{
    if (t.name.empty())
        throw InputError("GGUF export: a tensor has no name");
    if (!t.data && !t.load && !t.load_rows)
        throw InputError("GGUF export: tensor '" + t.name + "' has no values");
    const auto type = static_cast<uint32_t>(t.type);
    const auto* traits = ggml_type_traits(type);
    if (!traits || !ggml_type_can_quantize(type))
        throw InputError("GGUF export: tensor '" + t.name + "' has a type (ggml id " + std::to_string(type) +
                         ") EmbedLab does not write");
    if (t.shape.empty() ? traits->block_elems != 1 : t.shape.back() % traits->block_elems != 0)
        throw InputError("GGUF export: tensor '" + t.name + "' has rows of " +
                         std::to_string(t.shape.empty() ? 0 : t.shape.back()) + " values; " + traits->name +
                         " stores blocks of " + std::to_string(traits->block_elems));
}

// data: elements [offset, offset + n) of the tensor.
void check_values(const GgufTensorSource& t, const float* data, int64_t n, int64_t offset = 0)
{
    for (int64_t i = 0; i < n; ++i) {
        const float v = data[i];
        if (!std::isfinite(v))
            throw InputError("GGUF export: tensor '" + t.name + "' holds " +
                             (std::isnan(v) ? "NaN" : "an infinity") + " at element " +
                             std::to_string(offset + i));
        if (t.type == GgufTensorType::F16 && std::fabs(v) > 65504.0f)
            throw InputError("GGUF export: tensor '" + t.name + "' holds " + std::to_string(v) +
                             ", beyond F16's range; export as f32");
    }
}

} // namespace

void GgufMetadata::add(const std::string& key, uint32_t type, const std::string& payload)
{
    for (const auto& k : keys_)
        if (k == key)
            throw InputError("GGUF export: metadata key '" + key + "' set twice");
    keys_.push_back(key);
    std::string e;
    append_string(e, key);
    append<uint32_t>(e, type);
    e += payload;
    entries_.push_back(std::move(e));
}

void GgufMetadata::set_string(const std::string& key, const std::string& value)
{
    std::string p;
    append_string(p, value);
    add(key, kTypeString, p);
}

void GgufMetadata::set_uint32(const std::string& key, uint32_t value)
{
    std::string p;
    append<uint32_t>(p, value);
    add(key, kTypeUInt32, p);
}

void GgufMetadata::set_float32(const std::string& key, float value)
{
    std::string p;
    append<float>(p, value);
    add(key, kTypeFloat32, p);
}

void GgufMetadata::set_bool(const std::string& key, bool value)
{
    std::string p;
    append<uint8_t>(p, value ? 1 : 0);
    add(key, kTypeBool, p);
}

void GgufMetadata::set_string_array(const std::string& key, const std::vector<std::string>& values)
{
    add(key, kTypeArray, array_payload(kTypeString, values, append_string));
}

void GgufMetadata::set_float32_array(const std::string& key, const std::vector<float>& values)
{
    add(key, kTypeArray, array_payload(kTypeFloat32, values, append<float>));
}

void GgufMetadata::set_int32_array(const std::string& key, const std::vector<int32_t>& values)
{
    add(key, kTypeArray, array_payload(kTypeInt32, values, append<int32_t>));
}

uint64_t gguf_tensor_bytes(GgufTensorType type, int64_t n)
{
    return ggml_row_bytes(static_cast<uint32_t>(type), n);
}

std::string gguf_written_by_embedlab(const fs::path& path)
{
    try {
        const auto file = MappedFile::open(path);
        const GgufFile gguf = parse_gguf(*file);
        const GgufValue* mark = gguf.find(kGgufWrittenByKey);
        if (mark && mark->type == GgufType::String && mark->s == "EmbedLab")
            return "";
        return std::string("is a GGUF file EmbedLab did not write (no ") + kGgufWrittenByKey + " = EmbedLab)";
    } catch (const std::exception&) {
        return "is not a GGUF file EmbedLab wrote";
    }
}

uint64_t write_gguf(const fs::path& path, const GgufMetadata& metadata,
                    const std::vector<GgufTensorSource>& tensors, bool overwrite, const ProgressFn& progress)
{
    const std::string label = path.string();
    check_output_file(path, overwrite, {}, gguf_written_by_embedlab);
    std::set<std::string> names;
    std::vector<int64_t> counts;
    for (const auto& t : tensors) {
        if (!names.insert(t.name).second)
            throw InputError("GGUF export: tensor '" + t.name + "' appears twice");
        int64_t n = 1;
        for (int64_t s : t.shape)
            n *= s;
        counts.push_back(n);
        check_tensor_shape(t);
        if (t.data) // given values are checked before the file is created; loaded ones as they come
            check_values(t, t.data, n);
    }

    // Header, metadata, tensor infos with offsets relative to the aligned data section.
    std::string head;
    head.append("GGUF", 4);
    append<uint32_t>(head, 3);
    append<uint64_t>(head, tensors.size());
    append<uint64_t>(head, metadata.size());
    for (const auto& e : metadata.encoded())
        head += e;
    uint64_t offset = 0;
    for (size_t k = 0; k < tensors.size(); ++k) {
        const auto& t = tensors[k];
        append_string(head, t.name);
        append<uint32_t>(head, static_cast<uint32_t>(t.shape.size()));
        for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it)
            append<uint64_t>(head, static_cast<uint64_t>(*it));
        append<uint32_t>(head, static_cast<uint32_t>(t.type));
        append<uint64_t>(head, offset);
        offset += padded(gguf_tensor_bytes(t.type, counts[k]));
    }
    head.resize(padded(head.size()), '\0');

    const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
    struct Cleanup {
        fs::path file;
        bool keep = false;
        ~Cleanup()
        {
            std::error_code ec;
            if (!keep)
                fs::remove(file, ec);
        }
    } cleanup{tmp};
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out)
            throw InputError(label + ": cannot create the file (is the directory writable?)");
        out.write(head.data(), static_cast<std::streamsize>(head.size()));
        report_progress(progress, 0, static_cast<int64_t>(tensors.size()));
        // Tensor by tensor, each in chunks of at most kChunk values (a multiple of every block
        // size, 256 at most): a loaded tensor is released before the next one is loaded.
        constexpr int64_t kChunk = int64_t{1} << 16;
        std::string bytes;
        for (size_t k = 0; k < tensors.size(); ++k) {
            const auto& t = tensors[k];
            const int64_t n = counts[k];
            uint64_t written = 0;
            // Values [offset, offset + count): checked unless given, encoded, written.
            auto write_piece = [&](const GgufTensorData& piece, int64_t offset, int64_t count) {
                if (!piece.data && count > 0)
                    throw InputError("GGUF export: tensor '" + t.name + "' has no values");
                if (!t.data)
                    check_values(t, piece.data, count, offset);
                for (int64_t i = 0; i < count; i += kChunk) {
                    bytes.clear();
                    encode(t.type, piece.data + i, std::min(kChunk, count - i), bytes);
                    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
                    written += bytes.size();
                }
            };
            if (t.data || t.load) {
                write_piece(t.data ? GgufTensorData{t.data, nullptr} : t.load(), 0, n);
            } else { // in blocks of rows
                const int64_t rows = t.shape.empty() ? 1 : t.shape.front();
                const int64_t row_values = rows > 0 ? n / rows : 0;
                const int64_t step = std::max<int64_t>(1, t.block_rows);
                for (int64_t r = 0; r < rows; r += step) {
                    const int64_t count = std::min(step, rows - r);
                    write_piece(t.load_rows(r, count), r * row_values, count * row_values);
                }
            }
            static constexpr char zeros[kAlignment] = {};
            out.write(zeros, static_cast<std::streamsize>(padded(written) - written));
            if (!out)
                throw InputError(label + ": write failed (disk full?)");
            report_progress(progress, static_cast<int64_t>(k + 1), static_cast<int64_t>(tensors.size()));
        }
        out.flush();
        if (!out)
            throw InputError(label + ": write failed (disk full?)");
    }
    if (FILE* f = std::fopen(tmp.c_str(), "rb")) { // flush to disk before the rename makes it visible
        ::fsync(fileno(f));
        std::fclose(f);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec)
        throw InputError(label + ": cannot rename the finished file into place (" + ec.message() + ")");
    cleanup.keep = true;
    return fs::file_size(path);
}

} // namespace embedlab::io
