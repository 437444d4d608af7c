#include "embedlab/fourier_mlp.hpp"

#include <algorithm>
#include <cmath>

#include "embedlab/error.hpp"

namespace embedlab {

const char* fourier_mlp_name(FourierMlp mlp)
{
    return mlp == FourierMlp::Linear ? "linear" : "geglu";
}

FourierMlp parse_fourier_mlp(const std::string& name)
{
    if (name == "linear")
        return FourierMlp::Linear;
    if (name == "geglu")
        return FourierMlp::GeGLU;
    throw InputError("unknown Fourier MLP '" + name + "' (use linear or geglu)");
}

int64_t fourier_hidden_size(int64_t dim, double hidden_ratio)
{
    return std::max<int64_t>(1, std::llround(hidden_ratio * static_cast<double>(dim)));
}

} // namespace embedlab
