// The engine's layers as docs/architecture.md draws them (issue 59 item 5): formats
// (io/) below models and methods, exporters (export/) above the methods, jobs above
// all. Read from the sources' #include lines, so a file that crosses a layer fails here.
#include <gtest/gtest.h>

#include <algorithm>
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

namespace {

// The sources under engine/, cli/, python/, app/ and views/ that call parallel_for
// (comments aside), relative to the source tree.
std::vector<std::string> parallel_for_callers()
{
    static const std::regex call(R"re(\bparallel_for\s*\()re");
    const fs::path root = EMBEDLAB_SOURCE_DIR;
    std::vector<std::string> out;
    for (const char* dir : {"engine", "cli", "python", "app", "views"}) {
        if (!fs::exists(root / dir))
            continue;
        for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
            const auto ext = e.path().extension();
            if (ext != ".cpp" && ext != ".hpp" && ext != ".h")
                continue;
            std::ifstream in(e.path());
            for (std::string line; std::getline(in, line);)
                if (std::regex_search(line.substr(0, line.find("//")), call)) {
                    out.push_back(fs::relative(e.path(), root).generic_string());
                    break;
                }
        }
    }
    return out;
}

} // namespace

// at::parallel_for runs serially in a file compiled without OpenMP; the header that
// refuses to compile there (embedlab/parallel_for.hpp) must be in every caller.
TEST(EngineLayers, ParallelForCallersIncludeTheOpenMpGuard)
{
    const auto callers = parallel_for_callers();
    // The check sees the callers (and not a comment's mention, half_products.hpp's).
    EXPECT_NE(std::find(callers.begin(), callers.end(), "engine/src/methods/tensor_train.cpp"),
              callers.end());
    EXPECT_NE(std::find(callers.begin(), callers.end(), "cli/machine_limits.cpp"), callers.end());
    EXPECT_EQ(std::find(callers.begin(), callers.end(), "engine/src/model/half_products.hpp"), callers.end());
    std::string found;
    for (const auto& file : callers) {
        const auto includes = includes_of(fs::path(EMBEDLAB_SOURCE_DIR) / file);
        if (std::find(includes.begin(), includes.end(), "embedlab/parallel_for.hpp") == includes.end())
            found += "  " + file + "\n";
    }
    EXPECT_EQ(found, "") << "these files call at::parallel_for without including embedlab/parallel_for.hpp "
                            "(and so perhaps without OpenMP: a serial loop):\n"
                         << found;
}
