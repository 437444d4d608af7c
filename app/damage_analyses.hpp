// Which vocabulary tokens a results row's compression damages (issue 39 part 3):
// the engine's token_damage (token_damage.hpp) of the row's compressed model
// against its original on the row's own evaluation text, as plain data (no
// libtorch, no Qt in this header). Runs on the engine thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/experiment_request.hpp"

namespace embedlab::app {

struct DamageResult {
    // Per token id (the vocabulary's size each); KL NaN where the token is never a target.
    std::vector<double> cosine, kl_as_target;
    std::vector<int64_t> target_count;
    struct Bucket {
        std::string label; // "0", "1", "2-3", ...
        int64_t tokens = 0, positions = 0;
        double mean_cosine = 0, kl_as_target = 0, kl_as_input = 0; // KL NaN: no position
    };
    std::vector<Bucket> buckets;
    int64_t positions = 0; // scored
    double kl_mean = 0;
};

// The run in memory when the workbench still keeps it, else fitted again (seeded);
// its eval_text (or eval_ids) cut at eval_tokens, at its ctx (0: min(128, the
// model's context)). Cancelled when progress returns false.
DamageResult token_damage_of(const CompressionRequest& run, const ProgressFn& progress);

} // namespace embedlab::app
