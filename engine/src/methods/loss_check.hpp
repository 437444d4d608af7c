// The one check every training loop makes after its optimiser step.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <torch/types.h>

#include "embedlab/error.hpp"

namespace embedlab::methods {

// The step's loss as a number; InputError "<what>: the loss became nan at step N;
// lower the learning rate (--lr)" when it is not finite, so a diverging run stops
// with a hint instead of training on NaN.
inline double finite_loss(const torch::Tensor& loss, const char* what, int64_t step)
{
    const double value = loss.item<double>();
    if (!std::isfinite(value))
        throw InputError(std::string(what) + ": the loss became " + std::to_string(value) + " at step " +
                         std::to_string(step) + "; lower the learning rate (--lr)");
    return value;
}

} // namespace embedlab::methods
