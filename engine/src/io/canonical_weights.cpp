#include "io/canonical_weights.hpp"

#include "embedlab/error.hpp"

namespace embedlab::io {

namespace {

std::string shape_text(c10::IntArrayRef shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

struct Expected {
    std::string name;
    std::vector<int64_t> shape;
};

// Expected tensors outside the layers (`layer` == -1) or of one layer; checked
// layer by layer so an absurd layer count fails at the first missing layer.
std::vector<Expected> expected_gpt2(const ModelConfig& c, int64_t layer)
{
    const int64_t d = c.hidden_size, f = c.intermediate_size;
    if (layer < 0) {
        std::vector<Expected> out = {
            {"wte.weight", {c.vocab_size, d}},
            {"wpe.weight", {c.max_positions, d}},
            {"ln_f.weight", {d}},
            {"ln_f.bias", {d}},
        };
        if (!c.tied_embeddings)
            out.push_back({"lm_head.weight", {c.vocab_size, d}});
        return out;
    }
    const std::string p = "h." + std::to_string(layer) + ".";
    return {
        {p + "ln_1.weight", {d}},
        {p + "ln_1.bias", {d}},
        {p + "ln_2.weight", {d}},
        {p + "ln_2.bias", {d}},
        {p + "attn.c_attn.weight", {d, 3 * d}},
        {p + "attn.c_attn.bias", {3 * d}},
        {p + "attn.c_proj.weight", {d, d}},
        {p + "attn.c_proj.bias", {d}},
        {p + "mlp.c_fc.weight", {d, f}},
        {p + "mlp.c_fc.bias", {f}},
        {p + "mlp.c_proj.weight", {f, d}},
        {p + "mlp.c_proj.bias", {d}},
    };
}

std::vector<Expected> expected_llama(const ModelConfig& c, int64_t layer)
{
    const int64_t d = c.hidden_size, f = c.intermediate_size;
    if (layer < 0) {
        std::vector<Expected> out = {{"model.embed_tokens.weight", {c.vocab_size, d}},
                                     {"model.norm.weight", {d}}};
        if (!c.tied_embeddings)
            out.push_back({"lm_head.weight", {c.vocab_size, d}});
        return out;
    }
    const int64_t q_rows = c.num_heads * c.head_dim(), kv_rows = c.num_kv_heads * c.head_dim();
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    return {
        {p + "input_layernorm.weight", {d}},           {p + "post_attention_layernorm.weight", {d}},
        {p + "self_attn.q_proj.weight", {q_rows, d}},  {p + "self_attn.k_proj.weight", {kv_rows, d}},
        {p + "self_attn.v_proj.weight", {kv_rows, d}}, {p + "self_attn.o_proj.weight", {d, q_rows}},
        {p + "mlp.gate_proj.weight", {f, d}},          {p + "mlp.up_proj.weight", {f, d}},
        {p + "mlp.down_proj.weight", {d, f}},
    };
}

} // namespace

const char* embedding_name(Architecture arch)
{
    return arch == Architecture::GPT2 ? "wte.weight" : "model.embed_tokens.weight";
}

void check_weights_against_config(const ModelConfig& config, const WeightMap& weights,
                                  const std::string& config_label, const std::string& weights_label,
                                  bool embedding_stored)
{
    const std::string embedding = embedding_name(config.arch);
    const auto emb = weights.find(embedding);
    if (emb != weights.end() && emb->second.dim() == 2) {
        const auto rows = emb->second.size(0), cols = emb->second.size(1);
        if (rows != config.vocab_size)
            throw InputError(config_label + ": vocab_size " + std::to_string(config.vocab_size) +
                             " disagrees with the " + std::to_string(rows) + " rows of " + embedding +
                             " in " + weights_label);
        if (cols != config.hidden_size)
            throw InputError(config_label + ": hidden size " + std::to_string(config.hidden_size) +
                             " disagrees with the " + std::to_string(cols) + " columns of " + embedding +
                             " in " + weights_label);
    }

    for (int64_t layer = -1; layer < config.num_layers; ++layer) {
        const auto expected =
            config.arch == Architecture::GPT2 ? expected_gpt2(config, layer) : expected_llama(config, layer);
        for (const Expected& e : expected) {
            if (!embedding_stored &&
                (e.name == embedding || (e.name == "wpe.weight" && !weights.count(e.name))))
                continue;
            const auto it = weights.find(e.name);
            if (it == weights.end())
                throw InputError(weights_label + ": missing tensor '" + e.name + "' (required by " +
                                 architecture_name(config.arch) + " with " +
                                 std::to_string(config.num_layers) + " layers)");
            if (it->second.sizes() != c10::IntArrayRef(e.shape))
                throw InputError(weights_label + ": tensor '" + e.name + "' has shape " +
                                 shape_text(it->second.sizes()) + " but the config implies " +
                                 shape_text(e.shape));
        }
    }
}

void settle_output_head(ModelConfig& config, WeightMap& weights, const std::string& label,
                        std::vector<std::string>& warnings)
{
    const bool has_head = weights.count("lm_head.weight") > 0;
    if (config.tied_embeddings && has_head) {
        weights.erase("lm_head.weight");
    } else if (!config.tied_embeddings && !has_head) {
        config.tied_embeddings = true;
        warnings.push_back(label + ": tie_word_embeddings is false but there is no lm_head.weight; "
                                   "using the token embedding as the output head (tied)");
    }
}

torch::Tensor meta_rope_rows_to_hf(const torch::Tensor& w, int64_t n_heads)
{
    const int64_t rows = w.size(0), cols = w.size(1);
    const int64_t head_dim = rows / n_heads;
    // Meta row (h, 2i + j) becomes HF row (h, j * head_dim/2 + i).
    return w.reshape({n_heads, head_dim / 2, 2, cols}).transpose(1, 2).reshape({rows, cols}).contiguous();
}

} // namespace embedlab::io
