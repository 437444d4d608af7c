// The kNN searches of the LLE fit (neighbour_search.cpp) and the table helpers
// they share with partial_sparse.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "embedlab/partial_sparse.hpp"

namespace embedlab::methods {

// `table` as contiguous float32 [V, d]; InputError unless a non-empty matrix of finite rows.
torch::Tensor float_table(const torch::Tensor& table);
// Token ids as a 1-D int64 tensor.
torch::Tensor id_tensor(const std::vector<int64_t>& ids);
// InputError unless 1 <= k <= C (|V_C|).
void check_k_common(int64_t k, int64_t C);

// The search `options` asks for, timed; IVF also searches a seeded sample of rare
// rows exactly and reports recall@k. E float32 contiguous and finite, `common`
// ascending without duplicates (so the column order is the id order and a stable
// scan breaks ties by lower id).
NearestCommon nearest_common_search(const torch::Tensor& E, const std::vector<int64_t>& rare,
                                    const std::vector<int64_t>& common, int64_t k, const KnnOptions& options,
                                    const ProgressFn& progress);

} // namespace embedlab::methods
