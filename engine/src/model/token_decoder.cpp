#include "model/token_decoder.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "embedlab/error.hpp"
#include "embedlab/text_format.hpp"
#include "model/half_products.hpp"

namespace embedlab::detail {

namespace {

bool usable_matrix(const torch::Tensor& t)
{
    return t.defined() && t.dim() == 2 && t.is_contiguous() &&
           (t.scalar_type() == torch::kFloat32 || is_half(t));
}

bool usable_vector(const torch::Tensor& t, int64_t size)
{
    return t.defined() && t.dim() == 1 && t.size(0) == size && t.is_contiguous() &&
           t.scalar_type() == torch::kFloat32;
}

// The weight `name`, or undefined.
torch::Tensor weight_or_none(const LanguageModel& model, const std::string& name)
{
    const auto it = model.weights().find(name);
    return it == model.weights().end() ? torch::Tensor() : it->second;
}

bool llama_covered(const ModelConfig& c, const LanguageModel& model)
{
    if (c.arch != Architecture::Llama || model.lora() || c.post_norm || c.parallel_residual ||
        c.sandwich_norms || c.qk_norm || c.attn_softcap > 0 || c.rope_local_theta > 0 ||
        c.learned_positions || c.projects_embedding() || !c.final_norm || !c.gated_mlp || c.mlp_bias ||
        (c.activation != "silu" && c.activation != "swish") || c.norm == NormKind::LayerNorm ||
        c.rotary_dims() != c.head_dim() || c.head_dim() % 2 != 0 || c.num_kv_heads <= 0 ||
        c.num_heads % c.num_kv_heads != 0)
        return false;
    for (int64_t l = 0; l < c.num_layers; ++l)
        if (c.layer_slides(l) || c.value_dim(l) != c.head_dim())
            return false;
    return true;
}

bool gpt2_covered(const ModelConfig& c, const LanguageModel& model)
{
    if (c.arch != Architecture::GPT2 || model.lora() || !model.position_embedding() ||
        (c.activation != "gelu_new" && c.activation != "gelu_pytorch_tanh" && c.activation != "gelu_fast" &&
         c.activation != "gelu"))
        return false;
    for (int64_t l = 0; l < c.num_layers; ++l)
        if (c.value_dim(l) != c.head_dim())
            return false;
    return true;
}

float silu(float v)
{
    return v / (1.f + std::exp(-v));
}

// torch::gelu's two forms.
float gelu(float v, bool erf_form)
{
    if (erf_form)
        return 0.5f * v * (1.f + std::erf(v * static_cast<float>(M_SQRT1_2)));
    constexpr float kBeta = 0.7978845608028654f; // sqrt(2 / pi)
    return 0.5f * v * (1.f + std::tanh(kBeta * (v + 0.044715f * v * v * v)));
}

void add_into(float* y, const float* b, int64_t n)
{
    for (int64_t i = 0; i < n; ++i)
        y[i] += b[i];
}

} // namespace

bool token_decoder_setting()
{
    static const bool enabled = [] {
        const char* value = std::getenv("EMBEDLAB_TOKEN_STEP");
        if (!value || !*value || std::string(value) == "loops")
            return true;
        if (std::string(value) == "torch")
            return false;
        throw InputError("EMBEDLAB_TOKEN_STEP is '" + printable(value) + "': expected loops or torch");
    }();
    return enabled;
}

std::unique_ptr<TokenDecoder> TokenDecoder::for_model(const LanguageModel& model)
{
    return model.config().arch == Architecture::GPT2 ? for_gpt2(model) : for_llama(model);
}

void TokenDecoder::allocate(int64_t q_width, int64_t kv_width)
{
    for (auto* buffer : {&x_, &a_, &o_})
        buffer->resize(static_cast<size_t>(d_));
    q_.resize(static_cast<size_t>(q_width));
    y_.resize(static_cast<size_t>(q_width));
    k_.resize(static_cast<size_t>(kv_width));
    v_.resize(static_cast<size_t>(kv_width));
    g_.resize(static_cast<size_t>(ffn_));
    u_.resize(static_cast<size_t>(ffn_));
}

std::unique_ptr<TokenDecoder> TokenDecoder::for_gpt2(const LanguageModel& model)
{
    const auto& c = model.config();
    if (!gpt2_covered(c, model))
        return nullptr;
    std::unique_ptr<TokenDecoder> t(new TokenDecoder(model));
    t->gpt2_ = true;
    t->gelu_erf_ = c.activation == "gelu";
    t->d_ = c.hidden_size;
    t->H_ = t->Hkv_ = c.num_heads;
    t->hd_ = c.head_dim();
    t->eps_ = static_cast<float>(c.norm_eps);
    t->scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(t->hd_)));
    const int64_t d = t->d_;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "h." + std::to_string(l) + ".";
        Layer layer;
        layer.input_norm = weight_or_none(model, p + "ln_1.weight");
        layer.input_norm_bias = weight_or_none(model, p + "ln_1.bias");
        layer.post_norm = weight_or_none(model, p + "ln_2.weight");
        layer.post_norm_bias = weight_or_none(model, p + "ln_2.bias");
        layer.qkv = weight_or_none(model, p + "attn.c_attn.weight");
        layer.qkv_bias = weight_or_none(model, p + "attn.c_attn.bias");
        layer.o = weight_or_none(model, p + "attn.c_proj.weight");
        layer.o_bias = weight_or_none(model, p + "attn.c_proj.bias");
        layer.up = weight_or_none(model, p + "mlp.c_fc.weight");
        layer.up_bias = weight_or_none(model, p + "mlp.c_fc.bias");
        layer.down = weight_or_none(model, p + "mlp.c_proj.weight");
        layer.down_bias = weight_or_none(model, p + "mlp.c_proj.bias");
        for (const auto* m : {&layer.qkv, &layer.o, &layer.up, &layer.down})
            if (!usable_matrix(*m)) // a GGUF's transposed views among them
                return nullptr;
        const int64_t ffn = layer.up.size(1);
        if (layer.qkv.sizes() != torch::IntArrayRef{d, 3 * d} ||
            layer.o.sizes() != torch::IntArrayRef{d, d} || layer.up.size(0) != d ||
            layer.down.sizes() != torch::IntArrayRef{ffn, d} || !usable_vector(layer.input_norm, d) ||
            !usable_vector(layer.input_norm_bias, d) || !usable_vector(layer.post_norm, d) ||
            !usable_vector(layer.post_norm_bias, d) || !usable_vector(layer.qkv_bias, 3 * d) ||
            !usable_vector(layer.o_bias, d) || !usable_vector(layer.up_bias, ffn) ||
            !usable_vector(layer.down_bias, d))
            return nullptr;
        t->ffn_ = std::max(t->ffn_, ffn);
        t->layers_.push_back(std::move(layer));
    }
    t->final_norm_ = weight_or_none(model, "ln_f.weight");
    t->final_norm_bias_ = weight_or_none(model, "ln_f.bias");
    if (!usable_vector(t->final_norm_, d) || !usable_vector(t->final_norm_bias_, d))
        return nullptr;
    t->allocate(3 * d, d);
    return t;
}

