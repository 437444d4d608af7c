// Numbers and lists in messages, descriptions and tables, written one way
// everywhere: "0.3" (printf %g), "4x4x8" or "1,4,6,1"; strings read from files made
// safe to print. Torch-free, header-only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace embedlab {

inline std::string short_number(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

inline std::string joined(const std::vector<int64_t>& v, const char* separator = ",")
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i)
        s += (i > 0 ? separator : "") + std::to_string(v[i]);
    return s;
}

inline std::string joined(const std::vector<std::string>& v, const char* separator = ", ")
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i)
        s += (i > 0 ? separator : "") + v[i];
    return s;
}

// A string from an untrusted file (a GGUF architecture, a tensor name) as it may
// appear in a message: control characters and newlines escaped (\n, \xNN), at
// most `max_bytes` bytes kept, "..." marking a cut.
inline std::string printable(std::string_view s, size_t max_bytes = 200)
{
    std::string out;
    for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == '\n') {
            out += "\\n";
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    if (s.size() > max_bytes)
        out += "...";
    return out;
}

} // namespace embedlab
