// Products with a weight matrix that stay fast for one row at a time (token-by-token
// decoding). A single row goes through a matrix-vector product, which streams the
// weight once; OpenBLAS's sgemm would first copy the whole weight into its panel
// layout, which for one row costs more than the product (generation on tinyllama
// spent 18% of its time in sgemm_incopy). Several rows keep the matrix product.
#pragma once

#include <torch/types.h>

namespace embedlab::detail {

inline bool single_row(const torch::Tensor& x)
{
    return x.dim() >= 1 && x.numel() == x.size(-1);
}

inline torch::Tensor with_last_dim(const torch::Tensor& y, const torch::Tensor& x)
{
    auto shape = x.sizes().vec();
    shape.back() = y.size(-1);
    return y.view(shape);
}

// x [.., in] W^T (+ bias) for W [out, in] (torch::linear's layout).
inline torch::Tensor times_transposed(const torch::Tensor& x, const torch::Tensor& W,
                                      const torch::Tensor& bias = {})
{
    if (!single_row(x))
        return bias.defined() ? torch::linear(x, W, bias) : torch::matmul(x, W.t());
    const auto row = x.reshape({-1});
    return with_last_dim(bias.defined() ? torch::addmv(bias, W, row) : torch::mv(W, row), x);
}

// bias + x W for W [in, out] (GPT-2's Conv1D layout); x [N, in].
inline torch::Tensor add_times(const torch::Tensor& bias, const torch::Tensor& x, const torch::Tensor& W)
{
    if (!single_row(x))
        return torch::addmm(bias, x, W);
    return with_last_dim(torch::addmv(bias, W.t(), x.reshape({-1})), x);
}

} // namespace embedlab::detail
