// The one check every training loop makes after its optimiser step, and the loss
// summary every training record writes.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
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

// "initial_loss" and "final_loss" of a training record (0 for no steps).
inline void put_loss_summary(nlohmann::ordered_json& j, const std::vector<double>& losses)
{
    j["initial_loss"] = losses.empty() ? 0.0 : losses.front();
    j["final_loss"] = losses.empty() ? 0.0 : losses.back();
}

} // namespace embedlab::methods
