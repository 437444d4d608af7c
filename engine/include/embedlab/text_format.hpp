// Numbers and lists in messages, descriptions and tables, written one way
// everywhere: "0.3" (printf %g), "4x4x8" or "1,4,6,1". Torch-free, header-only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
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

} // namespace embedlab