std::unique_ptr<TokenDecoder> TokenDecoder::for_llama(const LanguageModel& model)
{
    const auto& c = model.config();
    if (!llama_covered(c, model))
        return nullptr;
    std::unique_ptr<TokenDecoder> t(new TokenDecoder(model));
    t->d_ = c.hidden_size;
    t->H_ = c.num_heads;
    t->Hkv_ = c.num_kv_heads;
    t->hd_ = c.head_dim();
    t->eps_ = static_cast<float>(c.norm_eps);
    t->one_plus_norm_ = c.norm == NormKind::RMSOnePlus;
    t->scale_ =
        static_cast<float>(c.query_scale > 0 ? c.query_scale : 1.0 / std::sqrt(static_cast<double>(t->hd_)));
    t->embedding_scale_ = static_cast<float>(c.embedding_scale);
    const int64_t d = t->d_, qd = t->H_ * t->hd_, kvd = t->Hkv_ * t->hd_;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        Layer layer;
        layer.input_norm = weight_or_none(model, p + "input_layernorm.weight");
        layer.post_norm = weight_or_none(model, p + "post_attention_layernorm.weight");
        layer.q = weight_or_none(model, p + "self_attn.q_proj.weight");
        layer.k = weight_or_none(model, p + "self_attn.k_proj.weight");
        layer.v = weight_or_none(model, p + "self_attn.v_proj.weight");
        layer.o = weight_or_none(model, p + "self_attn.o_proj.weight");
        layer.q_bias = weight_or_none(model, p + "self_attn.q_proj.bias");
        layer.k_bias = weight_or_none(model, p + "self_attn.k_proj.bias");
        layer.v_bias = weight_or_none(model, p + "self_attn.v_proj.bias");
        layer.o_bias = weight_or_none(model, p + "self_attn.o_proj.bias");
        layer.gate = weight_or_none(model, p + "mlp.gate_proj.weight");
        layer.up = weight_or_none(model, p + "mlp.up_proj.weight");
        layer.down = weight_or_none(model, p + "mlp.down_proj.weight");
        for (const auto* m : {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down})
            if (!usable_matrix(*m))
                return nullptr;
        const int64_t ffn = layer.gate.size(0);
        if (layer.gate.size(1) != d || layer.q.sizes() != torch::IntArrayRef{qd, d} ||
            layer.k.sizes() != torch::IntArrayRef{kvd, d} || layer.v.sizes() != torch::IntArrayRef{kvd, d} ||
            layer.o.sizes() != torch::IntArrayRef{d, qd} || layer.up.sizes() != torch::IntArrayRef{ffn, d} ||
            layer.down.sizes() != torch::IntArrayRef{d, ffn} || !usable_vector(layer.input_norm, d) ||
            !usable_vector(layer.post_norm, d))
            return nullptr;
        for (const auto& [bias, size] : {std::pair{&layer.q_bias, qd}, std::pair{&layer.k_bias, kvd},
                                         std::pair{&layer.v_bias, kvd}, std::pair{&layer.o_bias, d}})
            if (bias->defined() && !usable_vector(*bias, size))
                return nullptr;
        t->ffn_ = std::max(t->ffn_, ffn);
        t->layers_.push_back(std::move(layer));
    }
    t->final_norm_ = weight_or_none(model, "model.norm.weight");
    if (!usable_vector(t->final_norm_, d))
        return nullptr;
    // The frequencies as llama_hidden's rope_table computes them (float32 throughout).
    const int64_t rd = t->hd_;
    auto inv_freq =
        (1.0 / torch::pow(c.rope_theta, torch::arange(0, rd, 2, torch::kLong).to(torch::kFloat32) / rd))
            .to(torch::kFloat32);
    if (!c.rope_freq_divisors.empty())
        inv_freq = inv_freq / torch::tensor(c.rope_freq_divisors, torch::kFloat64).to(torch::kFloat32);
    inv_freq = inv_freq.contiguous();
    t->inv_freq_.assign(inv_freq.data_ptr<float>(), inv_freq.data_ptr<float>() + inv_freq.numel());
    t->allocate(qd, kvd);
    return t;
}

