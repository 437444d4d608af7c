// The machine's limits (machine_limits.hpp).
#include "machine_limits.hpp"

#include "embedlab/parallel_for.hpp"
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

namespace embedlab::cli {

namespace {

constexpr int64_t kArrayFloats = int64_t{1} << 25; // 128 MiB a float32 array: far beyond any cache
constexpr int kRepeats = 5;

template <class F> double best_seconds(F&& f)
{
    double best = 1e300;
    for (int r = 0; r < kRepeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

// Each thread sums its own contiguous part (the compiler vectorises the loop).
double read_bandwidth(const std::vector<float>& a)
{
    std::vector<double> sums(static_cast<size_t>(at::get_num_threads()) + 1, 0.0);
    const double s = best_seconds([&] {
        at::parallel_for(0, kArrayFloats, kArrayFloats / 64, [&](int64_t lo, int64_t hi) {
            float acc[16] = {};
            for (int64_t i = lo; i + 16 <= hi; i += 16)
                for (int j = 0; j < 16; ++j)
                    acc[j] += a[static_cast<size_t>(i + j)];
            double total = 0;
            for (float x : acc)
                total += x;
            sums[static_cast<size_t>(at::get_thread_num())] += total; // kept: the loop is not dead
        });
    });
    return static_cast<double>(kArrayFloats) * 4 / s / 1e9;
}

double triad_bandwidth(std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c)
{
    const double s = best_seconds([&] {
        at::parallel_for(0, kArrayFloats, kArrayFloats / 64, [&](int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; ++i)
                a[static_cast<size_t>(i)] = b[static_cast<size_t>(i)] + 3.0f * c[static_cast<size_t>(i)];
        });
    });
    return 3.0 * static_cast<double>(kArrayFloats) * 4 / s / 1e9;
}

double gemm_peak(int64_t n)
{
    c10::InferenceMode guard;
    const auto x = torch::rand({n, n}), y = torch::rand({n, n});
    auto out = torch::empty({n, n});
    torch::mm_out(out, x, y); // warm-up: BLAS's threads and buffers
    const double s = best_seconds([&] { torch::mm_out(out, x, y); });
    return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / s / 1e9;
}

} // namespace

std::string cpu_model_name()
{
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
            return line.substr(line.find(':') + 2);
    return "";
}

MachineLimits measure_machine()
{
    MachineLimits m;
    m.threads = at::get_num_threads();
    m.array_bytes = kArrayFloats * 4;
    std::vector<float> a(static_cast<size_t>(kArrayFloats), 1.0f), b(a.size(), 2.0f), c(a.size(), 0.5f);
    m.read_gbps = read_bandwidth(b);
    m.triad_gbps = triad_bandwidth(a, b, c);
    m.gemm_n = 1024;
    m.gemm_gflops = gemm_peak(m.gemm_n);
    return m;
}

TokenCost token_cost(int64_t attention, int64_t mlp, int64_t norms, int64_t head)
{
    const double weights = static_cast<double>(attention + mlp + norms + head);
    return {.weight_bytes = 4 * weights, .flops = 2 * weights, .head_flops = 2 * static_cast<double>(head)};
}

nlohmann::ordered_json machine_json(const MachineLimits& m)
{
    return {{"threads", m.threads},       {"array_bytes", m.array_bytes}, {"read_gbps", m.read_gbps},
            {"triad_gbps", m.triad_gbps}, {"gemm_gflops", m.gemm_gflops}, {"gemm_n", m.gemm_n},
            {"cpu", cpu_model_name()}};
}

} // namespace embedlab::cli
