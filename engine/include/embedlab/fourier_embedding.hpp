// PETE Fourier token embedding, METHODS.md 4: fixed Fourier features of the
// normalised token id plus a small learned MLP, fitted post hoc to a trained table.
//
//   auto fit = embedlab::fit_fourier_embedding(table, {.mlp = FourierMlp::GeGLU, .steps = 2000});
//   fit.final_loss;                                   // full-table loss after training
//   model.set_token_embedding(std::make_shared<embedlab::FourierTokenEmbedding>(fit.params));
//
// Features, i = 0..d-1, x(p) = 2p/(V-1) - 1 (float64, then float32):
//   T_i(p) = sin((i/2 + 1) pi x) for even i, cos((i/2 + 1) pi x) for odd i.
// E(p) = T + MLP(T), then RMSNorm when enabled: E / sqrt(mean(E^2) + 1e-6) * norm.
// Stored tensors (weights are [out, in] as torch::nn::Linear, y = x W^T + b):
//   linear: w_in [d, d], b_in [d];                   MLP(T) = T w_in^T + b_in
//   geglu : w_in [2h, d], b_in [2h] (rows 0..h-1 gate, h..2h-1 value),
//           w_out [d, h], b_out [d], h = max(1, round(hidden_ratio d));
//           MLP(T) = (gelu(gate) * value) w_out^T + b_out, gelu the exact (erf) form
//   norm  : [d] (only with RMSNorm)
// No V x d table is ever kept: a lookup computes its rows, the tied head computes
// all V rows in blocks of 4096 at every call (the cost is in the fit record).
// Thread safety: the fit is reentrant (it uses its own generator, not torch's
// global one); the embedding is immutable.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/fourier_mlp.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

// T(p) for ids [..] int64 in [0, V) -> [.., d] float32 (computed in float64).
// InputError for V < 2 or d < 1.
torch::Tensor fourier_features(const torch::Tensor& ids, int64_t vocab, int64_t dim);

struct FourierParams {
    FourierMlp mlp = FourierMlp::Linear;
    int64_t vocab = 0, dim = 0;
    int64_t hidden = 0; // geglu h; 0 for linear
    bool norm = false;
    torch::Tensor w_in, b_in;   // see the layout above
    torch::Tensor w_out, b_out; // geglu only
    torch::Tensor norm_weight;  // [d], with norm only

    // The learned tensors that are defined (w_in, b_in, w_out, b_out, norm_weight):
    // what a fit, a training run or a fine-tune updates, detaches or hands to an optimiser.
    std::vector<torch::Tensor*> learned()
    {
        std::vector<torch::Tensor*> out;
        for (auto* t : {&w_in, &b_in, &w_out, &b_out, &norm_weight})
            if (t->defined())
                out.push_back(t);
        return out;
    }
    std::vector<torch::Tensor> learned_tensors() const // handles sharing the storage
    {
        std::vector<torch::Tensor> out;
        for (const auto* t : {&w_in, &b_in, &w_out, &b_out, &norm_weight})
            if (t->defined())
                out.push_back(*t);
        return out;
    }
};

struct FourierOptions {
    FourierMlp mlp = FourierMlp::Linear;
    double hidden_ratio = 0.25; // geglu: h = round(ratio d); 1/4 is the paper's small variant
    bool norm = false;          // RMSNorm (eps 1e-6, learned weight) after the residual
    std::string loss = "mse";   // "mse": mean squared error per value; "cosine": mean (1 - cos) per row
    int64_t steps = 1000;
    double lr = 1e-3;
    int64_t batch = 4096; // ids per step, drawn without replacement from a seeded shuffle
    double weight_decay = 0.01;
    uint64_t seed = 0;
};

struct FourierLossPoint {
    int64_t step = 0; // 1-based
    double loss = 0;  // batch loss at that step
};

struct FourierFit {
    FourierParams params;
    FourierOptions options;
    std::vector<FourierLossPoint> loss_curve; // every step
    double initial_loss = 0;                  // full table, before training
    double final_loss = 0;                    // full table, after training, in options.loss
    double final_mse = 0;                     // full table mean squared error (any loss)
    double seconds = 0;
};

// table [V, d] float32, V >= 2. Trains the MLP (and norm) with AdamW so that
// E(p) matches table[p] (METHODS 4, post-hoc use). progress(step, steps) after
// each step; returning false throws Cancelled. InputError for steps < 1, lr <= 0,
// batch < 1, weight_decay < 0, hidden_ratio <= 0, an unknown loss or non-finite rows.
FourierFit fit_fourier_embedding(const torch::Tensor& table, const FourierOptions& options,
                                 const ProgressFn& progress = {});

class FourierTokenEmbedding final : public TokenEmbedding {
public:
    // Checks every tensor against the layout above; InputError naming the tensor.
    explicit FourierTokenEmbedding(FourierParams params);
    int64_t vocab_size() const override { return p_.vocab; }
    int64_t dim() const override { return p_.dim; }
    torch::Tensor lookup(const torch::Tensor& ids) const override;
    // hidden [.., d] -> [.., V]; rows built 4096 at a time, never all at once
    // (linear without norm: (h + h W) T^T + h b, features only). Under autograd with
    // trainable parameters or hidden states (training), one product with all V rows.
    torch::Tensor project(const torch::Tensor& hidden) const override;
    // Every row through the MLP; undefined for linear without norm, whose head folds the
    // MLP into the hidden states and needs only the features.
    torch::Tensor rebuilt_rows() const override;
    std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const override; // onnx_export.hpp
    // The head as project(): linear without norm folds the MLP into the hidden states.
    std::string onnx_project(onnx::Graph& graph, const std::string& hidden) const override;
    // MLP (+ norm) values only: the features are computed, not stored.
    int64_t parameter_count() const override;
    std::string kind() const override { return "fourier"; }
    std::vector<std::pair<std::string, torch::Tensor>> stored_tensors() const override; // fourier.w_in ...
    const FourierParams& params() const { return p_; }
    // The MLP (and norm) as fresh leaves requiring grad: finetune's fourier-mlp mode.
    std::optional<TrainableCopy> trainable_shared_weights() const override;

    // The pieces of E for inspection (fourier-map): features [n, d] -> MLP(T) [n, d],
    // and T + MLP(T) (+ norm) = E.
    torch::Tensor mlp(const torch::Tensor& features) const;
    torch::Tensor rows_from_features(const torch::Tensor& features) const;
    // Estimated operations to build one row: 2 per multiply-add, 1 per sin/cos,
    // bias, residual, gelu or norm value.
    int64_t flops_per_row() const;

private:
    FourierParams p_;
};

} // namespace embedlab
