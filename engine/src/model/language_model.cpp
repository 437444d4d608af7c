#include <algorithm>
#include <cmath>
#include <tuple>

#include <unistd.h>

#include "embedlab/error.hpp"
#include "embedlab/lora.hpp"
#include "embedlab/model.hpp"
#include "model/activation.hpp"
#include "model/row_products.hpp"
#include "model/shape_check.hpp"

namespace embedlab {

namespace {

// [Tq, Tk] boolean mask, true where a query may not look: the Tq queries sit at
// the last positions Tk - Tq .. Tk - 1 (earlier ones come from a KV cache); future
// positions are masked, and with a sliding window of w, positions w or more behind.
// Undefined when nothing is masked (one query, no window reaching back).
torch::Tensor attention_mask(int64_t Tq, int64_t Tk, int64_t window)
{
    const bool window_bites = window > 0 && window < Tk;
    if (Tq == 1 && !window_bites)
        return {};
    const auto query = torch::arange(Tk - Tq, Tk, torch::kLong).unsqueeze(1);
    const auto key = torch::arange(Tk, torch::kLong).unsqueeze(0);
    auto mask = key.gt(query);
    if (window_bites)
        mask = mask.logical_or(key.le(query - window));
    return mask;
}

// softmax(q k^T * scale + mask) v for q [B, H, Tq, hd], k/v [B, Hkv, Tk, hd]: scores
// soft-capped when `softcap` > 0 (Gemma 2), masked causally and to the window when
// it slides. Grouped-query attention (Hkv < H): KV head j serves query heads
// j*rep .. j*rep + rep - 1, read as one [rep * Tq] block of queries, so k and v are
// never copied per query head.
torch::Tensor decoder_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                double scale, double softcap, int64_t window)
{
    const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Hkv = k.size(1), rep = H / Hkv;
    auto scores = torch::matmul(q.reshape({B, Hkv, rep * Tq, q.size(3)}), k.transpose(-2, -1)).mul_(scale);
    if (softcap > 0)
        scores = torch::tanh(scores / softcap) * softcap;
    if (auto mask = attention_mask(Tq, k.size(2), window); mask.defined())
        scores.masked_fill_(rep > 1 ? mask.repeat({rep, 1}) : mask, -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1), v).view({B, H, Tq, v.size(3)});
}

// HF LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * w, in float32.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps)
{
    return x * torch::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
}

torch::Tensor rotate_half(const torch::Tensor& x)
{
    const int64_t h = x.size(-1) / 2;
    return torch::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
}

} // namespace

void KvCache::clear()
{
    keys_.clear();
    values_.clear();
    length_ = 0;
}

std::pair<torch::Tensor, torch::Tensor> KvCache::append(int64_t layer, const torch::Tensor& k,
                                                        const torch::Tensor& v)
{
    if (static_cast<int64_t>(keys_.size()) <= layer) {
        keys_.resize(static_cast<size_t>(layer) + 1);
        values_.resize(static_cast<size_t>(layer) + 1);
    }
    auto& keys = keys_[static_cast<size_t>(layer)];
    auto& values = values_[static_cast<size_t>(layer)];
    const int64_t T = k.size(2), needed = length_ + T;
    if (!keys.defined() || keys.size(2) < needed) { // grow by doubling: amortised copies
        const int64_t capacity = std::max<int64_t>({64, needed, keys.defined() ? 2 * keys.size(2) : 0});
        auto grown_keys = torch::empty({k.size(0), k.size(1), capacity, k.size(3)}, k.options());
        auto grown_values = torch::empty({v.size(0), v.size(1), capacity, v.size(3)}, v.options());
        if (keys.defined()) {
            grown_keys.narrow(2, 0, length_).copy_(keys.narrow(2, 0, length_));
            grown_values.narrow(2, 0, length_).copy_(values.narrow(2, 0, length_));
        }
        keys = std::move(grown_keys);
        values = std::move(grown_values);
    }
    keys.narrow(2, length_, T).copy_(k);
    values.narrow(2, length_, T).copy_(v);
    return {keys.narrow(2, 0, needed), values.narrow(2, 0, needed)};
}

