// The engine computations behind the workbench's views, as plain data (no
// libtorch, no Qt in this header). Each call loads the model it is given and
// runs synchronously with a progress callback; errors are thrown as
// embedlab::InputError with the engine's message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedlab/error.hpp"

namespace embedlab::app {

// The token embedding's covariance spectrum and what PCA costs at each rank.
struct SpectrumResult {
    std::vector<double> eigenvalues, explained; // descending; cumulative share at k = 1..d
    std::vector<double> params_at_rank, flops_at_rank;
    double original_params = 0; // V d
};
SpectrumResult embedding_spectrum(const std::string& model, const ProgressFn& progress);

// FLAT-LLM importance on a calibration text and IPRS allocations at remaining
// ratios 0.1, 0.15, .., 1.0.
struct AllocationResult {
    int64_t d_head = 0;
    std::vector<double> scores;
    struct Allocation {
        double remaining = 0;
        std::vector<double> w;
        std::vector<int64_t> ranks;
    };
    std::vector<Allocation> allocations;
    double calibration_seconds = 0;
};
AllocationResult importance_allocations(const std::string& model, const std::string& text, int64_t samples,
                                        int64_t seqlen, const ProgressFn& progress);

std::string default_sample_text();

} // namespace embedlab::app
