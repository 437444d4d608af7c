// One generated token through a llama-family (llama, qwen2, SmolLM, Llama 3.2 ...) or GPT-2 decoder
// in plain loops over the weights, without libtorch's per-operation dispatch.
//
// Why: a token-by-token step of the torch forward is about 30 tensor operations a layer,
// each a few microseconds of dispatch and allocation whatever its size; on small models
// that is the whole step (tinyllama: 1.2-1.5 ms a token, where llama.cpp takes 0.3). Here
// the step is the matrix-vector products (half_kernels.hpp, split over the threads by
// decode_team.hpp), RMSNorm, RoPE, attention over the KvCache and SiLU, written once.
// Prompts (many rows) stay on the torch forward, which fills the same cache.
//
// Covered: the llama family with RMS (or Gemma's 1 + w) norms before attention and MLP,
// full-width rotate-half RoPE (with rope_scaling's divisors), grouped-query attention
// without soft-capping or sliding windows, optional q/k/v/o biases and a gated SiLU MLP
// without biases; and GPT-2 (LayerNorm, fused Conv1D q/k/v, learned positions, GELU). f32
// or f16/bf16 contiguous matrices, no LoRA. for_model() says no to anything else, and
// the caller uses the torch forward.
//
// Usage: if (auto d = TokenDecoder::for_model(model)) h = d->step(id, cache);
// Thread safety: step() writes only the cache and its own scratch: one thread per decoder.
#pragma once

#include <memory>
#include <vector>

#include "embedlab/model.hpp"

namespace embedlab::detail {

// Whether generation steps through TokenDecoder (the default, "loops") or the torch
// forward (EMBEDLAB_TOKEN_STEP=torch: for measuring one against the other); InputError
// for another value. Read once.
bool token_decoder_setting();

class TokenDecoder {
public:
    // nullptr when the model has a feature this decoder does not cover.
    static std::unique_ptr<TokenDecoder> for_model(const LanguageModel& model);

    // The final-normed hidden state [1, 1, d] after token `id` at position cache.length();
    // appends its keys and values to `cache` (which the torch forward may have filled)
    // and advances it, as LanguageModel::hidden_states(ids, cache) does.
    torch::Tensor step(int64_t id, KvCache& cache);

private:
    struct Layer {
        torch::Tensor input_norm, post_norm;             // [d] float32
        torch::Tensor input_norm_bias, post_norm_bias;   // LayerNorm's (GPT-2)
        torch::Tensor q, k, v, o;                        // [out, in]; GPT-2's o: Conv1D [in, out]
        torch::Tensor q_bias, k_bias, v_bias, o_bias;    // float32 or undefined
        torch::Tensor gate, up, down;                    // GPT-2's up and down: Conv1D [in, out]
        torch::Tensor qkv, qkv_bias, up_bias, down_bias; // GPT-2's c_attn [d, 3d] and MLP biases
    };
    explicit TokenDecoder(const LanguageModel& model) : model_(model) {}
    static std::unique_ptr<TokenDecoder> for_llama(const LanguageModel& model);
    static std::unique_ptr<TokenDecoder> for_gpt2(const LanguageModel& model);
    void allocate(int64_t q_width, int64_t kv_width);
    torch::Tensor step_llama(int64_t id, KvCache& cache);
    torch::Tensor step_gpt2(int64_t id, KvCache& cache);
    void norm(const float* x, const torch::Tensor& weight, float* out) const;
    void layer_norm(const float* x, const torch::Tensor& weight, const torch::Tensor& bias, float* out) const;
    void rope(float* heads, int64_t count, int64_t position) const;
    void attend(const float* q, const torch::Tensor& keys, const torch::Tensor& values, int64_t length,
                float* out);

    const LanguageModel& model_;
    std::vector<Layer> layers_;
    torch::Tensor final_norm_;
    std::vector<float> inv_freq_;   // [hd / 2], float32 as Hugging Face builds it
    torch::Tensor final_norm_bias_; // GPT-2's ln_f
    bool gpt2_ = false, gelu_erf_ = false;
    bool one_plus_norm_ = false;
    int64_t d_ = 0, H_ = 0, Hkv_ = 0, hd_ = 0, ffn_ = 0;
    float eps_ = 0, scale_ = 0, embedding_scale_ = 1;
    std::vector<float> x_, a_, q_, k_, v_, y_, o_, g_, u_, scores_;
};

} // namespace embedlab::detail
