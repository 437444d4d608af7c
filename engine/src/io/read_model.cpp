// read_model_files: picks the reader from what the path is, then scans for
// NaN/Inf weights.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "embedlab/error.hpp"
#include "embedlab/model_files.hpp"
#include "io/dtype_convert.hpp"
#include "io/mapped_file.hpp"
#include "io/readers.hpp"

namespace embedlab {

namespace fs = std::filesystem;

namespace {

std::string lowercase_extension(const fs::path& p)
{
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return ext;
}

// One warning per tensor holding non-finite values: they usually mean a broken
// conversion, but the model may still be inspected. Tensors without values
// (WeightValues::ShapesOnly) were scanned by their reader. A float32 file's
// tensors (and f16/bf16 ones kept for generation) wrap its mapping: their pages are dropped once scanned
// (nothing has edited them yet), so only what a caller reads is resident.
void warn_non_finite(ModelFiles& mf)
{
    constexpr int64_t chunk = 16 << 20; // values
    for (const auto& [name, tensor] : mf.weights) {
        const auto dtype = tensor.scalar_type();
        const bool half = dtype == torch::kHalf || dtype == torch::kBFloat16; // kept as stored (generation)
        if ((dtype != torch::kFloat32 && !half) || tensor.is_meta())
            continue; // index tensors, shapes without values
        const torch::Tensor c = tensor.contiguous();
        const auto* data = static_cast<const uint8_t*>(c.data_ptr());
        const auto stored = dtype == torch::kFloat32 ? io::StoredType::F32
                            : dtype == torch::kHalf  ? io::StoredType::F16
                                                     : io::StoredType::BF16;
        const int64_t size = static_cast<int64_t>(io::stored_type_size(stored));
        io::NonFinite found;
        for (int64_t at = 0, n = c.numel(); at < n; at += chunk) {
            const int64_t count = std::min(chunk, n - at);
            const auto f = io::scan_non_finite(data + at * size, stored, count);
            found.nan |= f.nan;
            found.inf |= f.inf;
            io::MappedFile::release_if_mapped(data + at * size, static_cast<uint64_t>(count * size));
        }
        if (const auto warning = io::non_finite_warning(name, found); !warning.empty())
            mf.warnings.push_back(warning);
    }
}

ModelFiles read_by_kind(const fs::path& model, WeightValues values)
{
    if (fs::is_directory(model))
        return io::read_hf_directory(model, values);

    const std::string ext = lowercase_extension(model);
    // Naming a file inside a Hugging Face directory means the directory.
    if (ext == ".safetensors" || model.filename() == "config.json" ||
        model.filename() == "model.safetensors.index.json")
        return io::read_hf_directory(model.has_parent_path() ? model.parent_path() : fs::path("."), values);

    if (ext == ".gguf" || ext == ".bin") {
        const auto file = io::MappedFile::open(model);
        // Trust the magic over the extension: GGUF files are sometimes named .bin.
        const bool gguf_magic = file->size() >= 4 && std::memcmp(file->data(), "GGUF", 4) == 0;
        return ext == ".gguf" || gguf_magic ? io::read_gguf(file) : io::read_llama2c(file);
    }
    throw InputError(model.string() +
                     ": unsupported model file; expected a Hugging Face model directory "
                     "(config.json + model.safetensors), a .gguf file or a llama2.c .bin checkpoint");
}

} // namespace

std::string token_embedding_stored_type(const ModelFiles& files)
{
    if (files.format == ModelFormat::GGUF) {
        const auto it = files.tensor_types_by_kind.find("token_embd.weight");
        return it == files.tensor_types_by_kind.end() || it->second.find(' ') != std::string::npos
                   ? ""
                   : it->second;
    }
    return files.stored_dtype == "mixed" ? "" : files.stored_dtype;
}

ModelFiles read_model_files(const fs::path& model, WeightValues values)
{
    std::error_code ec;
    if (!fs::exists(model, ec))
        throw InputError(model.string() + ": no such file or directory");
    ModelFiles mf = read_by_kind(model, values);
    mf.path = model;
    warn_non_finite(mf);
    return mf;
}

} // namespace embedlab