std::pair<const torch::Tensor&, const torch::Tensor&>
KvCache::append_position(int64_t layer, const float* k, const float* v, int64_t heads, int64_t dim)
{
    const auto fits = [&](const torch::Tensor& t) {
        return t.defined() && t.scalar_type() == torch::kFloat32 && t.is_contiguous() && t.size(0) == 1 &&
               t.size(1) == heads && t.size(2) > length_ && t.size(3) == dim;
    };
    const auto at = static_cast<size_t>(layer);
    if (at >= keys_.size() || !fits(keys_[at]) || !fits(values_[at])) { // the first, or it grows
        append(layer, torch::from_blob(const_cast<float*>(k), {1, heads, 1, dim}),
               torch::from_blob(const_cast<float*>(v), {1, heads, 1, dim}));
        return {keys_[at], values_[at]};
    }
    const int64_t capacity = keys_[at].size(2);
    float* keys = keys_[at].data_ptr<float>();
    float* values = values_[at].data_ptr<float>();
    for (int64_t h = 0; h < heads; ++h) {
        std::copy(k + h * dim, k + (h + 1) * dim, keys + (h * capacity + length_) * dim);
        std::copy(v + h * dim, v + (h + 1) * dim, values + (h * capacity + length_) * dim);
    }
    return {keys_[at], values_[at]};
}

LanguageModel::LanguageModel(ModelConfig config, WeightMap weights, const std::string& label)
    : config_(std::move(config)), weights_(std::move(weights))
{
    detail::check_weights(config_, weights_, label);
    embedding_ = std::make_shared<DenseTokenEmbedding>(weights_.at(token_table_name(config_.arch)));
    if (const char* table = position_table_name(config_.arch))
        positions_ = std::make_shared<DenseTokenEmbedding>(weights_.at(table));
}

LanguageModel::LanguageModel(ModelConfig config, WeightMap weights,
                             std::shared_ptr<const TokenEmbedding> embedding, const std::string& label,
                             std::shared_ptr<const TokenEmbedding> positions)
    : config_(std::move(config)), weights_(std::move(weights))
{
    detail::check_weights(config_, weights_, label, /*embedding_stored=*/false);
    set_token_embedding(std::move(embedding));
    if (const char* table = position_table_name(config_.arch)) {
        if (positions)
            set_position_embedding(std::move(positions));
        else if (weights_.count(table))
            positions_ = std::make_shared<DenseTokenEmbedding>(weights_.at(table));
        else
            throw InputError(label + ": missing tensor '" + table + "' (or compressed position factors)");
    } else if (positions) {
        throw InputError(label + ": llama models have no learned position table to replace");
    }
}

void LanguageModel::set_position_embedding(std::shared_ptr<const TokenEmbedding> positions)
{
    if (!position_table_name(config_.arch))
        throw InputError("only gpt2 and encoder models have a learned position table");
    if (positions->vocab_size() != config_.max_positions || positions->dim() != config_.hidden_size)
        throw InputError("position embedding of shape [" + std::to_string(positions->vocab_size()) + ", " +
                         std::to_string(positions->dim()) + "] does not fit a model with " +
                         std::to_string(config_.max_positions) +
                         " positions and d=" + std::to_string(config_.hidden_size));
    positions_ = std::move(positions);
}

void LanguageModel::set_token_embedding(std::shared_ptr<const TokenEmbedding> embedding)
{
    if (embedding->vocab_size() != config_.vocab_size || embedding->dim() != config_.embedding_dim())
        throw InputError("token embedding of shape [" + std::to_string(embedding->vocab_size()) + ", " +
                         std::to_string(embedding->dim()) +
                         "] does not fit a model with V=" + std::to_string(config_.vocab_size) +
                         ", d=" + std::to_string(config_.embedding_dim()));
    embedding_ = std::move(embedding);
}

torch::Tensor LanguageModel::linear(const torch::Tensor& x, const std::string& name) const
{
    const auto bias = weights_.find(name + ".bias");
    auto y = detail::times_transposed(x, w(name + ".weight"),
                                      bias == weights_.end() ? torch::Tensor() : bias->second);
    return adapted(y, x, name);
}

const torch::Tensor& LanguageModel::w(const std::string& name) const
{
    return weights_.at(name);
}

void LanguageModel::set_lora(std::shared_ptr<const LoraAdapters> adapters)
{
    lora_ = std::move(adapters);
}

