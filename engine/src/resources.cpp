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

} // namespace embedlab
