// Running the prebuilt llama.cpp of ../shared/tools/llama.cpp from tests.
// Its soname links (libllama.so.0 -> libllama.so.0.5.0, ...) may arrive as
// small text files holding the target's name when shared/ was copied without
// symlinks; the loader then fails ("file too short"). The links are recreated
// in a temporary directory put on LD_LIBRARY_PATH, leaving shared/ untouched.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include "test_support.hpp"

namespace embedlab::test {

inline std::filesystem::path llama_cpp_dir()
{
    return shared_dir() / "tools" / "llama.cpp";
}

inline bool have_llama_cpp()
{
    return std::filesystem::exists(llama_cpp_dir() / "llamacpp-ppl");
}

// The threads a llama.cpp tool runs on (llamacpp-ppl's THREADS, llama-perplexity's -t):
// EMBEDLAB_THREADS when set (ctest sets 1: one test per core), else 2, the README's
// protocol. The numbers do not depend on it (llamacpp-ppl gave the same perplexity to
// every printed digit on 1 and 2); the time does: two ggml threads beside another test
// took 1.5 to 2 times the CPU seconds of one, and twice the wall time.
inline std::string llama_cpp_threads()
{
    const char* threads = std::getenv("EMBEDLAB_THREADS");
    const int n = threads ? std::atoi(threads) : 0;
    return std::to_string(n > 0 ? n : 2);
}

// The shell command that runs `tool` (quoted path, with LD_LIBRARY_PATH set).
inline std::string llama_cpp_command(const std::string& tool)
{
    namespace fs = std::filesystem;
    static TempDir links;
    static const bool made = [] {
        for (const auto& e : fs::directory_iterator(llama_cpp_dir())) {
            const std::string name = e.path().filename().string();
            if (name.rfind("lib", 0) != 0 || !e.is_regular_file() || e.file_size() > 255)
                continue;
            std::ifstream in(e.path());
            std::string target;
            std::getline(in, target);
            if (!target.empty() && fs::exists(llama_cpp_dir() / target))
                fs::create_symlink(llama_cpp_dir() / target, links.path() / name);
        }
        return true;
    }();
    (void)made;
    return "LD_LIBRARY_PATH='" + links.path().string() + "' '" + (llama_cpp_dir() / tool).string() + "'";
}

} // namespace embedlab::test
