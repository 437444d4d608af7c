#include "model/shape_check.hpp"

#include <sstream>

#include "embedlab/error.hpp"

namespace embedlab::detail {

namespace {
std::string shape_string(c10::IntArrayRef s)
{
    std::ostringstream o;
    o << '[';
    for (size_t i = 0; i < s.size(); ++i)
        o << (i ? ", " : "") << s[i];
    o << ']';
    return o.str();
}
} // namespace

void check_layer_dims(const ModelConfig& c, const std::string& label)
{
    auto check = [&](const std::vector<int64_t>& dims, int64_t max, const char* what) {
        if (dims.empty())
            return;
        if (static_cast<int64_t>(dims.size()) != c.num_layers)
            throw InputError(label + ": " + what + " lists " + std::to_string(dims.size()) +
                             " layers but the model has " + std::to_string(c.num_layers));
        for (size_t l = 0; l < dims.size(); ++l)
            if (dims[l] < 1 || dims[l] > max)
                throw InputError(label + ": " + what + " of layer " + std::to_string(l) + " is " +
                                 std::to_string(dims[l]) + ", outside 1.." + std::to_string(max));
    };
    check(c.value_head_dims, c.head_dim(), "value_head_dims");
    check(c.mlp_widths, c.intermediate_size, "mlp_widths");
}

namespace {

// bert / distilbert under the canonical names (weights.hpp); layer -1: the rest.
std::vector<ExpectedTensor> expected_encoder_tensors(const ModelConfig& c, int64_t layer)
{
    const int64_t d = c.hidden_size, V = c.vocab_size;
    std::vector<ExpectedTensor> t;
    auto linear = [&](const std::string& name, int64_t out, int64_t in) {
        t.push_back({name + ".weight", {out, in}});
        t.push_back({name + ".bias", {out}});
    };
    auto norm = [&](const std::string& name) {
        t.push_back({name + ".weight", {d}});
        t.push_back({name + ".bias", {d}});
    };
    if (layer < 0) {
        t.push_back({"embeddings.word_embeddings.weight", {V, d}});
        t.push_back({"embeddings.position_embeddings.weight", {c.max_positions, d}});
        if (c.type_vocab_size > 0)
            t.push_back({"embeddings.token_type_embeddings.weight", {c.type_vocab_size, d}});
        norm("embeddings.LayerNorm");
        if (c.has_pooler)
            linear("pooler.dense", d, d);
        const auto labels = static_cast<int64_t>(c.labels.size());
        if (c.encoder_head == EncoderHead::Classification) {
            if (c.model_type == "distilbert")
                linear("pre_classifier", d, d);
            linear("classifier", labels, d);
        } else if (c.encoder_head == EncoderHead::MaskedLM) {
            linear("cls.predictions.transform.dense", d, d);
            norm("cls.predictions.transform.LayerNorm");
            t.push_back({"cls.predictions.bias", {V}});
        }
        return t;
    }
    const std::string p = "encoder.layer." + std::to_string(layer) + ".";
    for (const char* part : {"query", "key", "value"})
        linear(p + "attention.self." + part, d, d);
    linear(p + "attention.output.dense", d, d);
    norm(p + "attention.output.LayerNorm");
    linear(p + "intermediate.dense", c.intermediate_size, d);
    linear(p + "output.dense", d, c.intermediate_size);
    norm(p + "output.LayerNorm");
    return t;
}

} // namespace

std::vector<ExpectedTensor> expected_layer_tensors(const ModelConfig& c, int64_t layer)
{
    if (c.is_encoder())
        return expected_encoder_tensors(c, layer);
    const int64_t d = c.hidden_size, V = c.vocab_size, e = c.embedding_dim();
    const bool gpt2 = c.arch == Architecture::GPT2;
    if (layer < 0) {
        std::vector<ExpectedTensor> t;
        if (gpt2)
            t = {{"wte.weight", {V, d}},
                 {"wpe.weight", {c.max_positions, d}},
                 {"ln_f.weight", {d}},
                 {"ln_f.bias", {d}}};
        else
            t = {{"model.embed_tokens.weight", {V, e}}};
        if (!gpt2 && c.final_norm) {
            t.push_back({"model.norm.weight", {d}});
            if (c.norm == NormKind::LayerNorm)
                t.push_back({"model.norm.bias", {d}});
        }
        if (c.projects_embedding()) {
            t.push_back({"model.project_in.weight", {d, e}});
            t.push_back({"model.project_out.weight", {e, d}});
        }
        if (c.learned_positions)
            t.push_back({"model.embed_positions.weight", {c.max_positions + c.position_offset, d}});
        if (!c.tied_embeddings)
            t.push_back({"lm_head.weight", {V, e}});
        return t;
    }
    const int64_t fi = c.mlp_width(layer);
    if (gpt2) {
        const std::string p = "h." + std::to_string(layer) + ".";
        const int64_t vd = c.num_heads * c.value_dim(layer);
        // Conv1D weights are [in, out]; fused q, k, v columns, FLAT-LLM narrows only v.
        return {
            {p + "ln_1.weight", {d}},
            {p + "ln_1.bias", {d}},
            {p + "ln_2.weight", {d}},
            {p + "ln_2.bias", {d}},
            {p + "attn.c_attn.weight", {d, 2 * d + vd}},
            {p + "attn.c_attn.bias", {2 * d + vd}},
            {p + "attn.c_proj.weight", {vd, d}},
            {p + "attn.c_proj.bias", {d}},
            {p + "mlp.c_fc.weight", {d, fi}},
            {p + "mlp.c_fc.bias", {fi}},
            {p + "mlp.c_proj.weight", {fi, d}},
            {p + "mlp.c_proj.bias", {d}},
        };
    }
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    const int64_t hd = c.head_dim(), vd = c.value_dim(layer);
    const int64_t H = c.num_heads, Hkv = c.num_kv_heads;
    std::vector<ExpectedTensor> t;
    auto norm = [&](const std::string& name, int64_t size) {
        t.push_back({name + ".weight", {size}});
        if (c.norm == NormKind::LayerNorm)
            t.push_back({name + ".bias", {size}});
    };
    auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
        t.push_back({p + name + ".weight", {out, in}});
        if (bias)
            t.push_back({p + name + ".bias", {out}});
    };
    norm(p + "input_layernorm", d);
    norm(p + "post_attention_layernorm", d);
    if (c.sandwich_norms) {
        norm(p + "pre_feedforward_layernorm", d);
        norm(p + "post_feedforward_layernorm", d);
    }
    linear("self_attn.q_proj", H * hd, d, c.qkv_bias);
    linear("self_attn.k_proj", Hkv * hd, d, c.qkv_bias);
    linear("self_attn.v_proj", Hkv * vd, d, c.qkv_bias);
    linear("self_attn.o_proj", d, H * vd, c.o_bias);
    if (c.qk_norm) {
        norm(p + "self_attn.q_norm", hd);
        norm(p + "self_attn.k_norm", hd);
    }
    if (c.gated_mlp)
        linear("mlp.gate_proj", fi, d, c.mlp_bias);
    linear("mlp.up_proj", fi, d, c.mlp_bias);
    linear("mlp.down_proj", d, fi, c.mlp_bias);
    return t;
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c)
{
    std::vector<ExpectedTensor> t;
    for (int64_t l = -1; l < c.num_layers; ++l)
        for (auto& e : expected_layer_tensors(c, l))
            t.push_back(std::move(e));
    return t;
}

