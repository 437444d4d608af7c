#include "io/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "embedlab/error.hpp"
#include "embedlab/model_files.hpp"
#include "io/dtype_convert.hpp"
#include "io/mapped_file.hpp"

namespace embedlab {

namespace io {

SafetensorsFile load_safetensors_file(const std::filesystem::path& file, WeightValues values)
{
    const auto mapped = MappedFile::open(file);
    const SafetensorsHeader header =
        parse_safetensors_header(mapped->data(), mapped->size(), mapped->label());

    SafetensorsFile out;
    for (const SafetensorsEntry& e : header.entries) {
        const std::optional<StoredType> type = stored_type_from_name(e.dtype);
        if (e.dtype == "I64" || e.dtype == "I32" || e.dtype == "I16") {
            // Index tensors (token ids of EmbedLab's compressed layouts, stored at the
            // width V needs) load as int64.
            auto t = torch::empty(e.shape, torch::kLong);
            const uint8_t* src = mapped->data() + header.data_start + e.begin;
            int64_t* dst = t.data_ptr<int64_t>();
            for (int64_t i = 0, n = t.numel(); i < n; ++i) {
                if (e.dtype == "I64") {
                    std::memcpy(dst + i, src + 8 * i, 8);
                } else if (e.dtype == "I32") {
                    int32_t v;
                    std::memcpy(&v, src + 4 * i, 4);
                    dst[i] = v;
                } else {
                    int16_t v;
                    std::memcpy(&v, src + 2 * i, 2);
                    dst[i] = v;
                }
            }
            out.weights[e.name] = std::move(t);
            continue;
        }
        if (e.dtype == "U8" &&
            (e.name.ends_with("quant.blocks") || header.metadata.count("embedlab_method"))) {
            // quant's ggml blocks and factors stored at a ggml type (issue 38), bytes as
            // written (the manifest says what they are); any other U8 tensor (a
            // bitsandbytes model's) is not EmbedLab's and stays skipped below.
            auto t = torch::empty(e.shape, torch::kUInt8);
            std::memcpy(t.data_ptr<uint8_t>(), mapped->data() + header.data_start + e.begin, e.end - e.begin);
            out.weights[e.name] = std::move(t);
            continue;
        }
        if (!type) {
            out.skipped.push_back(e.name + " (" + e.dtype + ")");
            continue;
        }
        const uint64_t offset = header.data_start + e.begin;
        out.stored_types.insert(e.dtype);
        if (values == WeightValues::Load) {
            const bool keep_half =
                KeepHalfMatrices::active() && e.shape.size() == 2 && *type != StoredType::F32;
            out.weights[e.name] = keep_half ? half_tensor_from_mapped(mapped, offset, *type, e.shape)
                                            : tensor_from_mapped(mapped, offset, *type, e.shape);
            continue;
        }
        out.weights[e.name] =
            torch::empty(e.shape, torch::TensorOptions().dtype(torch::kFloat32).device(torch::kMeta));
        // Chunk by chunk, each released once read: nothing wraps these bytes, and a
        // 500 MB embedding need not be resident at once.
        const uint64_t bytes = e.end - e.begin, size = stored_type_size(*type), chunk = 64ull << 20;
        NonFinite found;
        for (uint64_t at = 0; at < bytes; at += chunk) {
            const uint64_t length = std::min(chunk, bytes - at);
            const NonFinite f =
                scan_non_finite(mapped->data() + offset + at, *type, static_cast<int64_t>(length / size));
            found.nan |= f.nan;
            found.inf |= f.inf;
            mapped->release(offset + at, length);
        }
        if (const auto warning = non_finite_warning(e.name, found); !warning.empty())
            out.non_finite.emplace(e.name, warning);
    }
    return out;
}

} // namespace io

WeightMap load_safetensors(const std::filesystem::path& file)
{
    return io::load_safetensors_file(file).weights;
}

} // namespace embedlab