// x * rsqrt(mean(x^2) + eps) * w (Gemma: * (1 + w)), the mean summed in double.
void TokenDecoder::norm(const float* x, const torch::Tensor& weight, float* out) const
{
    double sum = 0;
    for (int64_t i = 0; i < d_; ++i)
        sum += static_cast<double>(x[i]) * x[i];
    const float r = 1.f / std::sqrt(static_cast<float>(sum / static_cast<double>(d_)) + eps_);
    const float* w = weight.data_ptr<float>();
    for (int64_t i = 0; i < d_; ++i)
        out[i] = x[i] * r * (one_plus_norm_ ? w[i] + 1.f : w[i]);
}

// (x - mean) / sqrt(var + eps) * w + b, the moments summed in double.
void TokenDecoder::layer_norm(const float* x, const torch::Tensor& weight, const torch::Tensor& bias,
                              float* out) const
{
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < d_; ++i)
        sum += x[i];
    const double mean = sum / static_cast<double>(d_);
    for (int64_t i = 0; i < d_; ++i)
        squares += (x[i] - mean) * (x[i] - mean);
    const float r = 1.f / std::sqrt(static_cast<float>(squares / static_cast<double>(d_)) + eps_);
    const float m = static_cast<float>(mean);
    const float* w = weight.data_ptr<float>();
    const float* b = bias.data_ptr<float>();
    for (int64_t i = 0; i < d_; ++i)
        out[i] = (x[i] - m) * r * w[i] + b[i];
}

