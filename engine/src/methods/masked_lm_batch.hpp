// One masked-LM training step's batch (train.hpp's --arch bert), exposed for the
// test of its masking statistics.
#pragma once

#include <random>
#include <vector>

#include <torch/types.h>

#include "embedlab/train.hpp"

namespace embedlab::detail {

// inputs [batch, seqlen + 2]: each window framed [CLS] .. [SEP]; labels the original id
// at each chosen position and -100 (ignored by cross_entropy) elsewhere. `windows`
// holds batch windows of seqlen + 1 ids (the first seqlen are used).
struct MaskedBatch {
    torch::Tensor inputs, labels;
};
MaskedBatch masked_lm_batch(const ScratchOptions& options, const std::vector<int64_t>& windows,
                            std::mt19937_64& rng);

} // namespace embedlab::detail