void LanguageModel::set_weight(const std::string& name, torch::Tensor value)
{
    const auto it = weights_.find(name);
    if (it == weights_.end() || it->second.sizes() != value.sizes())
        throw InputError("set_weight: '" + name + "' is not a weight of that shape");
    it->second = std::move(value);
}

void LanguageModel::drop_dense_token_table()
{
    if (dense_table(embedding_.get()))
        return;
    weights_.erase(token_table_name(config_.arch));
}

torch::Tensor LanguageModel::adapted(torch::Tensor y, const torch::Tensor& x, const std::string& target) const
{
    if (!lora_)
        return y;
    const auto it = lora_->adapters.find(target);
    if (it == lora_->adapters.end())
        return y;
    const auto& a = it->second;
    return y + torch::matmul(torch::matmul(x, a.A.t()), a.B.t()) * lora_->scale();
}

int64_t LanguageModel::max_context() const
{
    // RoPE models too: beyond the trained context the numbers mean nothing, and
    // a window of 100,000 tokens asks for tens of GB of attention scores.
    return config_.max_positions > 0 ? config_.max_positions : INT64_MAX;
}

torch::Tensor LanguageModel::gpt2_hidden(const torch::Tensor& ids, ForwardObserver* observer,
                                         KvCache* cache) const
{
    const int64_t B = ids.size(0), T = ids.size(1), d = config_.hidden_size;
    const int64_t H = config_.num_heads, hd = config_.head_dim();
    const int64_t start = cache ? cache->length() : 0;
    const double eps = config_.norm_eps;
    auto x = embedding_->lookup(ids) + positions_->lookup(torch::arange(start, start + T, torch::kLong));
    for (int64_t l = 0; l < config_.num_layers; ++l) {
        const std::string p = "h." + std::to_string(l) + ".";
        const int64_t vd = config_.value_dim(l);
        if (observer)
            observer->decoder_input(l, x);
        auto a = torch::layer_norm(x, {d}, w(p + "ln_1.weight"), w(p + "ln_1.bias"), eps);
        // Conv1D weights are [in, out]: y = x W + b. Columns: q, k, then v (H x vd).
        const auto a2 = a.reshape({B * T, d});
        auto qkv = detail::add_times(w(p + "attn.c_attn.bias"), a2, w(p + "attn.c_attn.weight"));
        auto q2 = qkv.narrow(1, 0, d), k2 = qkv.narrow(1, d, d), v2 = qkv.narrow(1, 2 * d, H * vd);
        if (lora_) {
            q2 = adapted(q2, a2, p + "attn.q");
            k2 = adapted(k2, a2, p + "attn.k");
            v2 = adapted(v2, a2, p + "attn.v");
        }
        auto q = q2.view({B, T, H, hd}).transpose(1, 2);
        auto k = k2.view({B, T, H, hd}).transpose(1, 2);
        auto v = v2.view({B, T, H, vd});
        if (observer)
            observer->values(l, v);
        auto vt = v.transpose(1, 2);
        if (cache)
            std::tie(k, vt) = cache->append(l, k, vt);
        const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
        auto y = decoder_attention(q, k, vt, scale, 0.0, 0).transpose(1, 2).reshape({B * T, H * vd});
        x = x + adapted(detail::add_times(w(p + "attn.c_proj.bias"), y, w(p + "attn.c_proj.weight")), y,
                        p + "attn.c_proj")
                    .view({B, T, d});
        auto m = torch::layer_norm(x, {d}, w(p + "ln_2.weight"), w(p + "ln_2.bias"), eps);
        const auto m2 = m.reshape({B * T, d});
        auto h = detail::activation(
            adapted(detail::add_times(w(p + "mlp.c_fc.bias"), m2, w(p + "mlp.c_fc.weight")), m2,
                    p + "mlp.c_fc"),
            config_.activation);
        if (observer)
            observer->mlp_activations(l, h);
        x = x + adapted(detail::add_times(w(p + "mlp.c_proj.bias"), h, w(p + "mlp.c_proj.weight")), h,
                        p + "mlp.c_proj")
                    .view({B, T, d});
        if (observer)
            observer->decoder_output(l, x);
    }
    if (cache)
        cache->advance(T);
    return torch::layer_norm(x, {d}, w("ln_f.weight"), w("ln_f.bias"), eps);
}