// Rotate-half RoPE of `count` heads in place at `position`.
void TokenDecoder::rope(float* heads, int64_t count, int64_t position) const
{
    const int64_t half = hd_ / 2;
    for (int64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(position) * inv_freq_[static_cast<size_t>(i)];
        const float c = std::cos(angle), s = std::sin(angle);
        for (int64_t h = 0; h < count; ++h) {
            float* r = heads + h * hd_;
            const float first = r[i], second = r[i + half];
            r[i] = first * c - second * s;
            r[i + half] = second * c + first * s;
        }
    }
}

// softmax(q k^T * scale) v for every query head over `length` cached positions.
void TokenDecoder::attend(const float* q, const torch::Tensor& keys, const torch::Tensor& values,
                          int64_t length, float* out)
{
    scores_.resize(static_cast<size_t>(length));
    const float* K = keys.data_ptr<float>();
    const float* V = values.data_ptr<float>();
    const int64_t k_head = keys.stride(1), v_head = values.stride(1), rep = H_ / Hkv_;
    for (int64_t h = 0; h < H_; ++h) {
        const float* qh = q + h * hd_;
        const float* Kh = K + (h / rep) * k_head;
        const float* Vh = V + (h / rep) * v_head;
        float top = -INFINITY;
        for (int64_t t = 0; t < length; ++t) {
            float s = 0.f;
            for (int64_t i = 0; i < hd_; ++i)
                s += qh[i] * Kh[t * hd_ + i];
            scores_[static_cast<size_t>(t)] = s * scale_;
            top = std::max(top, scores_[static_cast<size_t>(t)]);
        }
        float total = 0.f;
        for (auto& s : scores_)
            total += (s = std::exp(s - top));
        float* yh = out + h * hd_;
        std::fill(yh, yh + hd_, 0.f);
        for (int64_t t = 0; t < length; ++t) {
            const float p = scores_[static_cast<size_t>(t)] / total;
            for (int64_t i = 0; i < hd_; ++i)
                yh[i] += p * Vh[t * hd_ + i];
        }
    }
}

torch::Tensor TokenDecoder::step(int64_t id, KvCache& cache)
{
    c10::InferenceMode guard;
    const int64_t position = cache.length();
    if (position + 1 > model_.max_context())
        throw InputError("window of " + std::to_string(position + 1) +
                         " tokens exceeds the model's context of " + std::to_string(model_.max_context()) +
                         " positions");
    return gpt2_ ? step_gpt2(id, cache) : step_llama(id, cache);
}

