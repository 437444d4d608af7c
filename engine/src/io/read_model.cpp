// read_model_files: picks the reader from what the path is, then scans for
// NaN/Inf weights.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "embedlab/error.hpp"
#include "embedlab/model_files.hpp"
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

struct NonFinite {
    bool nan = false, inf = false;
};

// One pass over the float32 bits, without the temporary bool tensors of isnan().
NonFinite scan_non_finite(const torch::Tensor& t)
{
    const torch::Tensor c = t.contiguous();
    const float* data = c.data_ptr<float>();
    NonFinite found;
    for (int64_t i = 0, n = c.numel(); i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, data + i, 4);
        if ((bits & 0x7f800000u) == 0x7f800000u) { // exponent all ones: Inf or NaN
            (bits & 0x007fffffu ? found.nan : found.inf) = true;
            if (found.nan && found.inf)
                break;
        }
    }
    return found;
}

// One warning per tensor holding non-finite values: they usually mean a broken
// conversion, but the model may still be inspected.
void warn_non_finite(ModelFiles& mf)
{
    for (const auto& [name, tensor] : mf.weights) {
        if (tensor.scalar_type() != torch::kFloat32)
            continue; // index tensors
        const NonFinite f = scan_non_finite(tensor);
        if (f.nan || f.inf)
            mf.warnings.push_back(std::string(f.nan && f.inf ? "NaN and Inf"
                                              : f.nan        ? "NaN"
                                                             : "Inf") +
                                  " in tensor " + name);
    }
}

ModelFiles read_by_kind(const fs::path& model)
{
    if (fs::is_directory(model))
        return io::read_hf_directory(model);

    const std::string ext = lowercase_extension(model);
    // Naming a file inside a Hugging Face directory means the directory.
    if (ext == ".safetensors" || model.filename() == "config.json" ||
        model.filename() == "model.safetensors.index.json")
        return io::read_hf_directory(model.has_parent_path() ? model.parent_path() : fs::path("."));

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

ModelFiles read_model_files(const fs::path& model)
{
    std::error_code ec;
    if (!fs::exists(model, ec))
        throw InputError(model.string() + ": no such file or directory");
    ModelFiles mf = read_by_kind(model);
    mf.path = model;
    warn_non_finite(mf);
    return mf;
}

} // namespace embedlab
