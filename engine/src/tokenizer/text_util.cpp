#include "tokenizer/text_util.hpp"

#include <cstdio>
#include <fstream>

#include "embedlab/error.hpp"
#include "embedlab/file_input.hpp"

namespace embedlab::tokenizer_impl {

std::string file_message(const std::filesystem::path& path, const std::string& problem)
{
    return path.string() + ": " + problem;
}

void check_token_id(const std::filesystem::path& path, int32_t id, int64_t vocab_size)
{
    if (id < 0 || id >= vocab_size)
        throw InputError(file_message(path, "token id " + std::to_string(id) +
                                                " is out of range (vocabulary size " +
                                                std::to_string(vocab_size) + ")"));
}

std::string read_file_bytes(const std::filesystem::path& path)
{
    return io::read_regular_file(path, io::tokenizer_file_cap, "tokenizer file");
}

nlohmann::json read_json_file(const std::filesystem::path& path)
{
    const std::string bytes = read_file_bytes(path);
    try {
        return nlohmann::json::parse(bytes);
    } catch (const nlohmann::json::exception& e) {
        // parse_error, and out_of_range for a number beyond double (found by fuzz_gpt2_bpe).
        throw InputError(file_message(path, std::string("not valid JSON (") + e.what() + ")"));
    }
}

CodePoint next_code_point(std::string_view text, size_t pos)
{
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(pos);
    if (lead < 0x80)
        return {lead, 1};
    int length = 0;
    int32_t value = 0;
    int32_t min_value = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2, value = lead & 0x1F, min_value = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3, value = lead & 0x0F, min_value = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4, value = lead & 0x07, min_value = 0x10000;
    } else {
        return {-1, 1};
    }
    if (pos + length > text.size())
        return {-1, 1};
    for (int i = 1; i < length; ++i) {
        const unsigned char c = byte(pos + i);
        if ((c & 0xC0) != 0x80)
            return {-1, 1};
        value = (value << 6) | (c & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if (value < min_value || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF))
        return {-1, 1};
    return {value, length};
}

void append_utf8(std::string& out, int32_t cp)
{
    const auto put = [&](int32_t v) { out.push_back(static_cast<char>(v)); };
    if (cp < 0x80) {
        put(cp);
    } else if (cp < 0x800) {
        put(0xC0 | (cp >> 6));
        put(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        put(0xE0 | (cp >> 12));
        put(0x80 | ((cp >> 6) & 0x3F));
        put(0x80 | (cp & 0x3F));
    } else {
        put(0xF0 | (cp >> 18));
        put(0x80 | ((cp >> 12) & 0x3F));
        put(0x80 | ((cp >> 6) & 0x3F));
        put(0x80 | (cp & 0x3F));
    }
}

std::string printable_utf8(std::string_view bytes)
{
    std::string out;
    out.reserve(bytes.size());
    for (size_t pos = 0; pos < bytes.size();) {
        const CodePoint cp = next_code_point(bytes, pos);
        if (cp.value < 0) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "<0x%02X>", static_cast<unsigned char>(bytes[pos]));
            out += hex;
        } else {
            out.append(bytes.substr(pos, cp.length));
        }
        pos += cp.length;
    }
    return out;
}

} // namespace embedlab::tokenizer_impl
