// The torch-free half of jobs: checking a job's JSON (check_job in job.hpp) and
// reading its compression fields, so the fuzzer (fuzz/fuzz_job.cpp) reaches every
// check without libtorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedlab::detail {

// A string field (non-empty), "" when absent and not required; an integer field
// in [lo, hi], `fallback` when absent. InputError("job: ...") otherwise.
std::string job_string(const nlohmann::ordered_json& job, const std::string& key, bool required);
int64_t job_int(const nlohmann::ordered_json& job, const std::string& key, int64_t fallback, int64_t lo,
                int64_t hi);

// The options of a measure job (job.hpp), checked; defaults where absent.
struct MeasureOptions {
    int64_t tokens = 50, repeat = 5, lookups = 256, seed = 0;
    double nu = 5, tau = 1, idle_seconds = 1, energy_seconds = 2;
    std::string power = "auto"; // "auto" | "off"
    std::string text;           // "": seeded random ids
};
MeasureOptions measure_options(const nlohmann::ordered_json& options);

} // namespace embedlab::detail
