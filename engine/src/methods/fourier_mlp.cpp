#include "embedlab/fourier_mlp.hpp"

#include <algorithm>
#include <cmath>

#include "embedlab/error.hpp"
#include "embedlab/name_table.hpp"

namespace embedlab {

constexpr Named<FourierMlp> kFourierMlps[]{{FourierMlp::Linear, "linear"}, {FourierMlp::GeGLU, "geglu"}};

const char* fourier_mlp_name(FourierMlp mlp)
{
    return name_of(kFourierMlps, mlp);
}

FourierMlp parse_fourier_mlp(const std::string& name)
{
    return value_named(kFourierMlps, name, "unknown Fourier MLP '" + name + "' (use linear or geglu)");
}

std::optional<FourierMlp> parse_fourier_embedding(const std::string& name)
{
    constexpr std::string_view kFourier = "fourier";
    if (name == kFourier)
        return FourierMlp::Linear;
    if (!name.starts_with(kFourier) || name.size() <= kFourier.size() || name[kFourier.size()] != ':')
        return std::nullopt;
    const auto* row = row_with_name(kFourierMlps, std::string_view(name).substr(kFourier.size() + 1));
    return row ? std::optional<FourierMlp>(row->value) : std::nullopt;
}

std::string fourier_embedding_name(FourierMlp mlp)
{
    return std::string("fourier:") + fourier_mlp_name(mlp);
}

int64_t fourier_hidden_size(int64_t dim, double hidden_ratio)
{
    return std::max<int64_t>(1, std::llround(hidden_ratio * static_cast<double>(dim)));
}

} // namespace embedlab
