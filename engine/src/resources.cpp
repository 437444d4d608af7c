#include "embedlab/resources.hpp"

#include <cstdlib>
#include <system_error>

namespace embedlab {

std::filesystem::path resource_dir()
{
    if (const char* env = std::getenv("EMBEDLAB_RESOURCES"))
        return env;
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const auto installed = exe.parent_path().parent_path() / "share" / "embedlab" / "resources";
        if (std::filesystem::exists(installed / "models", ec))
            return installed;
    }
    return EMBEDLAB_RESOURCE_DIR;
}

std::filesystem::path default_model_path()
{
    return resource_dir() / "models" / "tinygpt2-f16";
}

std::filesystem::path default_sample_text_path()
{
    return resource_dir() / "texts" / "tinystories-heldout.txt";
}

std::vector<std::filesystem::path> shared_data_dirs()
{
    std::vector<std::filesystem::path> dirs;
    if (const char* env = std::getenv("EMBEDLAB_SHARED_DIR"))
        dirs.emplace_back(env);
    dirs.push_back(resource_dir() / ".." / ".." / "shared");
    return dirs;
}

std::filesystem::path find_shared_data(const std::filesystem::path& relative)
{
    std::error_code ec;
    for (const auto& dir : shared_data_dirs())
        if (std::filesystem::exists(dir / relative, ec))
            return dir / relative;
    return {};
}

} // namespace embedlab
