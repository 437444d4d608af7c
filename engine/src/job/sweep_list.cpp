#include "embedlab/sweep_list.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "embedlab/error.hpp"

namespace embedlab {

namespace {

constexpr const char* kSyntax = "a sweep is a list 8,16,32 or a range start:stop:step, 8:128:8";

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

std::vector<std::string_view> split(std::string_view s, char sep)
{
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (true) {
        const size_t at = s.find(sep, start);
        parts.push_back(
            trim(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start)));
        if (at == std::string_view::npos)
            return parts;
        start = at + 1;
    }
}

bool parse(std::string_view s, int64_t& out)
{
    if (!s.empty() && s.front() == '+')
        s.remove_prefix(1);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

bool parse(std::string_view s, double& out)
{
    if (!s.empty() && s.front() == '+')
        s.remove_prefix(1);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size() && std::isfinite(out);
}

std::string number_text(int64_t v)
{
    return std::to_string(v);
}

std::string number_text(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.12g", v);
    return buf;
}

double clean(double v)
{
    return std::strtod(number_text(v).c_str(), nullptr); // 0.30000000000000004 -> 0.3
}

// The shared grammar; T is int64_t or double.
template <class T>
std::vector<T> sweep_values(std::string_view text_in, T lo, T hi, const std::string& what, size_t max_values)
{
    const std::string_view text = trim(text_in);
    const std::string whole(text);
    const bool sweep = is_sweep_text(text);
    const auto fail = [&](const std::string& problem) -> void {
        throw InputError(what + " " + whole + ": " + problem);
    };
    const auto check = [&](T v) {
        if (v < lo || v > hi) {
            if (!sweep) // one value: said as a number box says it
                throw InputError(what + " " + number_text(v) + " is outside " + number_text(lo) + ".." +
                                 number_text(hi));
            fail(number_text(v) + " is outside " + number_text(lo) + ".." + number_text(hi));
        }
    };
    const auto too_many = [&] {
        throw InputError(what + " has more than " + std::to_string(max_values) + " values; give at most " +
                         std::to_string(max_values));
    };
    const char* kind = std::is_integral_v<T> ? "an integer" : "a number";
    std::vector<T> out;
    if (text.empty())
        throw InputError(what + " is empty (" + kSyntax + ")");
    for (const std::string_view item : split(text, ',')) {
        if (item.empty())
            fail("an empty value between commas");
        const auto bounds = split(item, ':');
        if (bounds.size() > 3)
            fail("the range " + std::string(item) + " is not start:stop or start:stop:step");
        std::vector<T> ends;
        for (const std::string_view b : bounds) {
            T v{};
            if (!parse(b, v)) { // appended: GCC 12 misreads "'" + std::string(b) (-Wstringop-overflow)
                std::string message = "'";
                message.append(b).append("' is not ").append(kind).append(" (").append(kSyntax).append(")");
                fail(message);
            }
            ends.push_back(v);
        }
        if (ends.size() == 1) {
            check(ends[0]);
            out.push_back(ends[0]);
            if (out.size() > max_values)
                too_many();
            continue;
        }
        const T start = ends[0], stop = ends[1];
        if (ends.size() == 2 && !std::is_integral_v<T>)
            fail("the range " + std::string(item) + " needs a step (start:stop:step)");
        const T step = ends.size() == 3 ? ends[2] : T(1);
        if (!(step > 0))
            fail("the range " + std::string(item) + " needs a positive step");
        if (stop < start)
            fail("the range " + std::string(item) + " ends before it starts");
        size_t count = 0;
        if constexpr (std::is_integral_v<T>)
            // In unsigned 64-bit: stop - start may exceed the signed range, never 2^64.
            count = static_cast<size_t>((static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)) /
                                        static_cast<uint64_t>(step)) +
                    1;
        else
            count = static_cast<size_t>(std::min(std::floor((stop - start) / step + 1e-9), 1e9)) + 1;
        if (count > max_values || out.size() + count > max_values)
            too_many();
        for (size_t i = 0; i < count; ++i) {
            T v{};
            if constexpr (std::is_integral_v<T>)
                v = static_cast<T>(static_cast<uint64_t>(start) + i * static_cast<uint64_t>(step));
            else
                v = clean(start + static_cast<double>(i) * step);
            check(v); // every value, not only the ends: the first one outside is named
            out.push_back(v);
        }
    }
    return out;
}

} // namespace

bool is_sweep_text(std::string_view text)
{
    return text.find(',') != std::string_view::npos || text.find(':') != std::string_view::npos;
}

std::vector<int64_t> sweep_integers(std::string_view text, int64_t lo, int64_t hi, const std::string& what,
                                    size_t max_values)
{
    return sweep_values<int64_t>(text, lo, hi, what, max_values);
}

std::vector<double> sweep_numbers(std::string_view text, double lo, double hi, const std::string& what,
                                  size_t max_values)
{
    return sweep_values<double>(text, lo, hi, what, max_values);
}

} // namespace embedlab
