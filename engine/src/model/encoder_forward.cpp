// The encoder forward pass (bert, distilbert) and its heads, as the Hugging Face
// modelling code computes them: embeddings (token + position + segment) then
// LayerNorm; per layer bidirectional attention and GELU MLP, each followed by its
// residual add and LayerNorm (post-LN).
#include <cmath>
#include <limits>

#include "embedlab/error.hpp"
#include "embedlab/lora.hpp"
#include "embedlab/model.hpp"
#include "model/activation.hpp"
#include "model/row_products.hpp"

namespace embedlab {

torch::Tensor LanguageModel::bert_hidden(const torch::Tensor& ids, const torch::Tensor& token_types,
                                         const torch::Tensor& attention_mask, ForwardObserver* observer) const
{
    const auto& c = config_;
    const int64_t B = ids.size(0), T = ids.size(1), d = c.hidden_size, H = c.num_heads, hd = c.head_dim();
    const double eps = c.norm_eps;
    auto layer_norm = [&](const torch::Tensor& x, const std::string& name) {
        return torch::layer_norm(x, {d}, w(name + ".weight"), w(name + ".bias"), eps);
    };
    auto x = embedding_->lookup(ids) + positions_->lookup(torch::arange(T, torch::kLong));
    if (c.type_vocab_size > 0) {
        const auto& types = w("embeddings.token_type_embeddings.weight");
        x = x + (token_types.defined() ? types.index_select(0, token_types.reshape({-1})).view({B, T, d})
                                       : types[0]);
    }
    x = layer_norm(x, "embeddings.LayerNorm");
    // Hugging Face's extended mask: (1 - mask) * finfo(float).min added to the scores.
    torch::Tensor score_bias;
    if (attention_mask.defined())
        score_bias = (1.0 - attention_mask.to(torch::kFloat32))
                         .mul_(std::numeric_limits<float>::lowest())
                         .view({B, 1, 1, T});
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "encoder.layer." + std::to_string(l) + ".";
        if (observer)
            observer->decoder_input(l, x);
        auto q = linear(x, p + "attention.self.query").view({B, T, H, hd}).transpose(1, 2);
        auto k = linear(x, p + "attention.self.key").view({B, T, H, hd}).transpose(1, 2);
        auto v = linear(x, p + "attention.self.value").view({B, T, H, hd});
        if (observer)
            observer->values(l, v);
        auto scores = torch::matmul(q, k.transpose(-2, -1)).mul_(scale);
        if (score_bias.defined())
            scores.add_(score_bias);
        auto y =
            torch::matmul(torch::softmax(scores, -1), v.transpose(1, 2)).transpose(1, 2).reshape({B, T, d});
        x = layer_norm(linear(y, p + "attention.output.dense") + x, p + "attention.output.LayerNorm");
        auto h = detail::activation(linear(x, p + "intermediate.dense"), c.activation);
        if (observer)
            observer->mlp_activations(l, h.reshape({B * T, h.size(-1)}));
        x = layer_norm(linear(h, p + "output.dense") + x, p + "output.LayerNorm");
        if (observer)
            observer->decoder_output(l, x);
    }
    return x;
}

torch::Tensor LanguageModel::checked_encoder_hidden(const torch::Tensor& ids,
                                                    const torch::Tensor& token_types,
                                                    const torch::Tensor& attention_mask,
                                                    ForwardObserver* observer) const
{
    if (!config_.is_encoder())
        throw InputError(config_.type_name() +
                         " is a decoder: it has no segment ids or attention mask input");
    auto same_shape = [&](const torch::Tensor& t, const char* what) {
        if (t.defined() && t.sizes() != ids.sizes())
            throw InputError(std::string(what) + " must have the shape of the token ids [batch, length]");
    };
    same_shape(token_types, "segment ids (token types)");
    same_shape(attention_mask, "the attention mask");
    if (token_types.defined() && token_types.numel()) {
        const int64_t lo = token_types.min().item<int64_t>(), hi = token_types.max().item<int64_t>();
        const int64_t rows = std::max<int64_t>(config_.type_vocab_size, 1);
        if (lo < 0 || hi >= rows)
            throw InputError("segment id " + std::to_string(lo < 0 ? lo : hi) + " is outside the model's " +
                             std::to_string(rows) + " segment" + (rows == 1 ? "" : "s") +
                             (config_.type_vocab_size == 0
                                  ? " (" + config_.type_name() + " has no segment rows)"
                                  : std::string()));
    }
    return checked_hidden(ids, observer, nullptr, token_types, attention_mask);
}

torch::Tensor LanguageModel::encoder_hidden_states(const torch::Tensor& ids, const torch::Tensor& token_types,
                                                   const torch::Tensor& attention_mask,
                                                   ForwardObserver* observer) const
{
    c10::InferenceMode guard;
    return checked_encoder_hidden(ids, token_types, attention_mask, observer);
}

torch::Tensor LanguageModel::mlm_transform(const torch::Tensor& hidden) const
{
    if (config_.encoder_head != EncoderHead::MaskedLM)
        throw InputError(config_.type_name() + " model without a masked-LM head (" +
                         (config_.encoder_head == EncoderHead::Classification ? "a sequence classifier"
                                                                              : "an encoder body") +
                         "): it gives no token logits");
    auto t = detail::activation(linear(hidden, "cls.predictions.transform.dense"), config_.activation);
    return torch::layer_norm(t, {config_.hidden_size}, w("cls.predictions.transform.LayerNorm.weight"),
                             w("cls.predictions.transform.LayerNorm.bias"), config_.norm_eps);
}

torch::Tensor LanguageModel::pooler_output(const torch::Tensor& hidden) const
{
    c10::InferenceMode guard;
    if (!config_.has_pooler)
        throw InputError(config_.type_name() + " model without a pooler (pooler.dense)");
    return torch::tanh(linear(hidden.select(1, 0), "pooler.dense"));
}

torch::Tensor LanguageModel::training_encoder_hidden_states(const torch::Tensor& ids,
                                                            const torch::Tensor& token_types,
                                                            const torch::Tensor& attention_mask) const
{
    return checked_encoder_hidden(ids, token_types, attention_mask, nullptr);
}

torch::Tensor LanguageModel::classify(const torch::Tensor& hidden) const
{
    c10::InferenceMode guard;
    return training_classify(hidden);
}

torch::Tensor LanguageModel::training_classify(const torch::Tensor& hidden) const
{
    if (config_.encoder_head != EncoderHead::Classification)
        throw InputError(config_.type_name() + " model without a sequence-classification head");
    if (hidden.dim() != 3 || hidden.size(-1) != config_.hidden_size)
        throw InputError("classify needs hidden states [batch, length, d]");
    const auto first = hidden.select(1, 0);
    const auto features = weights_.count("pre_classifier.weight")
                              ? torch::relu(linear(first, "pre_classifier")) // distilbert
                              : torch::tanh(linear(first, "pooler.dense"));  // bert
    return linear(features, "classifier");
}

} // namespace embedlab
