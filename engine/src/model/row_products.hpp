// Products with a weight matrix that stay fast for one row at a time (token-by-token
// decoding). A single row goes through a matrix-vector product, which streams the
// weight once; OpenBLAS's sgemm would first copy the whole weight into its panel
// layout, which for one row costs more than the product (generation on tinyllama
// spent 18% of its time in sgemm_incopy). A small weight (at most 2^18 values, 1 MB:
// cache-resident) is multiplied on the calling thread with Eigen: OpenBLAS would wake
// its other threads for it, and waking costs more than such a product (tinyllama's
// generation spent a third of its time in sched_yield and the kernel). Several rows
// keep the matrix product. Half-precision weights go to half_products.hpp, and so do
// larger float32 ones for one row (matrix_vector: split over the threads).
#pragma once

#include <Eigen/Core>
#include <torch/types.h>

#include "model/half_products.hpp"

namespace embedlab::detail {

constexpr int64_t kCallingThreadWeight = int64_t{1} << 18;

// bias + W x (or W^T x when `transposed`) for a small float32 W and a row x, on this thread.
inline torch::Tensor small_mv(const torch::Tensor& W, const torch::Tensor& x, const torch::Tensor& bias,
                              bool transposed)
{
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::Map<const RowMajor> w(W.data_ptr<float>(), W.size(0), W.size(1));
    const auto row = x.reshape({-1}).contiguous();
    const Eigen::Map<const Eigen::VectorXf> v(row.data_ptr<float>(), row.size(0));
    auto y = bias.defined() ? bias.to(torch::kFloat32).contiguous().clone()
                            : torch::zeros({transposed ? W.size(1) : W.size(0)}, torch::kFloat32);
    Eigen::Map<Eigen::VectorXf> out(y.data_ptr<float>(), y.size(0));
    if (transposed)
        out.noalias() += w.transpose() * v;
    else
        out.noalias() += w * v;
    return y;
}

// Float32 operands our own loops may read as raw memory: never where autograd records
// (fine-tuning's training_logits).
inline bool raw_float32(const torch::Tensor& W, const torch::Tensor& x, const torch::Tensor& bias)
{
    return W.dim() == 2 && W.is_contiguous() && W.scalar_type() == torch::kFloat32 &&
           x.scalar_type() == torch::kFloat32 && !W.requires_grad() && !x.requires_grad() &&
           !(bias.defined() && (bias.requires_grad() || bias.scalar_type() != torch::kFloat32));
}

inline bool on_calling_thread(const torch::Tensor& W, const torch::Tensor& x, const torch::Tensor& bias)
{
    return W.numel() <= kCallingThreadWeight && raw_float32(W, x, bias);
}

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
    if (is_half(W)) // an f16/bf16 model's weights kept as stored (generation)
        return half_times_transposed(x, W, bias);
    if (!single_row(x))
        return bias.defined() ? torch::linear(x, W, bias) : torch::matmul(x, W.t());
    if (on_calling_thread(W, x, bias))
        return with_last_dim(small_mv(W, x, bias, false), x);
    const auto row = x.reshape({-1});
    // A larger weight for one row: split over decode_team.hpp's spinning workers
    // (matrix_vector) rather than OpenBLAS's sgemv, whose idle threads then yield for
    // milliseconds on the cores the next products need (tinyllama's 32,000-row head).
    if (raw_float32(W, x, bias)) {
        const auto contiguous_row = row.contiguous();
        auto y = torch::empty({W.size(0)}, torch::kFloat32);
        matrix_vector(W, contiguous_row.data_ptr<float>(), y.data_ptr<float>());
        return with_last_dim(bias.defined() ? y.add_(bias) : y, x);
    }
    return with_last_dim(bias.defined() ? torch::addmv(bias, W, row) : torch::mv(W, row), x);
}

// bias + x W for W [in, out] (GPT-2's Conv1D layout); x [N, in].
inline torch::Tensor add_times(const torch::Tensor& bias, const torch::Tensor& x, const torch::Tensor& W)
{
    if (is_half(W))
        return half_add_times(bias, x, W);
    if (!single_row(x))
        return torch::addmm(bias, x, W);
    if (on_calling_thread(W, x, bias))
        return with_last_dim(small_mv(W, x, bias, true), x);
    return with_last_dim(torch::addmv(bias, W.t(), x.reshape({-1})), x);
}

} // namespace embedlab::detail
