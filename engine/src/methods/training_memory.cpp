#include "methods/training_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <sys/resource.h>

#include "embedlab/error.hpp"

namespace embedlab::methods {

namespace {

// Calibrated against the maximum RSS (/usr/bin/time -v) of finetune on tinygpt2
// pca (2 x 64, 8 x 128 tokens) and train --config tiny / small.
constexpr double kRuntimeBytes = 200e6; // libtorch, the model files, the tokenizer
constexpr double kPerLayerValues = 34;  // values kept per token and d per layer
constexpr double kAttentionCopies = 4;  // scores, softmax, their gradients
constexpr double kLogitCopies = 6;      // logits, log-softmax, gradient, temporaries
constexpr double kOptimiserCopies = 5;  // gradient, Adam m and v, two update temporaries

double read_cgroup_limit()
{
    std::ifstream in("/sys/fs/cgroup/memory.max");
    std::string value;
    if (!(in >> value) || value == "max")
        return 0;
    return std::strtod(value.c_str(), nullptr);
}

double read_mem_available()
{
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("MemAvailable:", 0) == 0) {
            std::istringstream fields(line.substr(13));
            double kb = 0;
            fields >> kb;
            return kb * 1024;
        }
    return 0;
}

std::string gigabytes(double bytes)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
    return text;
}

} // namespace

double training_step_bytes(const TrainingShape& s)
{
    const double f = 4; // fp32
    const double tokens = static_cast<double>(s.windows) * static_cast<double>(s.seqlen);
    const double weights = f * static_cast<double>(s.frozen + s.trained);
    const double optimiser = kOptimiserCopies * f * static_cast<double>(s.trained);
    const double layers = static_cast<double>(s.layers);
    const double per_layer = kPerLayerValues * f * tokens * static_cast<double>(s.dim);
    const double scores = kAttentionCopies * f * static_cast<double>(s.windows) *
                          static_cast<double>(s.heads) * static_cast<double>(s.seqlen) *
                          static_cast<double>(s.seqlen);
    const double logits = kLogitCopies * f * tokens * static_cast<double>(s.vocab);
    const double indices = 2 * 8 * static_cast<double>(s.batch) * static_cast<double>(s.seqlen + 1);
    return kRuntimeBytes + weights + optimiser + layers * (per_layer + scores) + logits + indices;
}

double available_memory_bytes()
{
    double available = read_mem_available();
    auto lower = [&](double limit) {
        if (limit > 0 && (available <= 0 || limit < available))
            available = limit;
    };
    lower(read_cgroup_limit());
    rlimit as{};
    if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
        lower(static_cast<double>(as.rlim_cur));
    return available;
}

void check_training_memory(const std::string& what, int64_t batch, int64_t seqlen, double bytes,
                           double available)
{
    if (available <= 0 || bytes <= 0.9 * available)
        return;
    throw InputError(what + ": batch " + std::to_string(batch) + " x seqlen " + std::to_string(seqlen) +
                     " needs about " + gigabytes(bytes) + " (estimate), this machine has " +
                     gigabytes(available) + " available; lower --batch or --seqlen");
}

int64_t micro_windows(int64_t batch, int64_t seqlen, int64_t layers, int64_t dim, int64_t vocab)
{
    // Multiply-adds per token: the blocks, the attention over the window, the LM head.
    const double cost = static_cast<double>(layers) * static_cast<double>(dim) *
                            (12.0 * static_cast<double>(dim) + static_cast<double>(seqlen)) +
                        static_cast<double>(vocab) * static_cast<double>(dim);
    constexpr double kReferenceCost = 8e6; // tinygpt2 at seqlen 128
    const double tokens =
        static_cast<double>(kMicroTokens) * std::min(1.0, kReferenceCost / std::max(cost, 1.0));
    const auto windows = static_cast<int64_t>(tokens / static_cast<double>(std::max<int64_t>(1, seqlen)));
    return std::clamp<int64_t>(windows, 1, std::max<int64_t>(1, batch));
}

} // namespace embedlab::methods
