// GGUF models (llama.cpp's llama family and gpt2) -> canonical Hugging Face names, config and
// embedded vocabulary.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "embedlab/error.hpp"
#include "embedlab/parallel_for.hpp"
#include "embedlab/text_format.hpp"
#include "io/canonical_weights.hpp"
#include "io/dtype_convert.hpp"
#include "io/gguf_parser.hpp"
#include "io/gguf_quants.hpp"
#include "io/readers.hpp"

namespace embedlab::io {

namespace {

// The shared typed reads, and the checks a model's numbers need.
class Metadata : public GgufKeys {
public:
    using GgufKeys::GgufKeys;

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

    // A float that must be > 0 (epsilons, RoPE bases): 0 or less computes NaN.
    double positive_real(const std::string& key, double fallback) const
    {
        const double v = real(key, fallback);
        if (!(v > 0) || !std::isfinite(v))
            fail("metadata '" + key + "' must be a positive number (got " + std::to_string(v) + ")");
        return v;
    }

    // A norm epsilon: > 0 and < 1 (see hf_config.cpp).
    double norm_epsilon(const std::string& key, double fallback) const
    {
        const double v = positive_real(key, fallback);
        if (!(v < 1))
            fail("metadata '" + key + "' is " + std::to_string(v) +
                 ": a norm epsilon must be less than 1 (real models use 1e-12 to 1e-5)");
        return v;
    }

