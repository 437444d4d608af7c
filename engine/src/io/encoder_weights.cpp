// bert / distilbert tensor names <-> the canonical (bert-body) names of weights.hpp.
#include <map>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/file_input.hpp"
#include "embedlab/json_input.hpp"
#include "io/canonical_weights.hpp"

namespace embedlab::io {

namespace {

bool starts_with(const std::string& s, const std::string& head)
{
    return s.rfind(head, 0) == 0;
}

// distilbert's names (after "distilbert.") -> bert's; per layer below "transformer.layer.N.".
const std::map<std::string, std::string>& distilbert_layer_names()
{
    static const std::map<std::string, std::string> m = [] {
        std::map<std::string, std::string> names;
        using Rename = std::pair<const char*, const char*>;
        for (const auto& [from, to] : std::initializer_list<Rename>{
                 {"attention.q_lin", "attention.self.query"},
                 {"attention.k_lin", "attention.self.key"},
                 {"attention.v_lin", "attention.self.value"},
                 {"attention.out_lin", "attention.output.dense"},
                 {"sa_layer_norm", "attention.output.LayerNorm"},
                 {"ffn.lin1", "intermediate.dense"},
                 {"ffn.lin2", "output.dense"},
                 {"output_layer_norm", "output.LayerNorm"},
             })
            for (const char* part : {".weight", ".bias"})
                names[from + std::string(part)] = to + std::string(part);
        return names;
    }();
    return m;
}

const std::map<std::string, std::string>& distilbert_global_names()
{
    static const std::map<std::string, std::string> m = {
        {"vocab_transform.weight", "cls.predictions.transform.dense.weight"},
        {"vocab_transform.bias", "cls.predictions.transform.dense.bias"},
        {"vocab_layer_norm.weight", "cls.predictions.transform.LayerNorm.weight"},
        {"vocab_layer_norm.bias", "cls.predictions.transform.LayerNorm.bias"},
        {"vocab_projector.bias", "cls.predictions.bias"},
        {"vocab_projector.weight", "cls.predictions.decoder.weight"},
    };
    return m;
}

std::string distilbert_to_bert(const std::string& name)
{
    std::string rest = starts_with(name, "distilbert.") ? name.substr(11) : name;
    if (const auto it = distilbert_global_names().find(rest); it != distilbert_global_names().end())
        return it->second;
    const std::string layers = "transformer.layer.";
    if (!starts_with(rest, layers))
        return rest;
    const size_t dot = rest.find('.', layers.size());
    if (dot == std::string::npos)
        return rest;
    const std::string part = rest.substr(dot + 1);
    const auto it = distilbert_layer_names().find(part);
    return "encoder.layer." + rest.substr(layers.size(), dot - layers.size()) + "." +
           (it == distilbert_layer_names().end() ? part : it->second);
}

// llama.cpp's bert tensor stems (without .weight / .bias) and the canonical ones.
const std::vector<std::pair<std::string, std::string>>& gguf_globals()
{
    static const std::vector<std::pair<std::string, std::string>> t = {
        {"token_embd", "embeddings.word_embeddings"},
        {"token_types", "embeddings.token_type_embeddings"},
        {"position_embd", "embeddings.position_embeddings"},
        {"token_embd_norm", "embeddings.LayerNorm"},
    };
    return t;
}

const std::vector<std::pair<std::string, std::string>>& gguf_layer_parts()
{
    static const std::vector<std::pair<std::string, std::string>> t = {
        {"attn_q", "attention.self.query"},
        {"attn_k", "attention.self.key"},
        {"attn_v", "attention.self.value"},
        {"attn_output", "attention.output.dense"},
        {"attn_output_norm", "attention.output.LayerNorm"},
        {"ffn_up", "intermediate.dense"},
        {"ffn_down", "output.dense"},
        {"layer_output_norm", "output.LayerNorm"},
    };
    return t;
}

} // namespace

std::optional<std::string> encoder_gguf_name(const std::string& name, bool to_gguf)
{
    std::string stem, kind;
    for (const char* k : {".weight", ".bias"}) {
        const std::string s(k);
        if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
            stem = name.substr(0, name.size() - s.size());
            kind = s;
        }
    }
    if (kind.empty())
        return std::nullopt;
    for (const auto& [gguf, canonical] : gguf_globals())
        if (stem == (to_gguf ? canonical : gguf))
            return (to_gguf ? gguf : canonical) + kind;
    const std::string from_prefix = to_gguf ? "encoder.layer." : "blk.";
    if (!starts_with(stem, from_prefix))
        return std::nullopt;
    const size_t dot = stem.find('.', from_prefix.size());
    if (dot == std::string::npos)
        return std::nullopt;
    const std::string layer = stem.substr(from_prefix.size(), dot - from_prefix.size());
    if (layer.empty() || layer.size() > 6 || layer.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    const std::string part = stem.substr(dot + 1);
    for (const auto& [gguf, canonical] : gguf_layer_parts())
        if (part == (to_gguf ? canonical : gguf))
            return (to_gguf ? "blk." : "encoder.layer.") + layer + "." + (to_gguf ? gguf : canonical) + kind;
    return std::nullopt;
}

void canonicalize_encoder_names(const ModelConfig& config, WeightMap& weights, const std::string& label,
                                std::vector<std::string>& warnings)
{
    const bool distil = config.model_type == "distilbert";
    WeightMap out;
    bool dropped_nsp = false;
    for (auto& [name, t] : weights) {
        std::string canonical = distil                       ? distilbert_to_bert(name)
                                : starts_with(name, "bert.") ? name.substr(5)
                                                             : name;
        if (starts_with(canonical, "cls.seq_relationship.")) { // BertForPreTraining's next-sentence head
            dropped_nsp = true;
            continue;
        }
        if (!out.emplace(canonical, std::move(t)).second)
            throw InputError(label + ": tensor '" + canonical +
                             "' is stored twice (with and without a prefix)");
    }
    if (dropped_nsp)
        warnings.push_back(label + ": ignored the next-sentence-prediction head (cls.seq_relationship)");
    // The masked-LM decoder is the token table (tied in every bert and distilbert); a
    // copy is dropped once checked, a different matrix refused: EmbedLab ties that head.
    if (const auto it = out.find("cls.predictions.decoder.weight"); it != out.end()) {
        const auto table = out.find(token_table_name(config.arch));
        if (table == out.end() || !table->second.sizes().equals(it->second.sizes()) ||
            !torch::equal(table->second, it->second))
            throw InputError(
                label + ": the masked-LM decoder (" +
                std::string(distil ? "vocab_projector.weight" : "cls.predictions.decoder.weight") +
                ") differs from the token table; EmbedLab reads only a tied masked-LM head");
        out.erase(it);
    }
    if (const auto it = out.find("cls.predictions.decoder.bias"); it != out.end()) {
        const auto bias = out.find("cls.predictions.bias");
        if (bias == out.end())
            out.emplace("cls.predictions.bias", it->second);
        else if (!torch::equal(bias->second, it->second))
            throw InputError(label + ": cls.predictions.decoder.bias differs from cls.predictions.bias");
        out.erase("cls.predictions.decoder.bias");
    }
    weights = std::move(out);
}

std::vector<std::pair<std::string, torch::Tensor>> native_encoder_tensors(const ModelConfig& config,
                                                                          const WeightMap& weights)
{
    std::vector<std::pair<std::string, torch::Tensor>> out;
    const bool distil = config.model_type == "distilbert";
    const bool headed = config.encoder_head != EncoderHead::None;
    for (const auto& [name, t] : weights) {
        const bool head = starts_with(name, "cls.") || starts_with(name, "classifier.") ||
                          starts_with(name, "pre_classifier.");
        if (!distil) {
            out.emplace_back(headed && !head ? "bert." + name : name, t);
            continue;
        }
        std::string native = name;
        for (const auto& [from, to] : distilbert_global_names())
            if (to == name)
                native = from;
        if (starts_with(name, "encoder.layer.")) {
            const size_t dot = name.find('.', 14);
            const std::string part = name.substr(dot + 1);
            std::string hf = part;
            for (const auto& [from, to] : distilbert_layer_names())
                if (to == part)
                    hf = from;
            native = "transformer.layer." + name.substr(14, dot - 14) + "." + hf;
        }
        out.emplace_back(headed && !head ? "distilbert." + native : native, t);
    }
    // transformers expects the tied decoder stored; a compressed directory has no dense
    // table to store (its loader ties the head to the factors).
    const auto table = weights.find(token_table_name(config.arch));
    if (config.encoder_head == EncoderHead::MaskedLM && table != weights.end())
        out.emplace_back(distil ? "vocab_projector.weight" : "cls.predictions.decoder.weight", table->second);
    return out;
}

void read_sentence_transformers_modules(const std::filesystem::path& dir, ModelConfig& config)
{
    namespace fs = std::filesystem;
    const fs::path modules_path = dir / "modules.json";
    std::error_code ec;
    if (!fs::exists(modules_path, ec))
        return;
    using Json = nlohmann::json;
    auto read_json = [](const fs::path& path) {
        return parse_json_unique<Json>(
            read_regular_file(path, metadata_file_cap, "sentence-transformers file"), path.string());
    };
    const Json modules = read_json(modules_path);
    const std::string label = modules_path.string();
    if (!modules.is_array())
        throw InputError(label + ": not a JSON list of modules");
    bool pooled = false;
    for (const Json& m : modules) {
        const std::string type =
            m.is_object() && m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
        const std::string path =
            m.is_object() && m.contains("path") && m["path"].is_string() ? m["path"].get<std::string>() : "";
        const std::string kind = type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
        if (kind == "Transformer") {
            if (!path.empty())
                throw InputError(label + ": the Transformer module sits in '" + path +
                                 "'; EmbedLab reads it from the directory itself (path \"\")");
        } else if (kind == "Pooling") {
            if (path.find("..") != std::string::npos || path.empty() || path.front() == '/')
                throw InputError(label + ": the Pooling module's path '" + path +
                                 "' is not a folder of the model");
            const fs::path pooling_path = dir / path / "config.json";
            const Json p = read_json(pooling_path);
            std::vector<std::string> modes;
            for (const auto& [key, value] : p.items())
                if (key.rfind("pooling_mode_", 0) == 0 && value.is_boolean() && value.get<bool>())
                    modes.push_back(key.substr(13));
            if (modes.size() != 1)
                throw InputError(
                    pooling_path.string() + ": " + std::to_string(modes.size()) +
                    " pooling modes are set; EmbedLab reads exactly one of cls_token, mean_tokens, "
                    "max_tokens");
            const std::string& mode = modes.front();
            if (mode == "cls_token")
                config.pooling = "cls";
            else if (mode == "mean_tokens")
                config.pooling = "mean";
            else if (mode == "max_tokens")
                config.pooling = "max";
            else
                throw InputError(pooling_path.string() + ": pooling mode '" + mode +
                                 "' is not implemented (supported: cls_token, mean_tokens, max_tokens)");
            if (p.contains("word_embedding_dimension") && p["word_embedding_dimension"] != config.hidden_size)
                throw InputError(pooling_path.string() + ": word_embedding_dimension " +
                                 p["word_embedding_dimension"].dump() +
                                 " disagrees with the model's hidden size " +
                                 std::to_string(config.hidden_size));
            pooled = true;
        } else if (kind == "Normalize") {
            config.normalize_embeddings = true;
        } else {
            throw InputError(label + ": sentence-transformers module '" + (type.empty() ? m.dump() : type) +
                             "' is not implemented (supported: Transformer, Pooling, Normalize)");
        }
    }
    if (!pooled)
        throw InputError(label + ": no Pooling module; a sentence-transformers model needs one");
}

} // namespace embedlab::io