torch::Tensor TokenDecoder::step_gpt2(int64_t id, KvCache& cache)
{
    const int64_t position = cache.length(), d = d_;
    const auto token = model_.token_embedding().lookup(torch::full({1, 1}, id, torch::kLong));
    const auto place = model_.position_embedding()->lookup(torch::full({1}, position, torch::kLong));
    const auto row =
        (token.reshape({d}).to(torch::kFloat32) + place.reshape({d}).to(torch::kFloat32)).contiguous();
    std::copy(row.data_ptr<float>(), row.data_ptr<float>() + d, x_.begin());
    for (size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        layer_norm(x_.data(), L.input_norm, L.input_norm_bias, a_.data());
        matrix_vector_columns(L.qkv, a_.data(), q_.data()); // q, k, v side by side
        add_into(q_.data(), L.qkv_bias.data_ptr<float>(), 3 * d);
        const auto [keys, values] =
            cache.append_position(static_cast<int64_t>(l), q_.data() + d, q_.data() + 2 * d, H_, hd_);
        attend(q_.data(), keys, values, position + 1, y_.data());
        matrix_vector_columns(L.o, y_.data(), o_.data());
        add_into(o_.data(), L.o_bias.data_ptr<float>(), d);
        add_into(x_.data(), o_.data(), d);
        layer_norm(x_.data(), L.post_norm, L.post_norm_bias, a_.data());
        const int64_t ffn = L.up.size(1);
        matrix_vector_columns(L.up, a_.data(), g_.data());
        const float* up_bias = L.up_bias.data_ptr<float>();
        for (int64_t i = 0; i < ffn; ++i)
            g_[static_cast<size_t>(i)] = gelu(g_[static_cast<size_t>(i)] + up_bias[i], gelu_erf_);
        matrix_vector_columns(L.down, g_.data(), o_.data());
        add_into(o_.data(), L.down_bias.data_ptr<float>(), d);
        add_into(x_.data(), o_.data(), d);
    }
    cache.advance(1);
    auto h = torch::empty({1, 1, d}, torch::kFloat32);
    layer_norm(x_.data(), final_norm_, final_norm_bias_, h.data_ptr<float>());
    return h;
}

torch::Tensor TokenDecoder::step_llama(int64_t id, KvCache& cache)
{
    const int64_t position = cache.length();
    const auto ids = torch::full({1, 1}, id, torch::kLong);
    const auto row = model_.token_embedding().lookup(ids).to(torch::kFloat32).contiguous();
    std::copy(row.data_ptr<float>(), row.data_ptr<float>() + d_, x_.begin());
    if (embedding_scale_ != 1.f)
        for (auto& v : x_)
            v *= embedding_scale_;
    const auto add_bias = [](std::vector<float>& y, const torch::Tensor& bias) {
        if (!bias.defined())
            return;
        const float* b = bias.data_ptr<float>();
        for (size_t i = 0; i < y.size(); ++i)
            y[i] += b[i];
    };
    for (size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        norm(x_.data(), L.input_norm, a_.data());
        matrix_vector(L.q, a_.data(), q_.data());
        matrix_vector(L.k, a_.data(), k_.data());
        matrix_vector(L.v, a_.data(), v_.data());
        add_bias(q_, L.q_bias);
        add_bias(k_, L.k_bias);
        add_bias(v_, L.v_bias);
        rope(q_.data(), H_, position);
        rope(k_.data(), Hkv_, position);
        const auto [keys, values] =
            cache.append_position(static_cast<int64_t>(l), k_.data(), v_.data(), Hkv_, hd_);
        attend(q_.data(), keys, values, position + 1, y_.data());
        matrix_vector(L.o, y_.data(), o_.data());
        add_bias(o_, L.o_bias);
        for (int64_t i = 0; i < d_; ++i)
            x_[static_cast<size_t>(i)] += o_[static_cast<size_t>(i)];
        norm(x_.data(), L.post_norm, a_.data());
        const int64_t ffn = L.gate.size(0);
        matrix_vector(L.gate, a_.data(), g_.data());
        matrix_vector(L.up, a_.data(), u_.data());
        for (int64_t i = 0; i < ffn; ++i)
            g_[static_cast<size_t>(i)] = silu(g_[static_cast<size_t>(i)]) * u_[static_cast<size_t>(i)];
        matrix_vector(L.down, g_.data(), o_.data());
        for (int64_t i = 0; i < d_; ++i)
            x_[static_cast<size_t>(i)] += o_[static_cast<size_t>(i)];
    }
    cache.advance(1);
    auto h = torch::empty({1, 1, d_}, torch::kFloat32);
    norm(x_.data(), final_norm_, h.data_ptr<float>());
    return h;
}

} // namespace embedlab::detail