torch::Tensor LanguageModel::norm(const torch::Tensor& x, const std::string& name) const
{
    const double eps = config_.norm_eps;
    const auto& weight = w(name + ".weight");
    switch (config_.norm) {
    case NormKind::RMSOnePlus: // GemmaRMSNorm: (1 + w), in float32
        return x * torch::rsqrt(x.pow(2).mean(-1, true) + eps) * (weight + 1.0);
    case NormKind::LayerNorm:
        return torch::layer_norm(x, {x.size(-1)}, weight, w(name + ".bias"), eps);
    case NormKind::RMS:
        break;
    }
    return rms_norm(x, weight, eps);
}

torch::Tensor LanguageModel::llama_hidden(const torch::Tensor& ids, ForwardObserver* observer,
                                          KvCache* cache) const
{
    const auto& c = config_;
    const int64_t B = ids.size(0), T = ids.size(1);
    const int64_t start = cache ? cache->length() : 0;
    const int64_t H = c.num_heads, Hkv = c.num_kv_heads, hd = c.head_dim(), rd = c.rotary_dims();
    const double scale = c.query_scale > 0 ? c.query_scale : 1.0 / std::sqrt(static_cast<double>(hd));

    // RoPE tables as Hugging Face builds them (float32 inv_freq, rotate-half
    // layout), over the leading `rd` dims of a head; rope_scaling divides the
    // frequencies. Gemma 3's sliding layers have a table of their own (another
    // base, never scaled).
    auto rope_table = [&](double theta, bool scaled) {
        auto inv_freq =
            1.0 / torch::pow(theta, torch::arange(0, rd, 2, torch::kLong).to(torch::kFloat32) / rd);
        inv_freq = inv_freq.to(torch::kFloat32);
        if (scaled && !c.rope_freq_divisors.empty())
            inv_freq = inv_freq / torch::tensor(c.rope_freq_divisors, torch::kFloat64).to(torch::kFloat32);
        auto freqs =
            torch::outer(torch::arange(start, start + T, torch::kLong).to(torch::kFloat32), inv_freq);
        auto angles = torch::cat({freqs, freqs}, -1); // [T, rd]
        return std::pair{angles.cos(), angles.sin()};
    };
    const auto global_rope = rope_table(c.rope_theta, true);
    const auto local_rope = c.rope_local_theta > 0 ? rope_table(c.rope_local_theta, false) : global_rope;
    auto rope = [&](const torch::Tensor& t, const std::pair<torch::Tensor, torch::Tensor>& table) {
        const auto& [cos, sin] = table;
        if (rd == 0) // learned positions (OPT)
            return t;
        if (rd == hd)
            return t * cos + rotate_half(t) * sin;
        const auto r = t.narrow(-1, 0, rd);
        return torch::cat({r * cos + rotate_half(r) * sin, t.narrow(-1, rd, hd - rd)}, -1);
    };

    auto x = embedding_->lookup(ids);
    if (c.embedding_scale != 1.0)
        x = x * c.embedding_scale;
    if (c.projects_embedding()) // OPT-350m: the table's width to d
        x = detail::times_transposed(x, w("model.project_in.weight"));
    if (c.learned_positions)
        x = x + w("model.embed_positions.weight").narrow(0, c.position_offset + start, T);
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const int64_t vd = c.value_dim(l);
        if (observer)
            observer->decoder_input(l, x);
        // Post-LayerNorm (OPT-350m): attention reads x itself, and each norm follows its add.
        auto a = c.post_norm ? x : norm(x, p + "input_layernorm");
        auto proj = [&](const torch::Tensor& in, const std::string& name) { return linear(in, p + name); };
        auto q = proj(a, "self_attn.q_proj").view({B, T, H, hd});
        auto k = proj(a, "self_attn.k_proj").view({B, T, Hkv, hd});
        auto v = proj(a, "self_attn.v_proj").view({B, T, Hkv, vd});
        if (c.qk_norm) {
            q = norm(q, p + "self_attn.q_norm");
            k = norm(k, p + "self_attn.k_norm");
        }
        q = q.transpose(1, 2);
        k = k.transpose(1, 2);
        if (observer)
            observer->values(l, v);
        v = v.transpose(1, 2);
        const auto& table = c.layer_slides(l) ? local_rope : global_rope;
        q = rope(q, table);
        k = rope(k, table);
        if (cache)
            std::tie(k, v) = cache->append(l, k, v);
        const int64_t window = c.layer_slides(l) ? c.sliding_window : 0;
        auto y =
            decoder_attention(q, k, v, scale, c.attn_softcap, window).transpose(1, 2).reshape({B, T, H * vd});
        auto attn_out = proj(y, "self_attn.o_proj");
        if (c.sandwich_norms)
            attn_out = norm(attn_out, p + "post_attention_layernorm");
        // Parallel residual (gpt_neox): the MLP reads the layer's input, not x + attention.
        auto mlp_in = c.parallel_residual ? x : x + attn_out;
        if (c.post_norm)
            mlp_in = norm(mlp_in, p + "input_layernorm");
        auto m = c.post_norm ? mlp_in
                             : norm(mlp_in, p + (c.sandwich_norms ? "pre_feedforward_layernorm"
                                                                  : "post_attention_layernorm"));
        auto act = c.gated_mlp
                       ? detail::activation(proj(m, "mlp.gate_proj"), c.activation) * proj(m, "mlp.up_proj")
                       : detail::activation(proj(m, "mlp.up_proj"), c.activation);
        if (observer)
            observer->mlp_activations(l, act.reshape({B * T, act.size(-1)}));
        auto mlp_out = proj(act, "mlp.down_proj");
        if (c.sandwich_norms)
            mlp_out = norm(mlp_out, p + "post_feedforward_layernorm");
        x = mlp_in + mlp_out;
        if (c.parallel_residual)
            x = x + attn_out;
        if (c.post_norm)
            x = norm(x, p + "post_attention_layernorm");
        if (observer)
            observer->decoder_output(l, x);
    }
    if (cache)
        cache->advance(T);
    if (c.final_norm)
        x = norm(x, "model.norm");
    if (c.projects_embedding()) // back to the table's width for the head
        x = detail::times_transposed(x, w("model.project_out.weight"));
    return x;
}

