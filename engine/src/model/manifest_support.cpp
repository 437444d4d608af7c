#include "model/manifest_support.hpp"

#include <cctype>
#include <ctime>
#include <set>

#include <armadillo>
#include <torch/version.h>

#include "embedlab/error.hpp"
#include "embedlab/file_output.hpp"

namespace embedlab::detail {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

bool is_weight_file(const fs::path& p)
{
    static const std::set<std::string> exts{".safetensors", ".bin",  ".pt", ".pth",
                                            ".gguf",        ".ckpt", ".h5", ".msgpack"};
    const std::string name = p.filename().string();
    return exts.count(p.extension().string()) > 0 || name == "model.safetensors.index.json" ||
           name == "embedlab.json" || name == kWrittenFilesName; // the writer lists its own files
}

} // namespace

void copy_support_files(const fs::path& from, const fs::path& to)
{
    for (const auto& entry : fs::directory_iterator(from)) {
        // sentence-transformers' module folders ("1_Pooling", "2_Normalize") go too.
        const std::string name = entry.path().filename().string();
        if (entry.is_directory() && !entry.is_symlink() && name.size() > 2 &&
            std::isdigit(static_cast<unsigned char>(name[0])) && name.find('_') != std::string::npos) {
            std::error_code ec;
            fs::create_directory(to / name, ec);
            if (ec)
                throw InputError((to / name).string() + ": cannot create (" + ec.message() + ")");
            copy_support_files(entry.path(), to / name);
            continue;
        }
        if (!entry.is_regular_file() || is_weight_file(entry.path()))
            continue;
        std::error_code ec;
        fs::copy_file(entry.path(), to / entry.path().filename(), ec);
        if (ec)
            throw InputError((to / entry.path().filename()).string() + ": cannot copy from " +
                             entry.path().string() + " (" + ec.message() + ")");
        // Copies of read-only sources stay editable, like every file we write.
        fs::permissions(to / entry.path().filename(), fs::perms::owner_write, fs::perm_options::add, ec);
    }
}

std::string utc_now()
{
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

Json manifest_versions()
{
    return {{"embedlab", EMBEDLAB_VERSION},
            {"libtorch", TORCH_VERSION},
            {"armadillo", arma::arma_version::as_string()},
            {"manifest_format", kManifestFormatVersion}};
}

Json source_json(const LoadedModel& source)
{
    Json files = Json::array();
    for (const auto& f : source.files.files)
        files.push_back({{"file", f.filename().string()},
                         {"bytes", static_cast<int64_t>(fs::file_size(f))},
                         {"sha256", sha256_file(f)}});
    return {{"path", fs::absolute(source.files.path).lexically_normal().string()},
            {"format", model_format_name(source.files.format)},
            {"architecture", architecture_name(source.files.config.arch)},
            {"stored_dtype", source.files.stored_dtype},
            {"files", files}};
}

Json file_digests(const fs::path& dir, const std::vector<std::string>& names)
{
    Json out = Json::array();
    for (const auto& name : names)
        out.push_back({{"file", name},
                       {"bytes", static_cast<int64_t>(fs::file_size(dir / name))},
                       {"sha256", sha256_file(dir / name)}});
    return out;
}

void verify_weights_files(const std::string& manifest_text, const fs::path& dir,
                          const std::vector<fs::path>& weights_read)
{
    const std::string where = (dir / "embedlab.json").string();
    const std::string escape = " (re-create the model, or pass --no-verify to load it anyway)";
    const auto records = parse_weights_files(manifest_text, where);
    // Every directory EmbedLab writes lists its weight files: a manifest that lists
    // none (key deleted, or []) is what tampering looks like.
    if (records.empty())
        throw InputError(where +
                         ": lists no weights_files with their sha256, so the weights cannot be "
                         "verified" +
                         escape);
    std::set<std::string> listed;
    for (const auto& record : records) {
        const fs::path file = dir / record.file;
        if (!fs::exists(file))
            throw InputError(where + ": lists '" + record.file + "' but the file is missing");
        if (record.bytes >= 0 && static_cast<int64_t>(fs::file_size(file)) != record.bytes)
            throw InputError(file.string() + ": " + std::to_string(fs::file_size(file)) +
                             " bytes, but embedlab.json records " + std::to_string(record.bytes) +
                             ": the file changed after it was written" + escape);
        const std::string actual = sha256_file(file);
        if (actual != record.sha256)
            throw InputError(file.string() + ": sha256 " + actual + " differs from " + record.sha256 +
                             " recorded in embedlab.json: the file changed after it was written" + escape);
        listed.insert(fs::weakly_canonical(file).string());
    }
    for (const auto& file : weights_read)
        if (!listed.count(fs::weakly_canonical(file).string()))
            throw InputError(file.string() +
                             ": holds weights the model uses, but embedlab.json's "
                             "weights_files does not list it, so it cannot be verified" +
                             escape);
}

void require_original_hf_source(const LoadedModel& source)
{
    const std::string label = source.files.path.string();
    if (source.files.format != ModelFormat::HuggingFace || !fs::is_directory(source.files.path))
        throw InputError(label +
                         ": compressed models are written from Hugging Face directories (config.json + "
                         "safetensors); " +
                         model_format_name(source.files.format) + " sources are not supported yet");
    if (!source.files.embedlab_manifest.empty())
        throw InputError(label +
                         ": is already an EmbedLab compressed model; compress the original model instead");
}

} // namespace embedlab::detail
