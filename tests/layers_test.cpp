// The engine's layers as docs/architecture.md draws them (issue 59 item 5): formats
// (io/) below models and methods, exporters (export/) above the methods, jobs above
// all. Read from the sources' #include lines, so a file that crosses a layer fails here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "test_paths.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path& engine_dir()
{
    static const fs::path dir = fs::path(EMBEDLAB_SOURCE_DIR) / "engine";
    return dir;
}

// The project headers `file` includes ("io/gguf_output.hpp", "embedlab/low_rank.hpp").
std::vector<std::string> includes_of(const fs::path& file)
{
    static const std::regex include(R"re(^\s*#\s*include\s+"([^"]+)")re");
    std::vector<std::string> out;
    std::ifstream in(file);
    std::smatch m;
    for (std::string line; std::getline(in, line);)
        if (std::regex_search(line, m, include))
            out.push_back(m[1]);
    return out;
}

// A method's public header: embedlab/<name>.hpp whose implementation is methods/<name>.cpp.
bool is_method_header(const std::string& include)
{
    const std::string prefix = "embedlab/";
    if (include.rfind(prefix, 0) != 0)
        return false;
    const auto stem = fs::path(include.substr(prefix.size())).stem().string();
    return fs::exists(engine_dir() / "src/methods" / (stem + ".cpp"));
}

// Every source and header under engine/src/<area>.
std::vector<fs::path> files_of(const std::string& area)
{
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(engine_dir() / "src" / area))
        if (e.path().extension() == ".cpp" || e.path().extension() == ".hpp")
            out.push_back(e.path());
    return out;
}

std::string crossing(const std::string& area, const std::function<bool(const std::string&)>& forbidden)
{
    std::string found;
    for (const auto& file : files_of(area))
        for (const auto& include : includes_of(file))
            if (forbidden(include))
                found += "  " + fs::relative(file, engine_dir()).string() + " includes " + include + "\n";
    return found;
}

} // namespace

TEST(EngineLayers, FormatsIncludeNoMethodNorExporter)
{
    ASSERT_TRUE(fs::exists(engine_dir() / "src/io")) << engine_dir();
    // The check itself sees a method header and a format's.
    EXPECT_TRUE(is_method_header("embedlab/low_rank.hpp"));
    EXPECT_FALSE(is_method_header("embedlab/file_output.hpp"));
    const auto found = crossing("io", [](const std::string& i) {
        return is_method_header(i) || i.rfind("methods/", 0) == 0 || i.rfind("export/", 0) == 0 ||
               i.rfind("job/", 0) == 0;
    });
    EXPECT_EQ(found, "") << "io/ reads and writes formats; these files reach above it:\n" << found;
}

TEST(EngineLayers, MethodsIncludeNoExporterNorJob)
{
    const auto found = crossing("methods", [](const std::string& i) {
        return i.rfind("export/", 0) == 0 || i.rfind("job/", 0) == 0 || i == "embedlab/onnx_export.hpp" ||
               i == "embedlab/model_export.hpp" || i == "embedlab/experiment.hpp" || i == "embedlab/job.hpp";
    });
    EXPECT_EQ(found, "") << "the exporters and jobs sit above the methods:\n" << found;
}