    // A rotary base below 1 makes the rotation frequencies overflow (see hf_config.cpp).
    double rope_base(const std::string& key, double fallback) const
    {
        const double v = positive_real(key, fallback);
        if (v < 1)
            fail("metadata '" + key + "' is " + std::to_string(v) +
                 ": a rotary base must be at least 1 (below it the rotation frequencies overflow)");
        return v;
    }
};

// The GGUF architectures EmbedLab reads: gpt2 and its rotary decoder family.
constexpr const char* supported_gguf_architectures =
    "gpt2, llama, qwen2, qwen3, gemma, gemma2, gemma3, phi3, gptneox, bert";

// llama.cpp's gpt2 (EmbedLab's export, or convert_hf_to_gguf.py's): LayerNorm, learned
// positions, gelu (tanh), biases everywhere; the head tied unless output.weight is stored.
ModelConfig read_gpt2_config(const Metadata& meta)
{
    ModelConfig c;
    c.arch = Architecture::GPT2;
    c.model_type = "gpt2";
    c.hidden_size = meta.positive("gpt2.embedding_length");
    c.num_layers = meta.positive("gpt2.block_count");
    c.intermediate_size = meta.positive("gpt2.feed_forward_length", 4 * c.hidden_size);
    c.num_heads = meta.positive("gpt2.attention.head_count");
    c.num_kv_heads = meta.positive("gpt2.attention.head_count_kv", c.num_heads);
    c.max_positions = meta.positive("gpt2.context_length");
    c.norm_eps = meta.norm_epsilon("gpt2.attention.layer_norm_epsilon", 1e-5);
    c.activation = "gelu_new";
    if (c.hidden_size % c.num_heads != 0 || c.num_kv_heads != c.num_heads)
        meta.fail("inconsistent attention shape: embedding_length " + std::to_string(c.hidden_size) +
                  ", head_count " + std::to_string(c.num_heads) + ", head_count_kv " +
                  std::to_string(c.num_kv_heads));
    return c;
}

// A gpt2 GGUF tensor's canonical name (Hugging Face's, without "transformer."), and
// whether it is a Conv1D matrix: stored [in, out] there, as [out, in] rows in GGUF.
std::optional<std::pair<std::string, bool>> gpt2_from_gguf(const std::string& name)
{
    static const std::map<std::string, std::string> global{
        {"token_embd", "wte"}, {"position_embd", "wpe"}, {"output_norm", "ln_f"}, {"output", "lm_head"}};
    static const std::map<std::string, std::pair<std::string, bool>> layer{
        {"attn_norm", {"ln_1", false}},         {"attn_qkv", {"attn.c_attn", true}},
        {"attn_output", {"attn.c_proj", true}}, {"ffn_norm", {"ln_2", false}},
        {"ffn_up", {"mlp.c_fc", true}},         {"ffn_down", {"mlp.c_proj", true}}};
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos)
        return std::nullopt;
    const std::string stem = name.substr(0, dot), kind = name.substr(dot);
    if (kind != ".weight" && kind != ".bias")
        return std::nullopt;
    if (const auto g = global.find(stem); g != global.end())
        return std::pair{g->second + kind, false};
    if (stem.rfind("blk.", 0) != 0)
        return std::nullopt;
    const size_t end = stem.find('.', 4);
    if (end == std::string::npos || end == 4 ||
        !std::all_of(stem.begin() + 4, stem.begin() + static_cast<std::ptrdiff_t>(end),
                     [](char ch) { return ch >= '0' && ch <= '9'; }) ||
        end - 4 > 6)
        return std::nullopt;
    const auto l = layer.find(stem.substr(end + 1));
    if (l == layer.end())
        return std::nullopt;
    return std::pair{"h." + stem.substr(4, end - 4) + "." + l->second.first + kind,
                     l->second.second && kind == ".weight"};
}

// Gemma's switches as llama.cpp's gemma, gemma2 and gemma3 graphs compute them
// (norm weights stored with the 1 added: read back as w, computed as 1 + w).
void read_gemma(const Metadata& meta, const std::string& a, ModelConfig& c)
{
    c.norm = NormKind::RMSOnePlus;
    c.activation = "gelu_pytorch_tanh";
    c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
    if (a == "gemma")
        return;
    c.sandwich_norms = true;
    c.qk_norm = a == "gemma3";
    c.attn_softcap = meta.real(a + ".attn_logit_softcapping", 0.0);
    c.final_softcap = meta.real(a + ".final_logit_softcapping", 0.0);
    if (c.attn_softcap < 0 || c.final_softcap < 0)
        meta.fail("negative soft-cap in " + a + ".*_logit_softcapping");
    const auto window = meta.integer(a + ".attention.sliding_window");
    if (!window || *window <= 0)
        return;
    c.sliding_window = *window;
    // llama.cpp's swa pattern: layer l slides iff l % period < period - 1
    // (gemma2: 2, even layers; gemma3: 6 unless the file says otherwise).
    const int64_t period = a == "gemma3" ? meta.positive(a + ".attention.sliding_window_pattern", 6) : 2;
    for (int64_t l = 0; l < c.num_layers; ++l)
        c.sliding_layers.push_back(l % period < period - 1);
    if (a == "gemma3")
        c.rope_local_theta = meta.rope_base(a + ".rope.freq_base_swa", 10000.0);
}

// llama.cpp's bert (convert_hf_to_gguf.py's BertModel / DistilBertModel): the body
// only, since the converter drops the pooler and the masked-LM head; segment rows
// when token_types is stored (set from the tensor); pooling from bert.pooling_type.
ModelConfig read_bert_config(const Metadata& meta)
{
    ModelConfig c;
    c.arch = Architecture::Bert;
    c.model_type = "bert";
    c.hidden_size = meta.positive("bert.embedding_length");
    c.num_layers = meta.positive("bert.block_count");
    c.intermediate_size = meta.positive("bert.feed_forward_length");
    c.num_heads = meta.positive("bert.attention.head_count");
    c.num_kv_heads = c.num_heads;
    c.max_positions = meta.positive("bert.context_length");
    c.norm_eps = meta.norm_epsilon("bert.attention.layer_norm_epsilon", 1e-12);
    c.activation = "gelu"; // the Hugging Face model's erf GELU (llama.cpp's graph uses the tanh form)
    if (c.hidden_size % c.num_heads != 0)
        meta.fail("bert.embedding_length " + std::to_string(c.hidden_size) + " is not divisible by " +
                  std::to_string(c.num_heads) + " heads");
    if (meta.boolean("bert.attention.causal", false))
        meta.fail("bert.attention.causal is set: a causal bert is not implemented");
    // The vocabulary is read back as a lower-casing WordPiece (load_model.cpp).
    if (!meta.boolean("tokenizer.ggml.normalizer.lowercase", true))
        meta.fail("tokenizer.ggml.normalizer.lowercase is false: a cased WordPiece vocabulary in GGUF is not "
                  "implemented (load the Hugging Face directory instead)");
    switch (meta.integer("bert.pooling_type").value_or(0)) {
    case 0:
        break;
    case 1:
        c.pooling = "mean";
        break;
    case 2:
        c.pooling = "cls";
        break;
    default:
        meta.fail("bert.pooling_type " + std::to_string(*meta.integer("bert.pooling_type")) +
                  " is not implemented (0 none, 1 mean, 2 cls are)");
    }
    return c;
}

ModelConfig read_decoder_config(const Metadata& meta)
{
    const auto arch = meta.string("general.architecture");
    if (!arch)
        meta.fail("missing metadata 'general.architecture'");
    const std::string& a = *arch;
    if (a == "gpt2")
        return read_gpt2_config(meta);
    if (a == "bert")
        return read_bert_config(meta);
    const bool gemma = a == "gemma" || a == "gemma2" || a == "gemma3";
    const bool neox = a == "gptneox";
    if (a != "llama" && a != "qwen2" && a != "qwen3" && a != "phi3" && !neox && !gemma)
        meta.fail("general.architecture is '" + printable(a) + "'; EmbedLab reads " +
                  supported_gguf_architectures + " from GGUF");

    ModelConfig c;
    c.arch = Architecture::Llama;
    c.model_type = a;
    c.hidden_size = meta.positive(a + ".embedding_length");
    c.num_layers = meta.positive(a + ".block_count");
    c.intermediate_size = meta.positive(a + ".feed_forward_length");
    c.num_heads = meta.positive(a + ".attention.head_count");
    c.num_kv_heads = meta.positive(a + ".attention.head_count_kv", c.num_heads);
    c.max_positions = meta.positive(a + ".context_length");
    c.norm_eps = neox ? meta.norm_epsilon(a + ".attention.layer_norm_epsilon", 1e-5)
                      : meta.norm_epsilon(a + ".attention.layer_norm_rms_epsilon", 1e-5);
    c.rope_theta = meta.rope_base(a + ".rope.freq_base", 10000.0);
    c.activation = "silu";
    if (const auto key_length = meta.integer(a + ".attention.key_length");
        key_length && *key_length * c.num_heads != c.hidden_size)
        c.head_size = meta.positive(a + ".attention.key_length");
    if (const auto value_length = meta.integer(a + ".attention.value_length");
        value_length && *value_length != c.head_dim())
        meta.fail(a + ".attention.value_length " + std::to_string(*value_length) +
                  " differs from key_length " + std::to_string(c.head_dim()) +
                  "; such models are not supported");
    if ((c.head_size == 0 && c.hidden_size % c.num_heads != 0) || c.head_dim() % 2 != 0 ||
        c.num_heads % c.num_kv_heads != 0)
        meta.fail("inconsistent attention shape: embedding_length " + std::to_string(c.hidden_size) +
                  ", head_count " + std::to_string(c.num_heads) + ", head_count_kv " +
                  std::to_string(c.num_kv_heads));
    if (const auto rot = meta.integer(a + ".rope.dimension_count");
        neox && rot && *rot > 0 && *rot < c.head_dim() && *rot % 2 == 0)
        c.rotary_dim = *rot; // GPT-NeoX's partial rotary (rotary_pct)
    else if (rot && *rot != c.head_dim())
        meta.fail(a + ".rope.dimension_count " + std::to_string(*rot) + " differs from the head size " +
                  std::to_string(c.head_dim()) + "; partial rotary embeddings are not supported from GGUF");
    // Settings that change the maths and are not implemented here are refused.
    if (const auto type = meta.string(a + ".rope.scaling.type"); type && *type != "none") {
        if (*type != "linear")
            meta.fail("metadata '" + a + ".rope.scaling.type' is '" + printable(*type) +
                      "'; EmbedLab implements linear (llama3 scaling comes as a rope_freqs tensor)");
        const double factor = meta.positive_real(a + ".rope.scaling.factor", 1.0);
        c.rope_freq_divisors.assign(static_cast<size_t>(c.head_dim() / 2), factor);
    }
    if (!gemma && a != "phi3" && meta.integer(a + ".attention.sliding_window"))
        meta.fail("metadata '" + a +
                  ".attention.sliding_window' is set; EmbedLab does not implement "
                  "sliding-window attention for " +
                  a);
    if (a == "qwen2")
        c.qkv_bias = true;
    if (a == "qwen3")
        c.qk_norm = true;
    if (gemma)
        read_gemma(meta, a, c);
    if (a == "phi3") // llama.cpp's phi3: a window on every layer when the file sets one
        if (const auto window = meta.integer(a + ".attention.sliding_window"); window && *window > 0) {
            c.sliding_window = *window;
            c.sliding_layers.assign(static_cast<size_t>(c.num_layers), true);
        }
    if (neox) { // Pythia: LayerNorm with biases, ungated biased MLP, parallel residual
        c.norm = NormKind::LayerNorm;
        c.gated_mlp = false;
        c.activation = "gelu"; // Hugging Face's erf GELU, as the model was trained (llama.cpp: tanh)
        c.qkv_bias = c.o_bias = c.mlp_bias = true;
        c.parallel_residual = meta.boolean(a + ".use_parallel_residual", true);
    }
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

// tokenizer.ggml.* of a SentencePiece ("llama") or WordPiece ("bert") tokenizer;
// nullopt otherwise (gpt2's byte-level BPE is read when its tokenizer is loaded).
std::optional<ScoredVocab> read_vocab(const Metadata& meta, const std::string& label,
                                      std::vector<std::string>& warnings)
{
    const GgufValue* tokens = meta.array("tokenizer.ggml.tokens", GgufType::String);
    if (!tokens)
        return std::nullopt;
    const std::string model = meta.string("tokenizer.ggml.model").value_or("llama");
    if (model == "bert") { // WordPiece in llama.cpp's phantom-space form: tokens and types only
        ScoredVocab vocab;
        vocab.tokens = tokens->strings;
        if (const GgufValue* types = meta.array("tokenizer.ggml.token_type", GgufType::Int32);
            types && types->count == tokens->count)
            for (uint64_t k = 0; k < types->count; ++k)
                vocab.types.push_back(static_cast<int32_t>(types->element(k).i));
        vocab.unk_id = token_id(meta, "tokenizer.ggml.unknown_token_id", tokens->count, warnings, label);
        return vocab;
    }
    if (model == "gpt2") // byte-level BPE: read by the tokenizer loader (tokenizer/gguf_tokenizer.hpp)
        return std::nullopt;
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

    // A vocabulary of empty strings encodes every text to nothing: name the file, not the text.
    if (std::all_of(tokens->strings.begin(), tokens->strings.end(),
                    [](const std::string& t) { return t.empty(); }))
        meta.fail("every string of tokenizer.ggml.tokens is empty (" + std::to_string(n) +
                  " tokens): the file's vocabulary is broken");
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

// The ggml shape [ne0, ne1, ...] (ne0 fastest) is the row-major shape reversed.
std::vector<int64_t> row_major_shape(const GgufTensorInfo& t)
{
    return {t.ne.rbegin(), t.ne.rend()};
}

StoredType stored_type(uint32_t ggml_type)
{
    return ggml_type == 0 ? StoredType::F32 : ggml_type == 1 ? StoredType::F16 : StoredType::BF16;
}

// A tensor as float32: float types through the mapped-file converter, quantised
// blocks dequantised row by row (gguf_quants.hpp). F16/BF16 matrices stay as stored,
// wrapped over the mapped file, under KeepHalfMatrices (load_model_for_generation).
torch::Tensor load_tensor(const GgufFile& gguf, const std::shared_ptr<MappedFile>& file,
                          const GgufTensorInfo& t)
{
    if ((t.type == 1 || t.type == 30) && t.ne.size() == 2 && KeepHalfMatrices::active())
        return half_tensor_from_mapped(file, gguf.data_start + t.offset, stored_type(t.type),
                                       row_major_shape(t));
    if (t.type == 0 || t.type == 1 || t.type == 30)
        return tensor_from_mapped(file, gguf.data_start + t.offset, stored_type(t.type), row_major_shape(t));
    auto out = torch::empty(row_major_shape(t), torch::kFloat32);
    const int64_t row = t.ne[0], rows = out.numel() / std::max<int64_t>(row, 1);
    const uint64_t row_bytes = ggml_row_bytes(t.type, row);
    const uint8_t* src = file->data() + gguf.data_start + t.offset;
    float* dst = out.data_ptr<float>();
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
            dequantize_row(t.type, src + static_cast<uint64_t>(r) * row_bytes, row, dst + r * row);
    });
    file->release(gguf.data_start + t.offset, static_cast<uint64_t>(rows) * row_bytes);
    return out;
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
    mf.config = read_decoder_config(meta);
    const std::string& arch = mf.config.model_type;
    const std::vector<uint64_t> bytes = check_gguf_tensor_data(gguf, *file);

    // Index the tensors by canonical name before creating any of them.
    std::map<std::string, size_t> index_of;
    std::set<std::string> transposed; // gpt2's Conv1D matrices
    std::optional<size_t> rope_freqs;
    const bool gpt2 = mf.config.arch == Architecture::GPT2;
    for (size_t k = 0; k < gguf.tensors.size(); ++k) {
        if (gguf.tensors[k].name == "rope_freqs.weight" && !gpt2) { // llama3 rope_scaling, as divisors
            rope_freqs = k;
            continue;
        }
        std::optional<std::string> name;
        if (gpt2) {
            if (const auto mapped = gpt2_from_gguf(gguf.tensors[k].name)) {
                name = mapped->first;
                if (mapped->second)
                    transposed.insert(mapped->first);
            }
        } else {
            name = canonical_from_gguf(arch, gguf.tensors[k].name);
        }
        if (!name)
            meta.fail("tensor '" + printable(gguf.tensors[k].name) +
                      "' has no meaning EmbedLab implements for " + arch + "; refusing to ignore it");
        if (!index_of.emplace(*name, k).second)
            meta.fail("tensor '" + printable(gguf.tensors[k].name) + "' appears twice");
    }
    // Types by kind ("attn_q.weight" without its "blk.N." prefix), counted over layers.
    std::map<std::string, std::map<std::string, int>> kinds;
    for (const auto& t : gguf.tensors) {
        const size_t dot = t.name.rfind("blk.", 0) == 0 ? t.name.find('.', 4) : std::string::npos;
        kinds[dot == std::string::npos ? t.name : t.name.substr(dot + 1)][ggml_type_name(t.type)] += 1;
    }
    for (const auto& [kind, types] : kinds) {
        std::string text;
        for (const auto& [type, n] : types)
            text += (text.empty() ? "" : " + ") + type + (types.size() > 1 ? " x" + std::to_string(n) : "");
        mf.tensor_types_by_kind[kind] = text;
    }

    if (mf.config.is_encoder()) {
        const auto types = index_of.find("embeddings.token_type_embeddings.weight");
        mf.config.type_vocab_size = types == index_of.end()
                                        ? 0
                                        : static_cast<int64_t>(gguf.tensors[types->second].ne.size() > 1
                                                                   ? gguf.tensors[types->second].ne[1]
                                                                   : 1);
    }
    // Converters from llama2.c store the shared classifier twice; it is one head.
    const std::string table = embedding_name(mf.config.arch);
    const auto emb = index_of.find(table);
    const auto head = index_of.find("lm_head.weight");
    mf.config.tied_embeddings = head == index_of.end() && !mf.config.is_encoder(); // bert: the body alone
    if (emb != index_of.end() && head != index_of.end() &&
        same_bytes(gguf, *file, gguf.tensors[emb->second], bytes[emb->second], gguf.tensors[head->second],
                   bytes[head->second])) {
        // The compare read the head's bytes; nothing will wrap or convert them.
        file->release(gguf.data_start + gguf.tensors[head->second].offset, bytes[head->second]);
        index_of.erase(head);
        mf.config.tied_embeddings = true;
        // What llama2.c converters write (the bundled stories260K): information, not a problem.
        mf.notes.push_back("output.weight is identical to token_embd.weight: one tied head");
    }

    std::set<std::string> stored_types;
    for (const auto& [name, k] : index_of) {
        const GgufTensorInfo& t = gguf.tensors[k];
        auto tensor = load_tensor(gguf, file, t);
        // A half matrix stays a transposed view of the mapped rows (half_add_times reads it so).
        if (transposed.count(name))
            tensor = tensor.scalar_type() == torch::kFloat32 ? tensor.t().contiguous() : tensor.t();
        mf.weights[name] = std::move(tensor);
        stored_types.insert(ggml_type_name(t.type));
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
    } else if (const auto n = meta.integer(arch + ".vocab_size")) {
        mf.config.vocab_size = *n;
    } else if (const auto it = mf.weights.find(table); it != mf.weights.end()) {
        mf.config.vocab_size = it->second.size(0);
    }

    if (rope_freqs) {
        const GgufTensorInfo& t = gguf.tensors[*rope_freqs];
        const auto factors =
            tensor_from_mapped(file, gguf.data_start + t.offset, stored_type(t.type), row_major_shape(t));
        if (factors.dim() != 1 || factors.size(0) != mf.config.rotary_dims() / 2)
            meta.fail("rope_freqs.weight must hold " + std::to_string(mf.config.rotary_dims() / 2) +
                      " frequency factors");
        const auto f = factors.to(torch::kFloat64).contiguous();
        mf.config.rope_freq_divisors.assign(f.data_ptr<double>(), f.data_ptr<double>() + f.numel());
    }

    if (arch == "phi3" || arch == "gptneox") // fused [q | k | v] and [gate | up] rows
        split_gguf_fused_tensors(mf.config, mf.weights, label);
    check_weights_against_config(mf.config, mf.weights, label, label);
    refuse_unused_tensors(mf.config, mf.weights, label);
    if (gguf_norms_store_one_plus(arch))
        for (auto& [name, t] : mf.weights)
            if (is_norm_weight(name))
                t = t - 1.0;
    if (arch == "llama") // llama.cpp's other (NEOX rope) architectures keep Hugging Face's row order
        for (int64_t layer = 0; layer < mf.config.num_layers; ++layer)
            for (const auto& [proj, heads] :
                 {std::pair{"q_proj", mf.config.num_heads}, {"k_proj", mf.config.num_kv_heads}})
                for (const char* kind : {".weight", ".bias"})
                    if (const auto it = mf.weights.find("model.layers." + std::to_string(layer) +
                                                        ".self_attn." + proj + kind);
                        it != mf.weights.end())
                        it->second = meta_rope_rows_to_hf(it->second, heads);
    return mf;
}

} // namespace embedlab::io
