// What this machine can do at most, for the benches to read their figures against
// (issue 63 item 2): memory bandwidth, STREAM-style (a read of one array, a triad
// a = b + s c), over arrays far beyond the caches, and the float32 GEMM peak libtorch
// reaches (its BLAS) on square products, both with libtorch's threads.
//
//   const auto limits = embedlab::cli::measure_machine();   // about 2 s
//   double share = achieved_gbps / limits.read_gbps;
//
// Thread safety: run it alone (it uses every libtorch thread).
#pragma once

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace embedlab::cli {

struct MachineLimits {
    int threads = 0;
    int64_t array_bytes = 0; // each array of the bandwidth loops
    double read_gbps = 0;    // sum of one array: what generation's weight reads need
    double triad_gbps = 0;   // a = b + s c, counting the three arrays (STREAM's rule)
    double gemm_gflops = 0;  // float32 n x n products, 2 n^3 per product
    int64_t gemm_n = 0;
};

MachineLimits measure_machine();
// What one token's forward reads and computes, from the model's parameter breakdown:
// every decoder weight and the head (the tied table as the head; an untied model's
// table gives one row, left out), as float32 (generation holds its weights so), and
// 2 FLOPs per weight (attention's scores, which grow with the context, left out).
// head_flops is the head's part of flops: a prompt read for generation multiplies only
// its last row by the head (prompt_flops).
struct TokenCost {
    double weight_bytes = 0, flops = 0, head_flops = 0;
    // FLOPs per token of a prompt of `prompt_tokens` read in one call.
    double prompt_flops(int64_t prompt_tokens) const
    {
        return flops - head_flops + head_flops / static_cast<double>(std::max<int64_t>(prompt_tokens, 1));
    }
};
TokenCost token_cost(int64_t attention, int64_t mlp, int64_t norms, int64_t head);
// {threads, array_bytes, read_gbps, triad_gbps, gemm_gflops, gemm_n, cpu}
nlohmann::ordered_json machine_json(const MachineLimits& limits);
// The CPU's model name from /proc/cpuinfo ("" where there is none).
std::string cpu_model_name();

} // namespace embedlab::cli
