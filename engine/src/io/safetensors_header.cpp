// The safetensors header: 8-byte length, JSON table, dtypes, shapes against byte
// ranges, offsets against the file size. Torch-free (fuzzed: fuzz/).
#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/text_format.hpp"
#include "io/checked_size.hpp"

namespace embedlab {

namespace {

using nlohmann::json;

// Every dtype of the safetensors spec with its element size; loading supports
// only the float ones, but the rest must still validate.
std::optional<uint64_t> dtype_size(const std::string& dtype)
{
    static const std::map<std::string, uint64_t> sizes = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
        {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
        {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8},
    };
    auto it = sizes.find(dtype);
    if (it == sizes.end())
        return std::nullopt;
    return it->second;
}

std::string shape_text(const std::vector<int64_t>& shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string range_text(uint64_t begin, uint64_t end)
{
    return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// A non-negative integer of the header, as uint64.
std::optional<uint64_t> as_unsigned(const json& v)
{
    if (v.is_number_unsigned())
        return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0)
        return static_cast<uint64_t>(v.get<int64_t>());
    return std::nullopt;
}

SafetensorsEntry parse_entry(const std::string& name, const json& info, uint64_t data_size,
                             const std::string& label)
{
    const std::string where = label + ": tensor '" + printable(name) + "': ";
    if (!info.is_object())
        throw InputError(where + "header entry is not a JSON object");

    const auto dtype_it = info.find("dtype");
    if (dtype_it == info.end() || !dtype_it->is_string())
        throw InputError(where + "missing field 'dtype'");
    SafetensorsEntry e;
    e.name = name;
    e.dtype = dtype_it->get<std::string>();
    const auto elem_size = dtype_size(e.dtype);
    if (!elem_size)
        throw InputError(where + "unknown dtype '" + e.dtype + "'");

    const auto shape_it = info.find("shape");
    if (shape_it == info.end() || !shape_it->is_array())
        throw InputError(where + "missing field 'shape' (an array of dimensions)");
    std::vector<uint64_t> dims;
    for (const json& d : *shape_it) {
        if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0)
            throw InputError(where + "negative dimension " + std::to_string(d.get<int64_t>()) + " in shape " +
                             d.dump());
        const auto dim = as_unsigned(d);
        if (!dim)
            throw InputError(where + "shape " + shape_it->dump() + " is not a list of integers");
        dims.push_back(*dim);
    }
    // Checked (io/checked_size.hpp): a wrapped product would pass the data_offsets check below.
    const std::optional<uint64_t> elements = io::checked_elements(dims);
    const std::optional<uint64_t> checked_bytes =
        elements ? io::checked_mul(*elements, *elem_size) : std::nullopt;
    if (!checked_bytes)
        throw InputError(where + "shape " + shape_it->dump() + " is too large (its element count or " +
                         e.dtype + " byte size does not fit in 64 bits); the file is corrupt");
    const uint64_t bytes = *checked_bytes;
    for (const uint64_t d : dims)
        e.shape.push_back(static_cast<int64_t>(d));

    const auto offsets_it = info.find("data_offsets");
    if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
        !as_unsigned((*offsets_it)[0]) || !as_unsigned((*offsets_it)[1]))
        throw InputError(where + "missing or malformed field 'data_offsets' (expected [begin, end])");
    e.begin = *as_unsigned((*offsets_it)[0]);
    e.end = *as_unsigned((*offsets_it)[1]);
    if (e.begin > e.end || e.end > data_size)
        throw InputError(where + "data_offsets " + range_text(e.begin, e.end) +
                         " lie outside the data section (" + std::to_string(data_size) +
                         " bytes); the file is truncated or corrupt");
    if (e.end - e.begin != bytes)
        throw InputError(where + "shape " + shape_text(e.shape) + " of dtype " + e.dtype + " needs " +
                         std::to_string(bytes) + " bytes but data_offsets " + range_text(e.begin, e.end) +
                         " span " + std::to_string(e.end - e.begin) + " bytes");
    return e;
}

} // namespace

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, uint64_t size, const std::string& label)
{
    if (size < 8)
        throw InputError(label + ": file is truncated (" + std::to_string(size) +
                         " bytes, too short for a safetensors header)");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) // little-endian on any host
        header_len = (header_len << 8) | bytes[i];
    if (header_len > size - 8)
        throw InputError(label + ": header length " + std::to_string(header_len) +
                         " is larger than the file (" + std::to_string(size) +
                         " bytes); the file is truncated or not a safetensors file");

    json header;
    // nlohmann keeps the last of two equal keys; a tensor named twice is refused instead.
    std::set<std::string> names;
    std::string duplicate;
    const json::parser_callback_t note_names = [&](int depth, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key && depth == 1 &&
            !names.insert(parsed.get<std::string>()).second && duplicate.empty())
            duplicate = parsed.get<std::string>();
        return true;
    };
    try {
        header = json::parse(bytes + 8, bytes + 8 + header_len, note_names);
    } catch (const json::exception& ex) {
        throw InputError(label + ": safetensors header is not valid JSON (" + ex.what() + ")");
    }
    if (!duplicate.empty())
        throw InputError(label + ": tensor '" + printable(duplicate) +
                         "' is named twice in the safetensors header");
    if (!header.is_object())
        throw InputError(label + ": safetensors header is not a JSON object");

    SafetensorsHeader out;
    out.data_start = 8 + header_len;
    const uint64_t data_size = size - out.data_start;
    for (const auto& [key, value] : header.items()) {
        if (key == "__metadata__") {
            if (!value.is_object())
                throw InputError(label + ": __metadata__ is not a JSON object");
            for (const auto& [mk, mv] : value.items())
                out.metadata[mk] = mv.is_string() ? mv.get<std::string>() : mv.dump();
            continue;
        }
        out.entries.push_back(parse_entry(key, value, data_size, label));
    }

    std::sort(out.entries.begin(), out.entries.end(),
              [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                  return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
              });
    for (size_t i = 1; i < out.entries.size(); ++i) {
        const auto& prev = out.entries[i - 1];
        const auto& cur = out.entries[i];
        if (cur.begin < prev.end)
            throw InputError(label + ": tensors '" + printable(prev.name) + "' " +
                             range_text(prev.begin, prev.end) + " and '" + printable(cur.name) + "' " +
                             range_text(cur.begin, cur.end) + " overlap in the data section");
    }
    return out;
}

} // namespace embedlab
