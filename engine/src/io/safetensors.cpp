#include "io/safetensors.hpp"

#include <cstring>
#include <optional>

#include "embedlab/error.hpp"
#include "embedlab/model_files.hpp"
#include "io/dtype_convert.hpp"
#include "io/mapped_file.hpp"

namespace embedlab {

namespace io {

SafetensorsFile load_safetensors_file(const std::filesystem::path& file)
{
    const auto mapped = MappedFile::open(file);
    const SafetensorsHeader header =
        parse_safetensors_header(mapped->data(), mapped->size(), mapped->label());

    SafetensorsFile out;
    for (const SafetensorsEntry& e : header.entries) {
        std::optional<StoredType> type;
        if (e.dtype == "F32")
            type = StoredType::F32;
        else if (e.dtype == "F16")
            type = StoredType::F16;
        else if (e.dtype == "BF16")
            type = StoredType::BF16;
        if (e.dtype == "I64" || e.dtype == "I32") {
            // Index tensors (token ids of EmbedLab's compressed layouts) load as int64.
            auto t = torch::empty(e.shape, torch::kLong);
            const uint8_t* src = mapped->data() + header.data_start + e.begin;
            int64_t* dst = t.data_ptr<int64_t>();
            for (int64_t i = 0, n = t.numel(); i < n; ++i) {
                if (e.dtype == "I64") {
                    std::memcpy(dst + i, src + 8 * i, 8);
                } else {
                    int32_t v;
                    std::memcpy(&v, src + 4 * i, 4);
                    dst[i] = v;
                }
            }
            out.weights[e.name] = std::move(t);
            continue;
        }
        if (!type) {
            out.skipped.push_back(e.name + " (" + e.dtype + ")");
            continue;
        }
        out.weights[e.name] = tensor_from_mapped(mapped, header.data_start + e.begin, *type, e.shape);
        out.stored_types.insert(e.dtype);
    }
    return out;
}

} // namespace io

WeightMap load_safetensors(const std::filesystem::path& file)
{
    return io::load_safetensors_file(file).weights;
}

} // namespace embedlab
