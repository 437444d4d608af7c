// Shared by the fuzz targets. Inputs go through the same file readers a user's
// download reaches, so each input is first written to a scratch file (on tmpfs
// when there is one). InputError is the expected answer to bad input; anything
// else escaping a target (another exception, a crash, a sanitizer report, an
// allocation beyond libFuzzer's -malloc_limit_mb) is a finding.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "embedlab/error.hpp"
#include "embedlab/tokenizer.hpp"

namespace embedlab::fuzz {

inline const std::filesystem::path& scratch_dir()
{
    static const std::filesystem::path dir = [] {
        const std::filesystem::path base =
            std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
        auto d = base / ("embedlab-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(scratch_dir(), ec);
        });
        return d;
    }();
    return dir;
}

inline std::filesystem::path write_scratch(const std::string& name, std::string_view bytes)
{
    const auto path = scratch_dir() / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out)
        std::abort(); // the harness itself failed: not a finding about our code
    return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size)
{
    return {reinterpret_cast<const char*>(data), size};
}

// Runs `body`; a clear InputError is the correct outcome for bad input.
template <class Body> void expect_input_errors(Body&& body)
{
    try {
        body();
    } catch (const InputError& e) {
        if (std::string_view(e.what()).empty())
            std::abort(); // an error a user cannot act on
    }
}

// A fixed text that exercises ASCII, digits, whitespace runs, UTF-8 and an emoji.
inline constexpr std::string_view kSampleText =
    "Once upon a time, 1234 tiny  robots\n\tsaid h\xc3\xa9llo \xf0\x9f\x99\x82!";

// What every tokenizer target asks of a tokenizer it loaded: encode the sample
// text and decode the ids again. Returns the ids.
inline std::vector<int32_t> encode_and_decode_sample(const Tokenizer& tokenizer)
{
    auto ids = tokenizer.encode(kSampleText);
    tokenizer.decode(ids);
    return ids;
}

} // namespace embedlab::fuzz
