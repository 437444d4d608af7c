// A non-linear 2-D layout of a table's rows: Barnes-Hut t-SNE (van der Maaten,
// "Accelerating t-SNE using tree-based algorithms", JMLR 2014) over a random
// sample of the rows, every other row placed at the mean of its nearest sampled
// rows. As the reference implementation: rows first reduced to their top
// `pca_dims` principal components; p_j|i over the 3·perplexity nearest neighbours
// with sigma_i found by binary search so that H(P_i) = ln(perplexity); P
// symmetrised; early exaggeration; momentum 0.5 then 0.8; per-coordinate gains
// (+0.2 when the gradient changes sign, x0.8 otherwise, at least 0.01).
// Deterministic for a seed.
//
//   embedlab::TsneOptions o{.perplexity = 30, .seed = 7};
//   auto r = embedlab::tsne_layout(rows.data(), n, d, o, progress);  // r.x[i], r.y[i]
//
// Errors (perplexity too large for the sample, NaN rows, bad options) are
// InputError with what to change; progress returning false throws Cancelled.
#pragma once

#include <cstdint>
#include <vector>

#include "embedlab/error.hpp"

namespace embedlab {

struct TsneOptions {
    double perplexity = 30;
    int iterations = 1000;
    uint64_t seed = 0;
    int64_t sample = 5000; // rows the t-SNE runs on; all when n <= sample
    double exaggeration = 12;
    int exaggeration_iterations = 250; // also when the momentum goes from 0.5 to 0.8
    double learning_rate = 0;          // 0: max(sample / exaggeration / 4, 50)
    double theta = 0.5;                // Barnes-Hut accuracy; 0: exact repulsion
    int64_t pca_dims = 50;             // rows reduced to this many components first (0: not)
    int placement_neighbours = 5;      // a row outside the sample: mean of this many sampled rows
};

struct TsneResult {
    std::vector<double> x, y;    // every row
    std::vector<int64_t> sample; // the rows the t-SNE ran on, ascending
    double kl = 0;               // KL(P || Q) on the sample at the end
    TsneOptions options;         // as run (learning_rate filled in)
};

// rows: n x d, row-major.
TsneResult tsne_layout(const float* rows, int64_t n, int64_t d, const TsneOptions& options,
                       const ProgressFn& progress = {});

// The calibrated conditional affinities p_j|i (for tests and diagnostics): row i's
// `k` nearest neighbours (squared Euclidean distance) and their probabilities,
// [n, k] each, with the precision beta_i = 1 / (2 sigma_i^2) found for the perplexity.
struct TsneAffinities {
    int64_t k = 0;
    std::vector<int64_t> neighbours;
    std::vector<double> p, beta;
};
TsneAffinities tsne_affinities(const float* rows, int64_t n, int64_t d, double perplexity);

} // namespace embedlab
