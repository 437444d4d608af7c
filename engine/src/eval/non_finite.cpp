// The refusal of a model that computes NaN or infinity (non_finite.hpp).
#include "embedlab/non_finite.hpp"

#include <cmath>

#include <torch/types.h>

namespace embedlab {

namespace {

// "nan", "inf" or "-inf" (std::to_string gives "-nan" for some NaNs), else the number.
std::string value_text(double v)
{
    if (std::isnan(v))
        return "nan";
    if (std::isinf(v))
        return v > 0 ? "inf" : "-inf";
    return std::to_string(v);
}

} // namespace

void throw_non_finite(const std::string& who, const std::string& gave, const std::string& refusal)
{
    throw NonFiniteError(who + "'s forward pass gave " + gave +
                         ": its weights or config values (a rotary base, norm epsilon or scaling factor far "
                         "out of the usual range) overflow; " +
                         refusal + " for a model that computes NaN or infinity");
}

bool all_finite(const at::Tensor& values)
{
    return torch::isfinite(values).all().item<bool>();
}

void require_finite(const at::Tensor& values, const std::string& who, const std::string& gave,
                    const std::string& refusal)
{
    if (all_finite(values))
        return;
    const auto flat = values.reshape({-1});
    const auto first = (~torch::isfinite(flat)).nonzero()[0][0].item<int64_t>();
    throw_non_finite(who, gave + " (" + value_text(flat[first].item<double>()) + ")", refusal);
}

void require_finite(double value, const std::string& who, const std::string& gave, const std::string& refusal)
{
    if (!std::isfinite(value))
        throw_non_finite(who, gave + " (" + value_text(value) + ")", refusal);
}

void require_finite_rows(const at::Tensor& rows, int64_t first_number, const std::string& who,
                         const std::string& gave, const std::string& refusal)
{
    if (all_finite(rows))
        return;
    const auto row =
        (~torch::isfinite(rows.reshape({rows.size(0), -1}))).any(1).nonzero()[0][0].item<int64_t>();
    require_finite(rows[row], who, gave + " " + std::to_string(first_number + row), refusal);
}

} // namespace embedlab