torch::Tensor LanguageModel::hidden_states(const torch::Tensor& ids, ForwardObserver* observer) const
{
    c10::InferenceMode guard;
    return checked_hidden(ids, observer);
}

torch::Tensor LanguageModel::hidden_states(const torch::Tensor& ids, KvCache& cache) const
{
    c10::InferenceMode guard;
    return checked_hidden(ids, nullptr, &cache);
}

torch::Tensor LanguageModel::checked_hidden(const torch::Tensor& ids, ForwardObserver* observer,
                                            KvCache* cache, const torch::Tensor& token_types,
                                            const torch::Tensor& attention_mask) const
{
    if (cache && config_.is_encoder())
        throw InputError(config_.type_name() +
                         " is an encoder: it reads a whole input at once, not a cached prefix");
    if (ids.dim() != 2)
        throw InputError("token ids must be a [batch, length] tensor");
    const int64_t cached = cache ? cache->length() : 0;
    if (cached + ids.size(1) > max_context())
        throw InputError("window of " + std::to_string(cached + ids.size(1)) +
                         " tokens exceeds the model's context of " + std::to_string(max_context()) +
                         " positions (" +
                         (config_.arch != Architecture::Llama || config_.learned_positions
                              ? "learned positions"
                              : "max_position_embeddings / context_length") +
                         "); use a smaller --ctx");
    // Attention scores and their softmax, [B, H, T, T] float32 each: refuse before
    // allocating what the machine does not have.
    const double score_bytes = 2.0 * 4.0 * static_cast<double>(ids.size(0)) *
                               static_cast<double>(config_.num_heads) * static_cast<double>(ids.size(1)) *
                               static_cast<double>(cached + ids.size(1));
    const double physical =
        static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
    if (physical > 0 && score_bytes > 0.8 * physical)
        throw InputError("a batch of " + std::to_string(ids.size(0)) + " windows of " +
                         std::to_string(ids.size(1)) + " tokens needs about " +
                         std::to_string(static_cast<int64_t>(score_bytes / 1e9)) +
                         " GB for attention scores; this machine has " +
                         std::to_string(static_cast<int64_t>(physical / 1e9)) + " GB: use a smaller --ctx");
    const auto max_id = ids.numel() ? ids.max().item<int64_t>() : 0;
    const auto min_id = ids.numel() ? ids.min().item<int64_t>() : 0;
    if (min_id < 0 || max_id >= config_.vocab_size)
        throw InputError("token id " + std::to_string(min_id < 0 ? min_id : max_id) +
                         " is outside the vocabulary [0, " + std::to_string(config_.vocab_size) + ")");
    if (config_.is_encoder())
        return bert_hidden(ids, token_types, attention_mask, observer);
    return config_.arch == Architecture::GPT2 ? gpt2_hidden(ids, observer, cache)
                                              : llama_hidden(ids, observer, cache);
}

