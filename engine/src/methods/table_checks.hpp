// Checks every method runs on the table it is given.
#pragma once

#include <cmath>
#include <string>

#include <torch/types.h>

#include "embedlab/error.hpp"

namespace embedlab::methods {

// table: contiguous float32 [V, d]. Scanned in place: isfinite() would allocate
// a V x d mask, and fresh pages are slow to fault in.
inline void check_finite_rows(const torch::Tensor& table)
{
    const int64_t V = table.size(0), d = table.size(1);
    const float* data = table.data_ptr<float>();
    int64_t bad_rows = 0, first_bad = -1;
    for (int64_t v = 0; v < V; ++v)
        for (int64_t j = 0; j < d; ++j)
            if (!std::isfinite(data[v * d + j])) {
                if (first_bad < 0)
                    first_bad = v;
                ++bad_rows;
                break;
            }
    if (bad_rows > 0)
        throw InputError("the embedding table has non-finite values (NaN or Inf) in " +
                         std::to_string(bad_rows) + " row(s), first row " + std::to_string(first_bad));
}

} // namespace embedlab::methods
