// Locating ../shared test data. Cases that need it skip with a message when it
// is absent, so the unit part of every suite runs on a bare clone.
#pragma once

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"
#include "test_paths.hpp"

namespace embedlab::test {

// Same process set-up as the CLI and GUI (threads, allocator), once per test program.
inline const bool runtime_initialized = (embedlab::init_runtime(), true);

inline std::filesystem::path shared_dir()
{
    if (const char* env = std::getenv("EMBEDLAB_SHARED_DIR"))
        return env;
    return std::filesystem::path(EMBEDLAB_SOURCE_DIR) / ".." / "shared";
}

// A string parameter as a gtest name: "smollm2-tied" -> "smollm2_tied".
struct ParamName {
    template <class Info> std::string operator()(const Info& info) const
    {
        std::string s = info.param;
        for (char& c : s)
            if (!std::isalnum(static_cast<unsigned char>(c)))
                c = '_';
        return s;
    }
};

inline bool have_shared()
{
    return std::filesystem::exists(shared_dir() / "METHODS.md");
}

inline std::string read_text(const std::filesystem::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes)
{
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The message of the InputError `f` throws; `none` when it returns.
template <class F> std::string input_error_of(F&& f, const std::string& none)
{
    try {
        f();
    } catch (const InputError& e) {
        return e.what();
    }
    return none;
}

// Expects `f` to throw an InputError whose message contains `part`.
template <class F> void expect_input_error(F&& f, const std::string& part)
{
    const std::string message = input_error_of(std::forward<F>(f), "(no InputError thrown)");
    EXPECT_NE(message.find(part), std::string::npos) << message;
}

// The bytes of `v` as a file stores it (test hosts are little-endian).
template <typename T> std::string le_bytes(T v)
{
    std::string s(sizeof(T), '\0');
    std::memcpy(s.data(), &v, sizeof(T));
    return s;
}

// A fresh, empty directory under the system temp dir, removed at scope exit.
class TempDir {
public:
    TempDir()
    {
        auto base = std::filesystem::temp_directory_path();
        for (int i = 0;; ++i) {
            path_ = base / ("embedlab-test-" + std::to_string(::getpid()) + "-" + std::to_string(i));
            if (std::filesystem::create_directory(path_))
                break;
        }
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

private:
    std::filesystem::path path_;
};

// A field of /proc/self/status in kB (VmRSS, VmHWM), or -1: the peak-memory tests' reading.
inline long status_kb(const std::string& field)
{
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(field + ":", 0) == 0)
            return std::atol(line.c_str() + field.size() + 1);
    return -1;
}

// Resets the peak resident set (VmHWM) to the current one (writing 5 to clear_refs, Linux
// >= 4.0); false when it cannot, and a test measuring a peak then skips.
inline bool reset_peak_rss()
{
    std::ofstream reset("/proc/self/clear_refs");
    return static_cast<bool>(reset << "5" << std::flush);
}

} // namespace embedlab::test

#include <unistd.h>

#define EMBEDLAB_REQUIRE_SHARED()                                                                            \
    do {                                                                                                     \
        if (!::embedlab::test::have_shared())                                                                \
            GTEST_SKIP() << "needs ../shared test data (not found at " << ::embedlab::test::shared_dir()     \
                         << ")";                                                                             \
    } while (0)
