// Small helpers shared by the tokenizer implementations: reading files with
// user-facing errors, UTF-8 stepping, and printable token text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace embedlab::tokenizer_impl {

// Whole file as bytes; InputError "<path>: ..." when it cannot be read.
std::string read_file_bytes(const std::filesystem::path& path);

// Parses a JSON file; InputError naming the file when it is missing or not JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Length in bytes of the well-formed UTF-8 sequence starting at text[pos], and
// its code point; an ill-formed byte gives length 1 and code point -1.
struct CodePoint {
    int32_t value;
    int length;
};
CodePoint next_code_point(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of a valid code point.
void append_utf8(std::string& out, int32_t cp);

// The bytes with every byte that is not part of well-formed UTF-8 written as
// "<0xXX>", so token text can be shown by a UI that requires valid UTF-8.
std::string printable_utf8(std::string_view bytes);

// "<path>: <problem>" as the InputError message convention asks.
std::string file_message(const std::filesystem::path& path, const std::string& problem);

// Throws InputError naming `path` unless 0 <= id < vocab_size.
void check_token_id(const std::filesystem::path& path, int32_t id, int64_t vocab_size);

} // namespace embedlab::tokenizer_impl
