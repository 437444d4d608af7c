// A swept field's values as typed, shared by `embedlab-cli sweep` (--ranks, --ks,
// --eps, --keep-ratios) and the workbench's method panel: a list "8,16,32", a
// range "8:128:8" (start:stop:step; the stop is included when a step lands on it,
// "8:12" steps by 1 for integers), or a list of both ("4,8:32:8").
//
//   embedlab::sweep_integers("8:128:8", 1, 128, "--ranks");   // 8, 16, ..., 128
//   embedlab::sweep_numbers("0.1:0.3:0.1", 0, 1, "--eps");     // 0.1, 0.2, 0.3
//   embedlab::sweep_integers("8:500:8", 1, 128, "rank k =");  // InputError:
//       "rank k = 8:500:8: 136 is outside 1..128"
//
// Every value is checked against lo..hi. InputError messages begin with `what`
// (the option or the field's label) so a front end can show them as they are.
// Torch-free; reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace embedlab {

// Each value is usually one run: thousands are a typo.
inline constexpr size_t kMaxSweepValues = 256;

std::vector<int64_t> sweep_integers(std::string_view text, int64_t lo, int64_t hi, const std::string& what,
                                    size_t max_values = kMaxSweepValues);
// Ranges of numbers need their step ("0.1:0.5:0.1"); values are rounded to 12
// significant digits, so 0.1:0.3:0.1 gives 0.3, not 0.30000000000000004.
std::vector<double> sweep_numbers(std::string_view text, double lo, double hi, const std::string& what,
                                  size_t max_values = kMaxSweepValues);
// Whether `text` is a sweep rather than one value (it holds ',' or ':').
bool is_sweep_text(std::string_view text);

} // namespace embedlab