torch::Tensor LanguageModel::head(const torch::Tensor& hidden) const
{
    c10::InferenceMode guard;
    return unguarded_head(hidden);
}

torch::Tensor LanguageModel::head_rows() const
{
    c10::InferenceMode guard;
    return config_.tied_embeddings ? embedding_->rebuilt_rows() : torch::Tensor();
}

torch::Tensor LanguageModel::head(const torch::Tensor& hidden, const torch::Tensor& rows) const
{
    c10::InferenceMode guard;
    return unguarded_head(hidden, rows);
}

torch::Tensor LanguageModel::unguarded_head(const torch::Tensor& input, const torch::Tensor& rows) const
{
    const auto hidden = config_.is_encoder() ? mlm_transform(input) : input;
    auto logits = rows.defined()            ? detail::times_transposed(hidden.to(torch::kFloat32), rows)
                  : config_.tied_embeddings ? embedding_->project(hidden)
                                            : detail::times_transposed(hidden, w("lm_head.weight"));
    if (config_.final_softcap > 0) // Gemma 2: cap tanh(logits / cap)
        logits = torch::tanh(logits / config_.final_softcap) * config_.final_softcap;
    if (config_.is_encoder())
        logits = logits + w("cls.predictions.bias");
    return logits;
}

torch::Tensor LanguageModel::logits(const torch::Tensor& ids) const
{
    c10::InferenceMode guard;
    auto h = hidden_states(ids);
    return head(h.reshape({-1, h.size(-1)})).view({h.size(0), h.size(1), -1});
}

torch::Tensor LanguageModel::training_logits(const torch::Tensor& ids) const
{
    auto h = checked_hidden(ids, nullptr);
    return unguarded_head(h.reshape({-1, h.size(-1)})).view({h.size(0), h.size(1), -1});
}

ParameterBreakdown LanguageModel::parameter_breakdown() const
{
    ParameterBreakdown b;
    b.token_embedding = embedding_->parameter_count();
    b.position_embedding = positions_ ? positions_->parameter_count() : 0;
    b.adapters = lora_ ? lora_->parameter_count() : 0;
    // Only the architecture's own tensors: checkpoints may carry buffers (GPT-2's
    // attn.bias causal masks) that are not parameters.
    const bool encoder = config_.is_encoder();
    for (const auto& e : detail::expected_tensors(config_)) {
        const std::string& name = e.name;
        if (name == token_table_name(config_.arch) || name == "wpe.weight" ||
            name == "embeddings.position_embeddings.weight")
            continue; // counted through the (possibly compressed) embeddings
        const int64_t n = weights_.at(name).numel();
        if (encoder && name == "embeddings.token_type_embeddings.weight")
            b.position_embedding += n; // segment rows: input embeddings beside the positions
        else if (encoder && name.rfind("encoder.", 0) != 0 && name.rfind("embeddings.", 0) != 0)
            b.output_head += n; // pooler, classifier, masked-LM transform and bias
        else if (encoder && name.find(".attention.") != std::string::npos &&
                 name.find("LayerNorm") == std::string::npos)
            b.attention += n;
        else if (encoder && (name.find(".intermediate.") != std::string::npos ||
                             name.find(".output.dense.") != std::string::npos))
            b.mlp += n;
        else if (name == "lm_head.weight")
            b.output_head += n;
        else if (name.find("attn") != std::string::npos)
            b.attention += n;
        else if (name.find("mlp") != std::string::npos)
            b.mlp += n;
        else
            b.norms += n;
    }
    return b;
}

} // namespace embedlab
