// A fresh directory under the system temp directory, removed with everything in
// it when the object goes (bench scale's models, bench eval's GGUF exports).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "embedlab/error.hpp"

namespace embedlab::cli {

class WorkDir {
public:
    explicit WorkDir(const std::string& prefix)
    {
        std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
        if (!::mkdtemp(pattern.data()))
            throw InputError(pattern + ": cannot create a temporary directory");
        path_ = pattern;
    }
    ~WorkDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    WorkDir(const WorkDir&) = delete;
    WorkDir& operator=(const WorkDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

} // namespace embedlab::cli
