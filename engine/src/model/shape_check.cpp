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

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c)
{
    const int64_t d = c.hidden_size, V = c.vocab_size, f = c.intermediate_size;
    std::vector<ExpectedTensor> t;
    if (c.arch == Architecture::GPT2) {
        t.push_back({"wte.weight", {V, d}});
        t.push_back({"wpe.weight", {c.max_positions, d}});
        t.push_back({"ln_f.weight", {d}});
        t.push_back({"ln_f.bias", {d}});
        for (int64_t i = 0; i < c.num_layers; ++i) {
            const std::string p = "h." + std::to_string(i) + ".";
            for (const char* ln : {"ln_1", "ln_2"}) {
                t.push_back({p + ln + ".weight", {d}});
                t.push_back({p + ln + ".bias", {d}});
            }
            t.push_back({p + "attn.c_attn.weight", {d, 3 * d}});
            t.push_back({p + "attn.c_attn.bias", {3 * d}});
            t.push_back({p + "attn.c_proj.weight", {d, d}});
            t.push_back({p + "attn.c_proj.bias", {d}});
            t.push_back({p + "mlp.c_fc.weight", {d, f}});
            t.push_back({p + "mlp.c_fc.bias", {f}});
            t.push_back({p + "mlp.c_proj.weight", {f, d}});
            t.push_back({p + "mlp.c_proj.bias", {d}});
        }
        return t;
    }
    const int64_t hd = c.head_dim(), kv = c.num_kv_heads * hd;
    t.push_back({"model.embed_tokens.weight", {V, d}});
    t.push_back({"model.norm.weight", {d}});
    if (!c.tied_embeddings)
        t.push_back({"lm_head.weight", {V, d}});
    for (int64_t i = 0; i < c.num_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        t.push_back({p + "input_layernorm.weight", {d}});
        t.push_back({p + "post_attention_layernorm.weight", {d}});
        t.push_back({p + "self_attn.q_proj.weight", {c.num_heads * hd, d}});
        t.push_back({p + "self_attn.k_proj.weight", {kv, d}});
        t.push_back({p + "self_attn.v_proj.weight", {kv, d}});
        t.push_back({p + "self_attn.o_proj.weight", {d, c.num_heads * hd}});
        t.push_back({p + "mlp.gate_proj.weight", {f, d}});
        t.push_back({p + "mlp.up_proj.weight", {f, d}});
        t.push_back({p + "mlp.down_proj.weight", {d, f}});
    }
    return t;
}

void check_weights(const ModelConfig& c, const WeightMap& weights, const std::string& label,
                   bool embedding_stored)
{
    if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.vocab_size <= 0)
        throw InputError(label + ": config has a non-positive size (hidden, layers, heads or vocab)");
    if (c.hidden_size % c.num_heads != 0)
        throw InputError(label + ": hidden size " + std::to_string(c.hidden_size) +
                         " is not divisible by the number of heads " + std::to_string(c.num_heads));
    if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
        throw InputError(label + ": " + std::to_string(c.num_heads) + " query heads cannot be grouped over " +
                         std::to_string(c.num_kv_heads) + " key/value heads");
    if (c.arch == Architecture::Llama && c.head_dim() % 2 != 0)
        throw InputError(label + ": RoPE needs an even head dimension, got " + std::to_string(c.head_dim()));
    for (const auto& e : expected_tensors(c)) {
        // Compressed models: the tables may be factors; wpe stays dense unless compressed.
        if (!embedding_stored && (e.name == "wte.weight" || e.name == "model.embed_tokens.weight" ||
                                  (e.name == "wpe.weight" && !weights.count(e.name))))
            continue;
        auto it = weights.find(e.name);
        if (it == weights.end())
            throw InputError(label + ": missing tensor '" + e.name + "'");
        if (it->second.sizes() != c10::IntArrayRef(e.shape))
            throw InputError(label + ": tensor '" + e.name + "' has shape " +
                             shape_string(it->second.sizes()) + ", expected " + shape_string(e.shape) +
                             " from the config");
        if (it->second.scalar_type() != torch::kFloat32)
            throw InputError(label + ": tensor '" + e.name + "' is not float32 after loading");
    }
}

} // namespace embedlab::detail
