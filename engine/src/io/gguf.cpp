// GGUF llama models -> canonical Hugging Face names, config and embedded vocabulary.
#include <cstring>
#include <optional>
#include <set>

#include "embedlab/error.hpp"
#include "io/canonical_weights.hpp"
#include "io/dtype_convert.hpp"
#include "io/gguf_parser.hpp"
#include "io/readers.hpp"

namespace embedlab::io {

namespace {

class Metadata {
public:
    Metadata(const GgufFile& gguf, const std::string& label) : gguf_(gguf), label_(label) {}

    [[noreturn]] void fail(const std::string& problem) const { throw InputError(label_ + ": " + problem); }

    std::optional<int64_t> integer(const std::string& key) const
    {
        const GgufValue* v = gguf_.find(key);
        if (!v)
            return std::nullopt;
        if (!v->is_integer())
            fail("metadata '" + key + "' must be an integer");
        const bool is_signed = v->type == GgufType::Int8 || v->type == GgufType::Int16 ||
                               v->type == GgufType::Int32 || v->type == GgufType::Int64;
        return is_signed ? v->i : static_cast<int64_t>(std::min<uint64_t>(v->u, INT64_MAX));
    }

    int64_t positive(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const
    {
        const auto v = integer(key);
        if (!v && !fallback)
            fail("missing metadata '" + key + "'");
        const int64_t value = v ? *v : *fallback;
        if (value <= 0)
            fail("metadata '" + key + "' must be positive (got " + std::to_string(value) + ")");
        return value;
    }

    double real(const std::string& key, double fallback) const
    {
        const GgufValue* v = gguf_.find(key);
        if (!v)
            return fallback;
        if (!v->is_float())
            fail("metadata '" + key + "' must be a float");
        return v->f;
    }

    std::optional<std::string> string(const std::string& key) const
    {
        const GgufValue* v = gguf_.find(key);
        if (!v)
            return std::nullopt;
        if (v->type != GgufType::String)
            fail("metadata '" + key + "' must be a string");
        return v->s;
    }

    bool boolean(const std::string& key, bool fallback) const
    {
        const GgufValue* v = gguf_.find(key);
        if (!v)
            return fallback;
        if (v->type != GgufType::Bool)
            fail("metadata '" + key + "' must be a bool");
        return v->u != 0;
    }

    const GgufValue* array(const std::string& key, GgufType elem) const
    {
        const GgufValue* v = gguf_.find(key);
        if (v && (v->type != GgufType::Array || v->elem_type != elem))
            fail("metadata '" + key + "' is not an array of the expected type");
        return v;
    }

private:
    const GgufFile& gguf_;
    std::string label_;
};

ModelConfig read_llama_config(const Metadata& meta)
{
    const auto arch = meta.string("general.architecture");
    if (!arch)
        meta.fail("missing metadata 'general.architecture'");
    if (*arch != "llama")
        meta.fail("general.architecture is '" + *arch + "'; only 'llama' is supported");

    ModelConfig c;
    c.arch = Architecture::Llama;
    c.hidden_size = meta.positive("llama.embedding_length");
    c.num_layers = meta.positive("llama.block_count");
    c.intermediate_size = meta.positive("llama.feed_forward_length");
    c.num_heads = meta.positive("llama.attention.head_count");
    c.num_kv_heads = meta.positive("llama.attention.head_count_kv", c.num_heads);
    c.max_positions = meta.positive("llama.context_length");
    c.norm_eps = meta.real("llama.attention.layer_norm_rms_epsilon", 1e-5);
    c.rope_theta = meta.real("llama.rope.freq_base", 10000.0);
    c.activation = "silu";
    if (c.hidden_size % c.num_heads != 0 || c.head_dim() % 2 != 0 || c.num_heads % c.num_kv_heads != 0)
        meta.fail("inconsistent attention shape: embedding_length " + std::to_string(c.hidden_size) +
                  ", head_count " + std::to_string(c.num_heads) + ", head_count_kv " +
                  std::to_string(c.num_kv_heads));
    if (const auto rot = meta.integer("llama.rope.dimension_count"); rot && *rot != c.head_dim())
        meta.fail("llama.rope.dimension_count " + std::to_string(*rot) + " differs from the head size " +
                  std::to_string(c.head_dim()) + "; partial rotary embeddings are not supported");
    return c;
}

int32_t token_id(const Metadata& meta, const std::string& key, size_t vocab_size,
                 std::vector<std::string>& warnings, const std::string& label)
{
    const auto id = meta.integer(key);
    if (!id || *id == 0xFFFFFFFFLL || *id == -1)
        return -1; // absent, or llama.cpp's "none"
    if (*id < 0 || static_cast<uint64_t>(*id) >= vocab_size) {
        warnings.push_back(label + ": " + key + " " + std::to_string(*id) +
                           " is outside the vocabulary; ignored");
        return -1;
    }
    return static_cast<int32_t>(*id);
}

// tokenizer.ggml.* of a SentencePiece ("llama") tokenizer; nullopt otherwise.
std::optional<ScoredVocab> read_vocab(const Metadata& meta, const std::string& label,
                                      std::vector<std::string>& warnings)
{
    const GgufValue* tokens = meta.array("tokenizer.ggml.tokens", GgufType::String);
    if (!tokens)
        return std::nullopt;
    const std::string model = meta.string("tokenizer.ggml.model").value_or("llama");
    if (model != "llama") {
        warnings.push_back(label + ": tokenizer.ggml.model '" + model +
                           "' is not supported; the embedded vocabulary is not used");
        return std::nullopt;
    }
    const GgufValue* scores = meta.array("tokenizer.ggml.scores", GgufType::Float32);
    if (!scores) {
        warnings.push_back(label + ": no tokenizer.ggml.scores; the embedded vocabulary is not used");
        return std::nullopt;
    }
    const uint64_t n = tokens->count;
    if (scores->count != n)
        meta.fail("tokenizer.ggml.scores has " + std::to_string(scores->count) +
                  " entries but tokenizer.ggml.tokens has " + std::to_string(n));

    ScoredVocab vocab;
    vocab.tokens = tokens->strings;
    vocab.scores.resize(n);
    for (uint64_t k = 0; k < n; ++k)
        vocab.scores[k] = static_cast<float>(scores->element(k).f);
    if (const GgufValue* types = meta.array("tokenizer.ggml.token_type", GgufType::Int32)) {
        if (types->count != n)
            meta.fail("tokenizer.ggml.token_type has " + std::to_string(types->count) +
                      " entries but tokenizer.ggml.tokens has " + std::to_string(n));
        vocab.types.resize(n);
        for (uint64_t k = 0; k < n; ++k)
            vocab.types[k] = static_cast<int32_t>(types->element(k).i);
    }
    vocab.bos_id = token_id(meta, "tokenizer.ggml.bos_token_id", n, warnings, label);
    vocab.eos_id = token_id(meta, "tokenizer.ggml.eos_token_id", n, warnings, label);
    vocab.unk_id = token_id(meta, "tokenizer.ggml.unknown_token_id", n, warnings, label);
    vocab.add_dummy_prefix = meta.boolean("tokenizer.ggml.add_space_prefix", true);
    return vocab;
}

// llama.cpp tensor name -> canonical Hugging Face name; nullopt for unknown names.
std::optional<std::string> canonical_name(const std::string& name)
{
    static const std::map<std::string, std::string> global = {
        {"token_embd.weight", "model.embed_tokens.weight"},
        {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"},
    };
    static const std::map<std::string, std::string> per_layer = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_output.weight", "self_attn.o_proj.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
    };
    if (const auto it = global.find(name); it != global.end())
        return it->second;
    if (name.rfind("blk.", 0) != 0)
        return std::nullopt;
    const size_t digits_end = name.find('.', 4);
    if (digits_end == std::string::npos || digits_end == 4 || digits_end - 4 > 6)
        return std::nullopt;
    const std::string layer = name.substr(4, digits_end - 4);
    if (layer.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    const auto it = per_layer.find(name.substr(digits_end + 1));
    if (it == per_layer.end())
        return std::nullopt;
    return "model.layers." + std::to_string(std::stoi(layer)) + "." + it->second;
}

// The ggml shape [ne0, ne1, ...] (ne0 fastest) is the row-major shape reversed.
std::vector<int64_t> row_major_shape(const GgufTensorInfo& t)
{
    return {t.ne.rbegin(), t.ne.rend()};
}

StoredType stored_type(uint32_t ggml_type)
{
    return ggml_type == 0 ? StoredType::F32 : ggml_type == 1 ? StoredType::F16 : StoredType::BF16;
}

bool same_bytes(const GgufFile& gguf, const MappedFile& file, const GgufTensorInfo& a, uint64_t a_bytes,
                const GgufTensorInfo& b, uint64_t b_bytes)
{
    const uint8_t* data = file.data() + gguf.data_start;
    return a.type == b.type && a.ne == b.ne && a_bytes == b_bytes &&
           std::memcmp(data + a.offset, data + b.offset, a_bytes) == 0;
}

} // namespace

ModelFiles read_gguf(const std::shared_ptr<MappedFile>& file)
{
    const std::string label = file->label();
    const GgufFile gguf = parse_gguf(*file);
    const Metadata meta(gguf, label);

    ModelFiles mf;
    mf.format = ModelFormat::GGUF;
    mf.files = {file->path()};
    mf.config = read_llama_config(meta);
    const std::vector<uint64_t> bytes = check_gguf_tensor_data(gguf, *file);

    // Index the tensors by canonical name before creating any of them.
    std::map<std::string, size_t> index_of;
    for (size_t k = 0; k < gguf.tensors.size(); ++k) {
        const auto name = canonical_name(gguf.tensors[k].name);
        if (!name) {
            mf.warnings.push_back(label + ": ignored tensor '" + gguf.tensors[k].name +
                                  "' (no Hugging Face equivalent)");
            continue;
        }
        if (!index_of.emplace(*name, k).second)
            meta.fail("tensor '" + gguf.tensors[k].name + "' appears twice");
    }

    // Converters from llama2.c store the shared classifier twice; it is one head.
    const auto emb = index_of.find("model.embed_tokens.weight");
    const auto head = index_of.find("lm_head.weight");
    mf.config.tied_embeddings = head == index_of.end();
    if (emb != index_of.end() && head != index_of.end() &&
        same_bytes(gguf, *file, gguf.tensors[emb->second], bytes[emb->second], gguf.tensors[head->second],
                   bytes[head->second])) {
        index_of.erase(head);
        mf.config.tied_embeddings = true;
        mf.warnings.push_back(
            label + ": output.weight is identical to token_embd.weight; treating the output head as "
                    "tied to the token embedding");
    }

    std::set<std::string> stored_types;
    for (const auto& [name, k] : index_of) {
        const GgufTensorInfo& t = gguf.tensors[k];
        const StoredType type = stored_type(t.type);
        mf.weights[name] = tensor_from_mapped(file, gguf.data_start + t.offset, type, row_major_shape(t));
        stored_types.insert(stored_type_name(type));
    }
    mf.stored_dtype = summarize_stored_types(stored_types);

    mf.embedded_vocab = read_vocab(meta, label, mf.warnings);
    if (mf.embedded_vocab) {
        mf.config.vocab_size = static_cast<int64_t>(mf.embedded_vocab->tokens.size());
        mf.config.bos_token_id = mf.embedded_vocab->bos_id;
        mf.config.eos_token_id = mf.embedded_vocab->eos_id;
    } else if (const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
               tokens && tokens->type == GgufType::Array) {
        mf.config.vocab_size = static_cast<int64_t>(tokens->count);
        mf.config.bos_token_id =
            token_id(meta, "tokenizer.ggml.bos_token_id", tokens->count, mf.warnings, label);
        mf.config.eos_token_id =
            token_id(meta, "tokenizer.ggml.eos_token_id", tokens->count, mf.warnings, label);
    } else if (const auto n = meta.integer("llama.vocab_size")) {
        mf.config.vocab_size = *n;
    } else if (const auto it = mf.weights.find("model.embed_tokens.weight"); it != mf.weights.end()) {
        mf.config.vocab_size = it->second.size(0);
    }

    check_weights_against_config(mf.config, mf.weights, label, label);
    for (int64_t layer = 0; layer < mf.config.num_layers; ++layer) {
        const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
        mf.weights[p + "q_proj.weight"] =
            meta_rope_rows_to_hf(mf.weights[p + "q_proj.weight"], mf.config.num_heads);
        mf.weights[p + "k_proj.weight"] =
            meta_rope_rows_to_hf(mf.weights[p + "k_proj.weight"], mf.config.num_kv_heads);
    }
    return mf;
}

} // namespace embedlab::io