void check_weights(const ModelConfig& c, const WeightMap& weights, const std::string& label,
                   bool embedding_stored)
{
    if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.vocab_size <= 0)
        throw InputError(label + ": config has a non-positive size (hidden, layers, heads or vocab)");
    if (c.head_size == 0 && c.hidden_size % c.num_heads != 0)
        throw InputError(label + ": hidden size " + std::to_string(c.hidden_size) +
                         " is not divisible by the number of heads " + std::to_string(c.num_heads));
    if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
        throw InputError(label + ": " + std::to_string(c.num_heads) + " query heads cannot be grouped over " +
                         std::to_string(c.num_kv_heads) + " key/value heads");
    if (c.arch == Architecture::Llama && !c.learned_positions &&
        (c.rotary_dims() % 2 != 0 || c.rotary_dims() > c.head_dim()))
        throw InputError(label + ": RoPE needs an even rotary size within the head, got " +
                         std::to_string(c.rotary_dims()) + " of " + std::to_string(c.head_dim()));
    if (!c.rope_freq_divisors.empty() &&
        static_cast<int64_t>(c.rope_freq_divisors.size()) != c.rotary_dims() / 2)
        throw InputError(label + ": " + std::to_string(c.rope_freq_divisors.size()) +
                         " RoPE frequency factors for a rotary size of " + std::to_string(c.rotary_dims()));
    check_layer_dims(c, label);
    for (const auto& e : expected_tensors(c)) {
        // Compressed models: the tables may be factors; wpe stays dense unless compressed.
        const char* positions = position_table_name(c.arch);
        if (!embedding_stored && (e.name == token_table_name(c.arch) ||
                                  (positions && e.name == positions && !weights.count(e.name))))
            continue;
        auto it = weights.find(e.name);
        if (it == weights.end())
            throw InputError(label + ": missing tensor '" + e.name + "'");
        if (it->second.sizes() != c10::IntArrayRef(e.shape))
            throw InputError(label + ": tensor '" + e.name + "' has shape " +
                             shape_string(it->second.sizes()) + ", expected " + shape_string(e.shape) +
                             " from the config");
        // Matrices may stay f16/bf16 as stored (load_model_for_generation); the rest is float32.
        const bool kept_half = it->second.dim() == 2 && (it->second.scalar_type() == torch::kHalf ||
                                                         it->second.scalar_type() == torch::kBFloat16);
        if (it->second.scalar_type() != torch::kFloat32 && !kept_half)
            throw InputError(label + ": tensor '" + e.name + "' is not float32 after loading");
    }
}

} // namespace embedlab::detail
