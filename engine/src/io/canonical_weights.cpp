#include "io/canonical_weights.hpp"

#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "embedlab/error.hpp"
#include "model/shape_check.hpp"

namespace embedlab::io {

namespace {

std::string shape_text(c10::IntArrayRef shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

bool ends_with(const std::string& s, const std::string& tail)
{
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// "model.layers.3.rest" / "gpt_neox.layers.3.rest" -> {3, "rest"}; nullopt otherwise.
std::optional<std::pair<int64_t, std::string>> layer_part(const std::string& name, const std::string& prefix)
{
    if (name.rfind(prefix, 0) != 0)
        return std::nullopt;
    const size_t dot = name.find('.', prefix.size());
    if (dot == std::string::npos || dot == prefix.size() || dot - prefix.size() > 6)
        return std::nullopt;
    const std::string digits = name.substr(prefix.size(), dot - prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    return std::make_pair(std::stoll(digits), name.substr(dot + 1));
}

void put(WeightMap& weights, const std::string& name, torch::Tensor t, const std::string& label)
{
    if (!weights.emplace(name, std::move(t)).second)
        throw InputError(label + ": tensor '" + name + "' is stored twice (fused and split)");
}

// phi3 (and llama.cpp's phi3/gptneox GGUF): qkv_proj rows (or bias entries) are
// q (H hd), k (Hkv hd), v (Hkv hd); gate_up_proj rows gate then up.
void split_fused(const ModelConfig& c, WeightMap& weights, const std::string& label)
{
    WeightMap out;
    for (auto& [name, t] : weights) {
        const auto part = layer_part(name, "model.layers.");
        const std::string p = part ? "model.layers." + std::to_string(part->first) + "." : "";
        const bool qkv_bias = part && part->second == "self_attn.qkv_proj.bias";
        if (part && (part->second == "self_attn.qkv_proj.weight" || qkv_bias) && part->first < c.num_layers) {
            // FLAT-LLM directories narrow the value rows (value_head_dims).
            const int64_t hd = c.head_dim(), q = c.num_heads * hd, k = c.num_kv_heads * hd;
            const int64_t v = c.num_kv_heads * c.value_dim(part->first);
            if (t.dim() != (qkv_bias ? 1 : 2) || t.size(0) != q + k + v)
                throw InputError(label + ": tensor '" + name + "' has " + std::to_string(t.size(0)) +
                                 " rows; the config implies " + std::to_string(q + k + v));
            const std::string kind = qkv_bias ? ".bias" : ".weight";
            put(out, p + "self_attn.q_proj" + kind, t.narrow(0, 0, q).contiguous(), label);
            put(out, p + "self_attn.k_proj" + kind, t.narrow(0, q, k).contiguous(), label);
            put(out, p + "self_attn.v_proj" + kind, t.narrow(0, q + k, v).contiguous(), label);
        } else if (part && part->second == "mlp.gate_up_proj.weight") {
            if (t.dim() != 2 || t.size(0) % 2 != 0)
                throw InputError(label + ": tensor '" + name + "' must have an even number of rows");
            const int64_t f = t.size(0) / 2;
            put(out, p + "mlp.gate_proj.weight", t.narrow(0, 0, f).contiguous(), label);
            put(out, p + "mlp.up_proj.weight", t.narrow(0, f, f).contiguous(), label);
        } else {
            put(out, name, std::move(t), label);
        }
    }
    weights = std::move(out);
}

// The Hugging Face name that `names` (HF name -> canonical name) maps to
// `canonical`; nullptr when none does. The export reads the tables backwards.
const std::string* hf_name_of(const std::map<std::string, std::string>& names, const std::string& canonical)
{
    for (const auto& [hf, c] : names)
        if (c == canonical)
            return &hf;
    return nullptr;
}

// gpt_neox's names of the whole-model tensors and of the layer parts -> canonical ones.
const std::map<std::string, std::string> kNeoxGlobalNames{
    {"gpt_neox.embed_in.weight", "model.embed_tokens.weight"},
    {"gpt_neox.final_layer_norm.weight", "model.norm.weight"},
    {"gpt_neox.final_layer_norm.bias", "model.norm.bias"},
    {"embed_out.weight", "lm_head.weight"},
};
const std::map<std::string, std::string> kNeoxLayerNames{
    {"input_layernorm.weight", "input_layernorm.weight"},
    {"input_layernorm.bias", "input_layernorm.bias"},
    {"post_attention_layernorm.weight", "post_attention_layernorm.weight"},
    {"post_attention_layernorm.bias", "post_attention_layernorm.bias"},
    {"attention.dense.weight", "self_attn.o_proj.weight"},
    {"attention.dense.bias", "self_attn.o_proj.bias"},
    {"mlp.dense_h_to_4h.weight", "mlp.up_proj.weight"},
    {"mlp.dense_h_to_4h.bias", "mlp.up_proj.bias"},
    {"mlp.dense_4h_to_h.weight", "mlp.down_proj.weight"},
    {"mlp.dense_4h_to_h.bias", "mlp.down_proj.bias"},
};

// The renaming loop of a family with names of its own: a whole-model tensor is
// renamed by `global` (its name -> the canonical one), any other outside the layers
// kept; a layer's tensor (below `layer_prefix`) goes to
// layer(out, {layer, part}, name, tensor), which stores it (or drops it).
template <class Layer>
void rename_tensors(WeightMap& weights, const std::map<std::string, std::string>& global,
                    const std::string& layer_prefix, const std::string& label, Layer&& layer)
{
    WeightMap out;
    for (auto& [name, t] : weights) {
        if (const auto it = global.find(name); it != global.end())
            put(out, it->second, std::move(t), label);
        else if (const auto part = layer_part(name, layer_prefix))
            layer(out, *part, name, t);
        else
            put(out, name, std::move(t), label);
    }
    weights = std::move(out);
}

// gpt_neox: query_key_value rows are per head [q | k | v] (head_dim each).
void canonicalize_neox(const ModelConfig& c, WeightMap& weights, const std::string& label)
{
    const int64_t H = c.num_heads, hd = c.head_dim();
    rename_tensors(
        weights, kNeoxGlobalNames, "gpt_neox.layers.", label,
        [&](WeightMap& out, const std::pair<int64_t, std::string>& part, const std::string& name,
            torch::Tensor& t) {
            const std::string p = "model.layers." + std::to_string(part.first) + ".";
            const std::string& rest = part.second;
            if (rest == "attention.bias" || rest == "attention.masked_bias" ||
                rest == "attention.rotary_emb.inv_freq")
                return; // buffers, not weights
            if ((rest == "attention.query_key_value.weight" || rest == "attention.query_key_value.bias") &&
                part.first < c.num_layers) {
                const bool bias = ends_with(rest, ".bias");
                const int64_t vd = c.value_dim(part.first), per = 2 * hd + vd; // FLAT-LLM narrows v
                if (t.size(0) != H * per)
                    throw InputError(label + ": tensor '" + name + "' has " + std::to_string(t.size(0)) +
                                     " rows; the config implies " + std::to_string(H * per));
                const auto per_head = bias ? t.reshape({H, per}) : t.reshape({H, per, t.size(1)});
                const std::pair<const char*, std::pair<int64_t, int64_t>> parts[] = {
                    {"q_proj", {0, hd}}, {"k_proj", {hd, hd}}, {"v_proj", {2 * hd, vd}}};
                for (const auto& [proj, range] : parts) {
                    auto rows = per_head.narrow(1, range.first, range.second);
                    rows =
                        bias ? rows.reshape({H * range.second}) : rows.reshape({H * range.second, t.size(1)});
                    put(out, p + "self_attn." + proj + (bias ? ".bias" : ".weight"), rows.contiguous(),
                        label);
                }
                t = torch::Tensor(); // the copies replace it: free it now, not once every layer is split
                return;
            }
            const auto it = kNeoxLayerNames.find(rest);
            put(out, it == kNeoxLayerNames.end() ? name : p + it->second, std::move(t), label);
        });
}

// OPT: "model.decoder." names and its own layer part names.
const std::map<std::string, std::string>& opt_layer_names()
{
    static const std::map<std::string, std::string> m = [] {
        std::map<std::string, std::string> names;
        using Rename = std::pair<const char*, const char*>;
        for (const auto& [from, to] :
             std::initializer_list<Rename>{{"self_attn.out_proj", "self_attn.o_proj"},
                                           {"self_attn_layer_norm", "input_layernorm"},
                                           {"final_layer_norm", "post_attention_layernorm"},
                                           {"fc1", "mlp.up_proj"},
                                           {"fc2", "mlp.down_proj"}})
            for (const char* part : {".weight", ".bias"})
                names[from + std::string(part)] = to + std::string(part);
        return names;
    }();
    return m;
}

const std::map<std::string, std::string>& opt_global_names()
{
    static const std::map<std::string, std::string> m = {
        {"model.decoder.embed_tokens.weight", "model.embed_tokens.weight"},
        {"model.decoder.embed_positions.weight", "model.embed_positions.weight"},
        {"model.decoder.final_layer_norm.weight", "model.norm.weight"},
        {"model.decoder.final_layer_norm.bias", "model.norm.bias"},
        {"model.decoder.project_in.weight", "model.project_in.weight"},
        {"model.decoder.project_out.weight", "model.project_out.weight"},
    };
    return m;
}

void canonicalize_opt(WeightMap& weights, const std::string& label)
{
    rename_tensors(weights, opt_global_names(), "model.decoder.layers.", label,
                   [&](WeightMap& out, const std::pair<int64_t, std::string>& part, const std::string&,
                       torch::Tensor& t) {
                       const auto it = opt_layer_names().find(part.second);
                       put(out,
                           "model.layers." + std::to_string(part.first) + "." +
                               (it == opt_layer_names().end() ? part.second : it->second),
                           std::move(t), label);
                   });
}

} // namespace

void split_gguf_fused_tensors(const ModelConfig& config, WeightMap& weights, const std::string& label)
{
    split_fused(config, weights, label);
}

void canonicalize_hf_names(const ModelConfig& config, WeightMap& weights, const std::string& label)
{
    if (config.arch == Architecture::GPT2) {
        for (auto it = weights.begin(); it != weights.end();) // causal-mask buffers
            it = ends_with(it->first, ".attn.bias") || ends_with(it->first, ".attn.masked_bias")
                     ? weights.erase(it)
                     : std::next(it);
        return;
    }
    if (config.model_type == "gpt_neox")
        canonicalize_neox(config, weights, label);
    else if (config.model_type == "opt")
        canonicalize_opt(weights, label);
    else if (config.model_type == "phi3")
        split_fused(config, weights, label);
    for (auto it = weights.begin(); it != weights.end();)
        it = ends_with(it->first, ".rotary_emb.inv_freq") ? weights.erase(it) : std::next(it);
}

std::vector<std::pair<std::string, torch::Tensor>> native_hf_tensors(const ModelConfig& config,
                                                                     const WeightMap& weights)
{
    if (config.is_encoder())
        return native_encoder_tensors(config, weights);
    std::vector<std::pair<std::string, torch::Tensor>> out;
    const bool neox = config.model_type == "gpt_neox", phi3 = config.model_type == "phi3";
    if (config.model_type == "opt") {
        for (const auto& [name, t] : weights) {
            const std::string* hf = hf_name_of(opt_global_names(), name);
            std::string native = hf ? *hf : name;
            if (const auto part = layer_part(name, "model.layers.")) {
                hf = hf_name_of(opt_layer_names(), part->second);
                native =
                    "model.decoder.layers." + std::to_string(part->first) + "." + (hf ? *hf : part->second);
            }
            out.emplace_back(native, t);
        }
        return out;
    }
    if (!neox && !phi3) {
        out.assign(weights.begin(), weights.end());
        return out;
    }
    std::set<std::string> fused; // canonical names written as part of a fused tensor
    for (int64_t l = 0; l < config.num_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const std::string a = p + "self_attn.";
        for (const char* kind : {"weight", "bias"}) {
            const std::string q = a + "q_proj." + kind, k = a + "k_proj." + kind, v = a + "v_proj." + kind;
            if (!weights.count(q) || !weights.count(k) || !weights.count(v))
                continue;
            const auto &tq = weights.at(q), &tk = weights.at(k), &tv = weights.at(v);
            if (phi3) {
                out.emplace_back(a + "qkv_proj." + kind, torch::cat({tq, tk, tv}, 0));
            } else {
                const int64_t H = config.num_heads;
                auto heads = [&](const torch::Tensor& t) { return t.reshape({H, t.size(0) / H, -1}); };
                auto joined = torch::cat({heads(tq), heads(tk), heads(tv)}, 1);
                out.emplace_back(
                    "gpt_neox.layers." + std::to_string(l) + ".attention.query_key_value." + kind,
                    std::string(kind) == "bias" ? joined.reshape({-1}) : joined.reshape({-1, tq.size(1)}));
            }
            fused.insert({q, k, v});
        }
        if (phi3 && weights.count(p + "mlp.gate_proj.weight") && weights.count(p + "mlp.up_proj.weight")) {
            out.emplace_back(
                p + "mlp.gate_up_proj.weight",
                torch::cat({weights.at(p + "mlp.gate_proj.weight"), weights.at(p + "mlp.up_proj.weight")},
                           0));
            fused.insert({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"});
        }
    }
    for (const auto& [name, t] : weights) {
        if (fused.count(name))
            continue;
        std::string native = name;
        if (neox) {
            if (const std::string* hf = hf_name_of(kNeoxGlobalNames, name)) {
                native = *hf;
            } else if (const auto part = layer_part(name, "model.layers.")) {
                hf = hf_name_of(kNeoxLayerNames, part->second);
                native = "gpt_neox.layers." + std::to_string(part->first) + "." + (hf ? *hf : part->second);
            }
        }
        out.emplace_back(native, t);
    }
    return out;
}

void refuse_unused_tensors(const ModelConfig& config, const WeightMap& weights, const std::string& label,
                           bool embedding_stored)
{
    std::set<std::string> expected;
    for (const auto& e : detail::expected_tensors(config))
        expected.insert(e.name);
    for (const auto& [name, t] : weights) {
        if (expected.count(name))
            continue;
        if (!embedding_stored && name == "wpe.weight")
            continue;
        throw InputError(label + ": tensor '" + name + "' is not used by " + config.type_name() +
                         " as configured; EmbedLab refuses to ignore it (a config field it does not "
                         "implement, or a tensor of another architecture?)");
    }
}

const char* embedding_name(Architecture arch)
{
    return token_table_name(arch);
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
        if (cols != config.embedding_dim())
            throw InputError(config_label + ": " +
                             (config.projects_embedding() ? "word_embed_proj_dim " : "hidden size ") +
                             std::to_string(config.embedding_dim()) + " disagrees with the " +
                             std::to_string(cols) + " columns of " + embedding + " in " + weights_label);
    }

    for (int64_t layer = -1; layer < config.num_layers; ++layer) {
        // Layer by layer, so an absurd layer count fails at the first missing layer.
        for (const auto& e : detail::expected_layer_tensors(config, layer)) {
            if (!embedding_stored &&
                (e.name == embedding || (e.name == "wpe.weight" && !weights.count(e.name))))
                continue;
            const auto it = weights.find(e.name);
            if (it == weights.end())
                throw InputError(weights_label + ": missing tensor '" + e.name + "' (required by " +
                                 config.type_name() + " with " + std::to_string(config.num_layers) +
                                 " layers)");
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

namespace {

// Meta row (h, 2i + j) <-> HF row (h, j * head_dim/2 + i); `to_hf` picks the direction.
torch::Tensor permute_rope_rows(const torch::Tensor& w, int64_t n_heads, bool to_hf)
{
    const bool bias = w.dim() == 1;
    const auto m = bias ? w.unsqueeze(1) : w;
    const int64_t rows = m.size(0), cols = m.size(1), half = rows / n_heads / 2;
    const auto split =
        to_hf ? std::vector<int64_t>{n_heads, half, 2, cols} : std::vector<int64_t>{n_heads, 2, half, cols};
    auto out = m.reshape(split).transpose(1, 2).reshape({rows, cols}).contiguous();
    return bias ? out.squeeze(1) : out;
}

struct NamePair {
    const char* gguf;
    const char* canonical;
};

// Per-layer suffixes (after "blk.N." / "model.layers.N."), weights and biases.
const std::vector<NamePair>& layer_names(const std::string& arch)
{
    static const std::vector<NamePair> common = {
        {"attn_norm", "input_layernorm"},    {"ffn_norm", "post_attention_layernorm"},
        {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
        {"attn_v", "self_attn.v_proj"},      {"attn_output", "self_attn.o_proj"},
        {"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"},
        {"attn_qkv", "self_attn.qkv_proj"},  {"ffn_gate", "mlp.gate_proj"},
        {"ffn_up", "mlp.up_proj"},           {"ffn_down", "mlp.down_proj"},
    };
    static const std::vector<NamePair> gemma2 = [] {
        std::vector<NamePair> t = {{"attn_norm", "input_layernorm"},
                                   {"post_attention_norm", "post_attention_layernorm"},
                                   {"ffn_norm", "pre_feedforward_layernorm"},
                                   {"post_ffw_norm", "post_feedforward_layernorm"}};
        for (const auto& n : common)
            if (std::string(n.gguf) != "attn_norm" && std::string(n.gguf) != "ffn_norm")
                t.push_back(n);
        return t;
    }();
    static const std::vector<NamePair> phi3 = [] {
        std::vector<NamePair> t;
        for (const auto& n : common)
            if (std::string(n.gguf) != "ffn_up")
                t.push_back(n);
        t.push_back({"ffn_up", "mlp.gate_up_proj"}); // llama.cpp's phi3 ffn_up is [gate | up]
        return t;
    }();
    return arch == "gemma2" || arch == "gemma3" ? gemma2 : arch == "phi3" ? phi3 : common;
}

const std::vector<NamePair>& global_names()
{
    static const std::vector<NamePair> t = {
        {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
    return t;
}

// "weight" / "bias" off the end of a name.
std::optional<std::pair<std::string, std::string>> split_kind(const std::string& name)
{
    for (const char* kind : {".weight", ".bias"})
        if (ends_with(name, kind))
            return std::make_pair(name.substr(0, name.size() - std::strlen(kind)), std::string(kind));
    return std::nullopt;
}

// Maps `name` from one side of the tables to the other.
std::optional<std::string> map_name(const std::string& arch, const std::string& name, bool to_gguf)
{
    if (arch == "bert")
        return encoder_gguf_name(name, to_gguf);
    const auto split = split_kind(name);
    if (!split)
        return std::nullopt;
    const auto& [stem, kind] = *split;
    auto from = [&](const NamePair& n) { return std::string(to_gguf ? n.canonical : n.gguf); };
    auto to = [&](const NamePair& n) { return std::string(to_gguf ? n.gguf : n.canonical); };
    for (const auto& n : global_names())
        if (stem == from(n))
            return to(n) + kind;
    const auto part = layer_part(stem, to_gguf ? "model.layers." : "blk.");
    if (!part)
        return std::nullopt;
    for (const auto& n : layer_names(arch))
        if (part->second == from(n))
            return (to_gguf ? "blk." : "model.layers.") + std::to_string(part->first) + "." + to(n) + kind;
    return std::nullopt;
}

} // namespace

torch::Tensor meta_rope_rows_to_hf(const torch::Tensor& w, int64_t n_heads)
{
    return permute_rope_rows(w, n_heads, /*to_hf=*/true);
}

torch::Tensor hf_rope_rows_to_meta(const torch::Tensor& w, int64_t n_heads)
{
    return permute_rope_rows(w, n_heads, /*to_hf=*/false);
}

std::optional<std::string> gguf_tensor_name(const std::string& arch, const std::string& canonical)
{
    return map_name(arch, canonical, /*to_gguf=*/true);
}

std::optional<std::string> canonical_from_gguf(const std::string& arch, const std::string& gguf)
{
    return map_name(arch, gguf, /*to_gguf=*/false);
}

bool gguf_norms_store_one_plus(const std::string& arch)
{
    return arch == "gemma" || arch == "gemma2" || arch == "gemma3";
}

bool is_norm_weight(const std::string& canonical)
{
    return ends_with(canonical, "norm.weight");
}

} // namespace embedlab::io
