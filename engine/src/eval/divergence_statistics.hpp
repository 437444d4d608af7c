// llama.cpp's divergence statistics (eval.hpp) from a DivergenceResult's scored
// positions; shared by evaluate_divergence and evaluate_divergence_llamacpp.
// Thread safety: reentrant.
#pragma once

#include "embedlab/eval.hpp"

namespace embedlab::detail {

// Fills every statistic of `r` from r.positions (tokens included); InputError
// when there are no positions.
void fill_divergence_statistics(DivergenceResult& r);

} // namespace embedlab::detail
