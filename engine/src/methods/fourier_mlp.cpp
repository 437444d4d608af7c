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

int64_t fourier_hidden_size(int64_t dim, double hidden_ratio)
{
    return std::max<int64_t>(1, std::llround(hidden_ratio * static_cast<double>(dim)));
}

} // namespace embedlab
