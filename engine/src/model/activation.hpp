// The MLP activations by their Hugging Face names (hf_config.cpp's check_activation
// admits only these), shared by the decoder and encoder forward passes.
#pragma once

#include <string>

#include <torch/types.h>

namespace embedlab::detail {

inline torch::Tensor activation(const torch::Tensor& x, const std::string& name)
{
    if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast")
        return torch::gelu(x, "tanh");
    if (name == "gelu") // the erf form (bert, distilbert, gpt_neox)
        return torch::gelu(x);
    if (name == "relu")
        return torch::relu(x);
    return torch::silu(x); // silu / swish
}

} // namespace embedlab::detail
