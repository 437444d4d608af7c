#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "embedlab/eval.hpp"
#include "embedlab/file_input.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab {

namespace {

std::string read_bytes(const std::filesystem::path& file)
{
    return io::read_regular_file(file, io::text_file_cap, "text or ids file");
}

// 1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd".
std::string ordinal(size_t n)
{
    const size_t last = n % 10, tens = n % 100;
    const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                         : last == 1                ? "st"
                         : last == 2                ? "nd"
                         : last == 3                ? "rd"
                                                    : "th";
    return std::to_string(n) + suffix;
}

int32_t checked_id(const nlohmann::json& v, const std::filesystem::path& file, size_t index)
{
    if (!v.is_number_integer())
        throw InputError(file.string() + ": ids[" + std::to_string(index) + "] is not an integer");
    const auto x = v.get<int64_t>();
    if (x < 0 || x > std::numeric_limits<int32_t>::max())
        throw InputError(file.string() + ": ids[" + std::to_string(index) + "] = " + std::to_string(x) +
                         " is not a valid token id");
    return static_cast<int32_t>(x);
}

} // namespace

std::string read_text_file(const std::filesystem::path& file)
{
    std::string text = read_bytes(file);
    if (text.empty())
        throw InputError(file.string() + ": the text is empty");
    return text;
}

std::vector<int32_t> read_ids_file(const std::filesystem::path& file)
{
    const std::string bytes = read_bytes(file);
    const auto first = bytes.find_first_not_of(" \t\r\n");
    if (first == std::string::npos)
        throw InputError(file.string() + ": the ids file is empty");
    std::vector<int32_t> ids;
    if (bytes[first] == '{' || bytes[first] == '[') {
        nlohmann::json j = nlohmann::json::parse(bytes, nullptr, false);
        if (j.is_discarded())
            throw InputError(file.string() + ": not valid JSON");
        const nlohmann::json* arr = &j;
        if (j.is_object()) {
            if (!j.contains("ids") || !j["ids"].is_array())
                throw InputError(file.string() + ": JSON object has no \"ids\" array");
            arr = &j["ids"];
        }
        ids.reserve(arr->size());
        for (size_t i = 0; i < arr->size(); ++i)
            ids.push_back(checked_id((*arr)[i], file, i));
    } else {
        const char* p = bytes.data() + first;
        const char* end = bytes.data() + bytes.size();
        // Each id but the last takes a digit and a separator: the ids never outgrow this
        // (doubling left each outgrown block resident in the heap, issue 57).
        ids.reserve((bytes.size() - first) / 2 + 1);
        while (p < end) {
            int64_t x = 0;
            auto [q, ec] = std::from_chars(p, end, x);
            if (ec != std::errc() || x < 0 || x > std::numeric_limits<int32_t>::max()) {
                const char* word_end = p;
                while (word_end < end && word_end - p < 40 && *word_end != ' ' && *word_end != '\t' &&
                       *word_end != '\r' && *word_end != '\n')
                    ++word_end;
                throw InputError(file.string() + ": the " + ordinal(ids.size() + 1) + " entry, '" +
                                 printable(std::string_view(p, static_cast<size_t>(word_end - p))) +
                                 "', is not a token id (a whole number from 0 to 2147483647)");
            }
            ids.push_back(static_cast<int32_t>(x));
            p = q;
            while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
                ++p;
        }
    }
    if (ids.empty())
        throw InputError(file.string() + ": contains no token ids");
    return ids;
}

} // namespace embedlab
