// Writing GGUF v3 files that llama.cpp loads: metadata key/values in insertion
// order, tensor infos, 32-byte aligned data. Torch-free; tensors are streamed
// from float32 memory and converted one at a time (F32, F16, Q8_0), in chunks:
// the writer holds no copy of a whole tensor and no buffer of the whole file.
// A tensor may be given as `load`, called when it is written and released before
// the next one is loaded, so an exporter need not convert every tensor up front.
//
//   io::GgufMetadata meta;
//   meta.set_string("general.architecture", "llama");
//   meta.set_uint32("llama.block_count", 2);
//   std::vector<io::GgufTensorSource> tensors{{"token_embd.weight", {V, d}, table,
//   io::GgufTensorType::Q8_0}}; io::write_gguf("model.gguf", meta, tensors, /*overwrite=*/false, progress);
//
// The file is written beside the target under a temporary name and renamed
// when complete: a failure or a cancel leaves nothing behind.
// Thread safety: plain values; one write per output file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
#include "io/ggml_quantize.hpp" // float_to_half, for the writers of F16 tensors

namespace embedlab::io {

// A tensor's stored type: ggml's type id. The named ones are the export's --type; any
// other that ggml_type_can_quantize takes (a token table's --embedding-type) is written
// too, as static_cast<GgufTensorType>(id).
enum class GgufTensorType : uint32_t { F32 = 0, F16 = 1, Q8_0 = 8 };

class GgufMetadata {
public:
    void set_string(const std::string& key, const std::string& value);
    void set_uint32(const std::string& key, uint32_t value);
    void set_float32(const std::string& key, float value);
    void set_bool(const std::string& key, bool value);
    void set_string_array(const std::string& key, const std::vector<std::string>& values);
    void set_float32_array(const std::string& key, const std::vector<float>& values);
    void set_int32_array(const std::string& key, const std::vector<int32_t>& values);

    size_t size() const { return entries_.size(); }
    // The encoded key/value pairs, in insertion order.
    const std::vector<std::string>& encoded() const { return entries_; }

private:
    void add(const std::string& key, uint32_t type, const std::string& payload);
    std::vector<std::string> keys_;
    std::vector<std::string> entries_;
};

// A tensor's float32 values while it is written: `owner` keeps them alive and is
// released as soon as the tensor's bytes are out.
struct GgufTensorData {
    const float* data = nullptr;
    std::shared_ptr<const void> owner;
};

struct GgufTensorSource {
    std::string name;
    std::vector<int64_t> shape; // row-major; written reversed (ggml's ne[0] is the row)
    const float* data = nullptr;
    GgufTensorType type = GgufTensorType::F32;
    // When set (and data is null): the values, produced when this tensor is written
    // (as many as shape says). Their NaN/range checks run then too; a failure still
    // leaves nothing behind.
    std::function<GgufTensorData()> load = {};
    // Or (data and load unset), a large tensor made in blocks of rows (a compressed
    // table rebuilt): rows [begin, begin + count) of shape[0], block_rows at a time,
    // each released before the next is made.
    std::function<GgufTensorData(int64_t begin, int64_t count)> load_rows = {};
    int64_t block_rows = 0;
};

// The metadata key (value "EmbedLab") that marks a GGUF file as EmbedLab's own
// export: with overwrite, write_gguf replaces only such a file.
inline constexpr const char* kGgufWrittenByKey = "general.embedlab.written_by";

// "" when `path` is a GGUF file EmbedLab wrote (kGgufWrittenByKey), else why not.
std::string gguf_written_by_embedlab(const std::filesystem::path& path);

// Bytes of `n` elements stored as `type` (n a whole number of its blocks).
uint64_t gguf_tensor_bytes(GgufTensorType type, int64_t n);

// Writes the file; returns its size. InputError for duplicate tensor names, NaN
// or infinite values, values beyond F16's range stored as F16, Q8_0 rows not a
// multiple of 32, an existing `path` without `overwrite` (or one that is not a
// GGUF file), or an unwritable directory; Cancelled when progress says so.
uint64_t write_gguf(const std::filesystem::path& path, const GgufMetadata& metadata,
                    const std::vector<GgufTensorSource>& tensors, bool overwrite,
                    const ProgressFn& progress = {});

} // namespace embedlab::io
