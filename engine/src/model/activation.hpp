// The MLP activations by their Hugging Face names (hf_config.cpp's check_activation
// admits only these), shared by the decoder and encoder forward passes. One more,
// "gelu_ggml_f16", no config file can name: llama.cpp's CPU GELU (ggml_vec_gelu_f32:
// the tanh form read from an F16 table, input and output rounded to F16), so that a
// parity test can put the whole difference from llama.cpp down to the GELU or not.
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
    if (name == "gelu_ggml_f16") {
        const auto x16 = x.to(torch::kHalf).to(x.scalar_type());
        const auto y16 = torch::gelu(x16, "tanh").to(torch::kHalf).to(x.scalar_type());
        return torch::where(x <= -10, torch::zeros_like(x), torch::where(x >= 10, x, y16));
    }
    if (name == "relu")
        return torch::relu(x);
    return torch::silu(x); // silu / swish
}

} // namespace embedlab::detail
