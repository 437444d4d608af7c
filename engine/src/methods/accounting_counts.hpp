// Overflow-checked counts for the accounting (issue 57 item 4). Every product and sum
// of parameter, value or FLOP counts in accounting.cpp, table_method_support.cpp and
// table_quant.cpp is a Count's, which refuses a result beyond 2^62 with an InputError
// naming the terms and the limit. This is the one bound every front end meets (the
// CLI's account, the Python module's account(), the GUI): none of them can report a
// wrapped, zero, infinite or NaN figure for a table too large to count. 2^62 leaves
// room for the sums and doublings the callers make of the figures (2 V d FLOPs beside
// V d parameters). Torch-free; private to engine/src/methods.
//
//   const Count V(vocab, "vocab"), d(dim, "dim");
//   multiply(V, d, "parameters"); // InputError "vocab x dim = 1099511627776 x 16777216 =
//                                 //   18446744073709551616 parameters exceeds what EmbedLab
//                                 //   counts (2^62)"
//   (2 * V * d).value();          // a constant names itself
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "embedlab/error.hpp"

namespace embedlab::accounting_counts {

// The largest count EmbedLab reports.
inline constexpr int64_t kCountLimit = int64_t{1} << 62;
inline constexpr const char* kCountLimitText = "2^62";

// Wide enough for any product or sum of two int64 values, exactly (GCC and Clang).
__extension__ typedef __int128 Wide;
__extension__ typedef unsigned __int128 WideUnsigned;

// An exact 128-bit value as decimal digits (messages: the product that did not fit).
inline std::string exact_text(Wide v)
{
    if (v == 0)
        return "0";
    const bool negative = v < 0;
    WideUnsigned m = negative ? static_cast<WideUnsigned>(-(v + 1)) + 1 : static_cast<WideUnsigned>(v);
    std::string digits;
    while (m > 0) {
        digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
        m /= 10;
    }
    return negative ? "-" + digits : digits;
}

[[noreturn]] inline void refuse_count(const std::string& name, const std::string& terms, Wide value,
                                      const std::string& unit)
{
    const std::string shown = name + " = " + (terms.empty() ? "" : terms + " = ") + exact_text(value) +
                              (unit.empty() ? "" : " " + unit);
    if (value < 0)
        throw InputError(shown + " is negative");
    throw InputError(shown + " exceeds what EmbedLab counts (" + kCountLimitText + ")");
}

// A count within [0, 2^62] and the expression it came from ("vocab x dim"), so a
// product or sum that leaves the range is refused naming its terms.
class Count {
public:
    // A named input ("vocab"): InputError when it is negative or beyond 2^62.
    Count(int64_t value, std::string name) : value_(value), name_(std::move(name))
    {
        if (value < 0 || value > kCountLimit)
            refuse_count(name_, "", value, "");
    }
    // A constant: its digits name it (2 * V * d).
    Count(int64_t value) : Count(value, std::to_string(value)) {} // NOLINT: implicit, for literals
    int64_t value() const { return value_; }
    const std::string& name() const { return name_; }
    // The same count under a shorter name for later messages ("params_per_token").
    Count renamed(std::string name) const
    {
        Count c = *this;
        c.name_ = std::move(name);
        c.sum_ = false;
        return c;
    }

    friend Count multiply(const Count& a, const Count& b, const std::string& unit)
    {
        if (a.is_constant(1) || b.is_constant(1)) // a loop's starting 1: no term of its own
            return a.is_constant(1) ? b : a;
        const Wide product = static_cast<Wide>(a.value_) * b.value_;
        const std::string name = a.factor_name() + " x " + b.factor_name();
        if (product > kCountLimit)
            refuse_count(name, std::to_string(a.value_) + " x " + std::to_string(b.value_), product, unit);
        return Count(static_cast<int64_t>(product), name, false);
    }
    friend Count add(const Count& a, const Count& b, const std::string& unit)
    {
        if (a.is_constant(0) || b.is_constant(0)) // a loop's starting 0
            return a.is_constant(0) ? b : a;
        const Wide sum = static_cast<Wide>(a.value_) + b.value_;
        const std::string name = a.name_ + " + " + b.name_;
        if (sum > kCountLimit)
            refuse_count(name, std::to_string(a.value_) + " + " + std::to_string(b.value_), sum, unit);
        return Count(static_cast<int64_t>(sum), name, true);
    }
    friend Count operator*(const Count& a, const Count& b) { return multiply(a, b, ""); }
    friend Count operator+(const Count& a, const Count& b) { return add(a, b, ""); }

private:
    Count(int64_t value, std::string name, bool sum) : value_(value), name_(std::move(name)), sum_(sum) {}
    std::string factor_name() const { return sum_ ? "(" + name_ + ")" : name_; }
    bool is_constant(int64_t v) const { return value_ == v && name_ == std::to_string(v); }

    int64_t value_ = 0;
    std::string name_;
    bool sum_ = false; // name_ is a sum: parenthesised as a factor
};

// The whole model's parameters before and after compression: the model's count
// (model_params; the table's own when it is unknown, <= 0) and that count with the
// table's `before` values replaced by its `after`. InputError when model_params is
// beyond 2^62, or the result is: beyond 2^62, or not positive (model_params counts
// fewer values than the token table it holds).
inline std::pair<int64_t, int64_t> model_counts(int64_t model_params, const Count& before, const Count& after)
{
    if (model_params <= 0)
        return {before.value(), after.value()};
    const Count model(model_params, "model_params");
    // Each term lies in [0, 2^62]: no int64 overflow before the check.
    const int64_t rest = model.value() - before.value();
    const int64_t compressed = rest + after.value();
    if (compressed > kCountLimit)
        refuse_count("model_params - (" + before.name() + ") + " + after.name(),
                     std::to_string(model.value()) + " - " + std::to_string(before.value()) + " + " +
                         std::to_string(after.value()),
                     compressed, "parameters");
    if (compressed < 1)
        throw InputError("model_params = " + std::to_string(model.value()) +
                         " counts fewer parameters than the model's token table holds (" + before.name() +
                         " = " + std::to_string(before.value()) + "): compressed to " +
                         std::to_string(after.value()) + " values it would have " +
                         std::to_string(compressed) + " parameters");
    return {model.value(), compressed};
}

} // namespace embedlab::accounting_counts
