// config.json of a Hugging Face model -> ModelConfig.
#include <cmath>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/json_input.hpp"

namespace embedlab {

namespace {

using nlohmann::json;

class ConfigReader {
public:
    ConfigReader(const json& j, const std::string& label) : j_(j), label_(label) {}

    [[noreturn]] void fail(const std::string& problem) const { throw InputError(label_ + ": " + problem); }

    int64_t required_int(const char* key) const
    {
        const auto it = j_.find(key);
        if (it == j_.end() || it->is_null())
            fail(std::string("missing field '") + key + "'");
        return positive_int(key, *it);
    }

    const json* find(const char* key) const
    {
        const auto it = j_.find(key);
        return it == j_.end() ? nullptr : &*it;
    }
    const std::string& label() const { return label_; }

    double required_double(const char* key) const
    {
        const auto it = j_.find(key);
        if (it == j_.end() || it->is_null())
            fail(std::string("missing field '") + key + "'");
        const double v = optional_double(key, 0.0);
        if (!(v > 0) || !std::isfinite(v))
            fail(std::string("field '") + key + "' must be a positive number (got " + it->dump() + ")");
        return v;
    }

    int64_t optional_int(const char* key, int64_t fallback) const
    {
        const auto it = j_.find(key);
        return it == j_.end() || it->is_null() ? fallback : positive_int(key, *it);
    }

    double optional_double(const char* key, double fallback) const
    {
        return optional_value(key, fallback, &json::is_number, "a number");
    }

    // A number that must be > 0 (epsilons, RoPE bases, scales): a zero or negative
    // one computes NaN or garbage without a word, so it is refused by name.
    double positive_double(const char* key, double fallback) const
    {
        const double v = optional_double(key, fallback);
        if (!(v > 0) || !std::isfinite(v))
            fail(std::string("field '") + key + "' must be a positive number (got " + find(key)->dump() +
                 ")");
        return v;
    }

    // A LayerNorm or RMSNorm epsilon: > 0 and < 1. Real models use 1e-12 to 1e-5; one
    // of 1 or more (1e300) swamps the variance, and every norm's output is ~0.
    double norm_epsilon(const char* key, double fallback) const
    {
        const double v = positive_double(key, fallback);
        if (!(v < 1))
            fail(std::string("field '") + key + "' is " + find(key)->dump() +
                 ": a norm epsilon must be less than 1 (real models use 1e-12 to 1e-5)");
        return v;
    }

    // A rotary base: its powers give the rotation frequencies, which overflow (and
    // the forward pass turns NaN) for a base below 1; real models use 1e4 to 1e7.
    double rope_base(const char* key, double fallback) const
    {
        const double v = positive_double(key, fallback);
        if (v < 1)
            fail(std::string("field '") + key + "' is " + find(key)->dump() +
                 ": a rotary base must be at least 1 (below it the rotation frequencies overflow)");
        return v;
    }

    // A soft-cap: 0 or null is "none", otherwise > 0.
    double optional_cap(const char* key) const
    {
        const double v = optional_double(key, 0.0);
        if (!(v >= 0) || !std::isfinite(v))
            fail(std::string("field '") + key + "' must be a positive number or null (got " +
                 find(key)->dump() + ")");
        return v;
    }

    bool optional_bool(const char* key, bool fallback) const
    {
        return optional_value(key, fallback, &json::is_boolean, "true or false");
    }

    std::string optional_string(const char* key, const std::string& fallback) const
    {
        return optional_value(key, fallback, &json::is_string, "a string");
    }

    // Token ids may be null, an integer, or (newer models) a list: take the first.
    int64_t token_id(const char* key) const
    {
        const auto it = j_.find(key);
        if (it == j_.end() || it->is_null())
            return -1;
        const json& v = it->is_array() && !it->empty() ? (*it)[0] : *it;
        if (!v.is_number_integer() || v.get<int64_t>() < 0)
            fail(std::string("field '") + key + "' must be a token id (got " + it->dump() + ")");
        return v.get<int64_t>();
    }

private:
    // `fallback` when the field is absent or null, else its value, which must be of
    // the JSON type `is_type` tests (InputError "field 'key' must be <what>").
    template <class T>
    T optional_value(const char* key, const T& fallback, bool (json::*is_type)() const noexcept,
                     const char* what) const
    {
        const auto it = j_.find(key);
        if (it == j_.end() || it->is_null())
            return fallback;
        if (!((*it).*is_type)())
            fail(std::string("field '") + key + "' must be " + what + " (got " + it->dump() + ")");
        return it->get<T>();
    }

    int64_t positive_int(const char* key, const json& v) const
    {
        if (!v.is_number_integer() || v.get<int64_t>() <= 0)
            fail(std::string("field '") + key + "' must be a positive integer (got " + v.dump() + ")");
        return v.get<int64_t>();
    }

    const json& j_;
    std::string label_;
};

// The keys under which a family names the sizes every family has (vocab_size is
// vocab_size everywhere).
struct SizeKeys {
    const char* hidden = "hidden_size";
    const char* intermediate = "intermediate_size"; // nullptr: the family reads its own (gpt2's n_inner)
    const char* layers = "num_hidden_layers";
    const char* heads = "num_attention_heads";
    const char* kv_heads = nullptr; // nullptr: as many as heads
    const char* positions = "max_position_embeddings";
};

ModelConfig read_sizes(const ConfigReader& r, Architecture arch, const SizeKeys& k)
{
    ModelConfig c;
    c.arch = arch;
    c.vocab_size = r.required_int("vocab_size");
    c.hidden_size = r.required_int(k.hidden);
    if (k.intermediate)
        c.intermediate_size = r.required_int(k.intermediate);
    c.num_layers = r.required_int(k.layers);
    c.num_heads = r.required_int(k.heads);
    c.num_kv_heads = k.kv_heads ? r.optional_int(k.kv_heads, c.num_heads) : c.num_heads;
    c.max_positions = r.required_int(k.positions);
    return c;
}

// tie_word_embeddings, the activation (under `key`) and the BOS and EOS ids.
void read_tying_activation_ids(const ConfigReader& r, ModelConfig& c, bool tied_default, const char* key,
                               const char* activation_default)
{
    c.tied_embeddings = r.optional_bool("tie_word_embeddings", tied_default);
    c.activation = r.optional_string(key, activation_default);
    c.bos_token_id = r.token_id("bos_token_id");
    c.eos_token_id = r.token_id("eos_token_id");
}

void check_heads_divide_hidden(const ConfigReader& r, const ModelConfig& c, const SizeKeys& k)
{
    if (c.hidden_size % c.num_heads != 0)
        r.fail(std::string(k.hidden) + " " + std::to_string(c.hidden_size) + " is not divisible by " +
               k.heads + " " + std::to_string(c.num_heads));
}

ModelConfig parse_gpt2(const ConfigReader& r)
{
    const SizeKeys keys{.hidden = "n_embd",
                        .intermediate = nullptr,
                        .layers = "n_layer",
                        .heads = "n_head",
                        .positions = "n_positions"};
    ModelConfig c = read_sizes(r, Architecture::GPT2, keys);
    c.intermediate_size = r.optional_int("n_inner", 4 * c.hidden_size);
    c.norm_eps = r.norm_epsilon("layer_norm_epsilon", 1e-5);
    read_tying_activation_ids(r, c, true, "activation_function", "gelu_new");
    check_heads_divide_hidden(r, c, keys);
    return c;
}

// The activations the forward pass computes; anything else is refused by name.
void check_activation(const ConfigReader& r, const char* key, const std::string& act)
{
    static const char* known[] = {"silu",      "swish", "gelu", "gelu_new", "gelu_pytorch_tanh",
                                  "gelu_fast", "relu"};
    for (const char* k : known)
        if (act == k)
            return;
    r.fail(std::string("field '") + key + "' is '" + act +
           "', which EmbedLab does not implement (supported: silu, gelu, gelu_new, gelu_pytorch_tanh, "
           "gelu_fast, relu)");
}

// rope_scaling -> per-frequency divisors of the RoPE inverse frequencies, as
// Hugging Face's _compute_linear/_compute_llama3_parameters scale them.
void read_rope_scaling(const ConfigReader& r, ModelConfig& c)
{
    const json* s = r.find("rope_scaling");
    if (!s || s->is_null())
        return;
    if (!s->is_object())
        r.fail("field 'rope_scaling' must be an object or null (got " + s->dump() + ")");
    const ConfigReader scaling(*s, r.label() + ": rope_scaling");
    std::string type = scaling.optional_string("rope_type", "");
    if (type.empty())
        type = scaling.optional_string("type", "");
    if (type == "default")
        return;
    const int64_t half = c.rotary_dims() / 2;
    if (type == "linear") {
        c.rope_freq_divisors.assign(static_cast<size_t>(half), scaling.required_double("factor"));
        return;
    }
    if (type != "llama3")
        r.fail("rope_scaling type '" + type +
               "' is not implemented (supported: linear, llama3); refusing rather than computing the "
               "wrong positions");
    const double factor = scaling.required_double("factor");
    const double low = scaling.required_double("low_freq_factor");
    const double high = scaling.required_double("high_freq_factor");
    const double old_context = static_cast<double>(scaling.required_int("original_max_position_embeddings"));
    if (!(high > low))
        r.fail("rope_scaling: high_freq_factor must exceed low_freq_factor");
    const double low_wavelen = old_context / low, high_wavelen = old_context / high;
    const double pi = 3.14159265358979323846;
    for (int64_t i = 0; i < half; ++i) {
        const double inv_freq =
            1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / static_cast<double>(c.rotary_dims()));
        const double wavelen = 2 * pi / inv_freq;
        double divisor = 1.0;
        if (wavelen > low_wavelen) {
            divisor = factor;
        } else if (wavelen >= high_wavelen) {
            const double smooth = (old_context / wavelen - low) / (high - low);
            divisor = 1.0 / ((1 - smooth) / factor + smooth);
        }
        c.rope_freq_divisors.push_back(divisor);
    }
}

void refuse_if_set(const ConfigReader& r, const char* key, const std::string& why)
{
    const json* v = r.find(key);
    if (v && !v->is_null() && !(v->is_boolean() && !v->get<bool>()))
        r.fail(std::string("field '") + key + "' is " + v->dump() + ": " + why);
}

// Fields every member of the rotary decoder family shares.
ModelConfig read_decoder(const ConfigReader& r, const std::string& model_type, bool tied_default)
{
    ModelConfig c = read_sizes(r, Architecture::Llama, {.kv_heads = "num_key_value_heads"});
    c.model_type = model_type;
    c.norm_eps = r.norm_epsilon("rms_norm_eps", 1e-6); // LlamaConfig's default
    c.rope_theta = r.rope_base("rope_theta", 10000.0);
    read_tying_activation_ids(r, c, tied_default, "hidden_act", "silu");
    if (c.num_heads % c.num_kv_heads != 0)
        r.fail("num_attention_heads " + std::to_string(c.num_heads) +
               " is not a multiple of num_key_value_heads " + std::to_string(c.num_kv_heads));
    const json* head_dim = r.find("head_dim");
    if (head_dim && !head_dim->is_null())
        c.head_size = r.required_int("head_dim");
    else if (c.hidden_size % c.num_heads != 0)
        r.fail("hidden_size " + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads " +
               std::to_string(c.num_heads) + " and there is no head_dim");
    if (const double f = r.optional_double("partial_rotary_factor", 1.0); f != 1.0) {
        if (!(f > 0 && f < 1))
            r.fail("partial_rotary_factor must be in (0, 1]");
        c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim()) * f);
    }
    if (c.rotary_dims() % 2 != 0 || c.rotary_dims() < 2)
        r.fail("rotary size " + std::to_string(c.rotary_dims()) + " is odd; RoPE needs an even size");
    check_activation(r, "hidden_act", c.activation);
    return c;
}

ModelConfig parse_llama(const ConfigReader& r)
{
    ModelConfig c = read_decoder(r, "llama", false);
    c.qkv_bias = c.o_bias = r.optional_bool("attention_bias", false);
    c.mlp_bias = r.optional_bool("mlp_bias", false);
    refuse_if_set(r, "sliding_window", "llama has no sliding-window attention in EmbedLab");
    read_rope_scaling(r, c);
    return c;
}

ModelConfig parse_qwen(const ConfigReader& r, const std::string& model_type)
{
    ModelConfig c = read_decoder(r, model_type, false);
    if (model_type == "qwen2") {
        c.qkv_bias = true; // Qwen2Attention: biased q/k/v, unbiased o
    } else {
        c.qkv_bias = c.o_bias = r.optional_bool("attention_bias", false);
        c.qk_norm = true;
    }
    refuse_if_set(r, "use_sliding_window", "sliding-window attention is not implemented for " + model_type);
    read_rope_scaling(r, c);
    return c;
}

// Which layers slide: `layer_types` when the config lists them, else
// `default_slides(layer)` (the architecture's fixed pattern).
template <class DefaultSlides>
std::vector<bool> read_sliding_layers(const ConfigReader& r, int64_t num_layers, DefaultSlides default_slides)
{
    const json* types = r.find("layer_types");
    if (types && !types->is_null() &&
        !(types->is_array() && static_cast<int64_t>(types->size()) == num_layers))
        r.fail("layer_types must list one entry per layer (" + std::to_string(num_layers) + ")");
    std::vector<bool> slides;
    for (int64_t l = 0; l < num_layers; ++l) {
        if (!types || types->is_null()) {
            slides.push_back(default_slides(l));
            continue;
        }
        const json& t = (*types)[static_cast<size_t>(l)];
        if (t != "sliding_attention" && t != "full_attention")
            r.fail("layer_types[" + std::to_string(l) + "] is " + t.dump() +
                   " (expected sliding_attention or full_attention)");
        slides.push_back(t == "sliding_attention");
    }
    return slides;
}

// gemma, gemma2 and gemma3_text (Gemma 3's text model, e.g. gemma-3-1b).
ModelConfig parse_gemma(const ConfigReader& r, const std::string& model_type)
{
    const bool gemma3 = model_type == "gemma3_text";
    if (gemma3 && r.find("rope_parameters"))
        r.fail("field 'rope_parameters' (the transformers 5 layout of Gemma 3's two RoPE tables) is not "
               "implemented; a config with rope_theta, rope_local_base_freq and rope_scaling is");
    refuse_if_set(r, "use_bidirectional_attention",
                  "bidirectional attention (EmbeddingGemma) is not implemented");
    ModelConfig c = read_decoder(r, model_type, true);
    // Gemma runs hidden_activation; the legacy hidden_act 'gelu' meant the tanh GELU.
    c.activation = r.optional_string("hidden_activation", "gelu_pytorch_tanh");
    check_activation(r, "hidden_activation", c.activation);
    c.norm = NormKind::RMSOnePlus;
    c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
    c.qkv_bias = c.o_bias = r.optional_bool("attention_bias", false);
    if (model_type == "gemma2" || gemma3) {
        c.sandwich_norms = true;
        c.qk_norm = gemma3; // Gemma3Attention: q_norm/k_norm, RMSNorm(1 + w), before RoPE
        c.query_scale =
            1.0 / std::sqrt(r.positive_double("query_pre_attn_scalar", static_cast<double>(c.head_dim())));
        c.attn_softcap = r.optional_cap("attn_logit_softcapping");
        c.final_softcap = r.optional_cap("final_logit_softcapping");
        if (const json* w = r.find("sliding_window"); w && !w->is_null()) {
            c.sliding_window = r.required_int("sliding_window");
            // Gemma2DecoderLayer: even layers slide; Gemma 3: every layer but each
            // sliding_window_pattern-th (5 local, 1 global).
            const int64_t period = gemma3 ? r.optional_int("sliding_window_pattern", 6) : 2;
            c.sliding_layers =
                read_sliding_layers(r, c.num_layers, [&](int64_t l) { return (l + 1) % period != 0; });
        } else if (gemma3) {
            r.fail("gemma3_text without 'sliding_window' is not implemented (every Gemma 3 has one)");
        }
        if (gemma3)
            c.rope_local_theta = r.rope_base("rope_local_base_freq", 10000.0);
    }
    read_rope_scaling(r, c); // Gemma 3: the global layers' table only
    return c;
}

ModelConfig parse_phi3(const ConfigReader& r)
{
    ModelConfig c = read_decoder(r, "phi3", false);
    c.qkv_bias = c.o_bias = r.optional_bool("attention_bias", false);
    if (const json* w = r.find("sliding_window"); w && !w->is_null()) {
        c.sliding_window = r.required_int("sliding_window"); // Phi3Attention: every layer
        c.sliding_layers.assign(static_cast<size_t>(c.num_layers), true);
    }
    read_rope_scaling(r, c);
    return c;
}

// OPT (TensorSLM's OPT-125M): learned positions offset by 2, pre-LayerNorm,
// biased projections, ReLU MLP; OPT-350m's projected table and post-LayerNorm.
ModelConfig parse_opt(const ConfigReader& r)
{
    const SizeKeys keys{.intermediate = "ffn_dim"};
    ModelConfig c = read_sizes(r, Architecture::Llama, keys);
    c.model_type = "opt";
    c.norm_eps = 1e-5; // OPT's LayerNorms use PyTorch's default
    read_tying_activation_ids(r, c, true, "activation_function", "relu");
    check_heads_divide_hidden(r, c, keys);
    check_activation(r, "activation_function", c.activation);
    // OPT-350m: a 512-wide table projected to and from d = 1024, and LayerNorms after
    // the residual adds with no final norm (OPTDecoder keeps final_layer_norm only when
    // do_layer_norm_before and not _remove_final_layer_norm).
    const int64_t projected = r.optional_int("word_embed_proj_dim", c.hidden_size);
    if (projected < 1)
        r.fail("word_embed_proj_dim must be positive, got " + std::to_string(projected));
    c.word_embed_proj_dim = projected == c.hidden_size ? 0 : projected;
    c.post_norm = !r.optional_bool("do_layer_norm_before", true);
    c.final_norm = !c.post_norm && !r.optional_bool("_remove_final_layer_norm", false);
    if (!r.optional_bool("enable_bias", true) || !r.optional_bool("layer_norm_elementwise_affine", true))
        r.fail("OPT without biases or without LayerNorm weights is not implemented");
    c.norm = NormKind::LayerNorm;
    c.gated_mlp = false;
    c.mlp_bias = c.qkv_bias = c.o_bias = true;
    c.learned_positions = true;
    c.position_offset = 2;
    return c;
}

ModelConfig parse_gpt_neox(const ConfigReader& r)
{
    const SizeKeys keys{};
    ModelConfig c = read_sizes(r, Architecture::Llama, keys);
    c.model_type = "gpt_neox";
    c.norm_eps = r.norm_epsilon("layer_norm_eps", 1e-5);
    c.rope_theta = r.rope_base("rotary_emb_base", r.rope_base("rope_theta", 10000.0));
    read_tying_activation_ids(r, c, false, "hidden_act", "gelu");
    check_heads_divide_hidden(r, c, keys);
    check_activation(r, "hidden_act", c.activation);
    c.norm = NormKind::LayerNorm;
    c.gated_mlp = false;
    c.mlp_bias = true;
    c.qkv_bias = c.o_bias = r.optional_bool("attention_bias", true);
    c.parallel_residual = r.optional_bool("use_parallel_residual", true);
    const double pct = r.optional_double("rotary_pct", r.optional_double("partial_rotary_factor", 0.25));
    if (!(pct > 0 && pct <= 1))
        r.fail("rotary_pct must be in (0, 1]");
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim()) * pct);
    if (c.rotary_dim % 2 != 0 || c.rotary_dim < 2)
        r.fail("rotary size " + std::to_string(c.rotary_dim) + " (head size x rotary_pct) is odd or zero");
    refuse_if_set(r, "rope_scaling", "RoPE scaling is not implemented for gpt_neox");
    return c;
}

// The head an encoder's "architectures" entry names; anything else refused by name.
void read_encoder_head(const ConfigReader& r, ModelConfig& c, const std::string& prefix)
{
    std::string arch = prefix + "Model";
    if (const json* a = r.find("architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string())
        arch = (*a)[0].get<std::string>();
    if (arch == prefix + "Model")
        c.encoder_head = EncoderHead::None;
    else if (arch == prefix + "ForMaskedLM" || arch == prefix + "ForPreTraining")
        c.encoder_head = EncoderHead::MaskedLM;
    else if (arch == prefix + "ForSequenceClassification")
        c.encoder_head = EncoderHead::Classification;
    else
        r.fail("architecture '" + arch + "' is not implemented (supported: " + prefix + "Model, " + prefix +
               "ForMaskedLM, " + prefix + "ForSequenceClassification)");
    c.tied_embeddings = c.encoder_head == EncoderHead::MaskedLM; // its decoder is the token table
    if (c.encoder_head != EncoderHead::Classification)
        return;
    // id2label {"0": "negative", ...}, else num_labels (default 2) as LABEL_i.
    int64_t n = r.optional_int("num_labels", 0);
    const json* id2label = r.find("id2label");
    if (id2label && !id2label->is_null()) {
        if (!id2label->is_object() || id2label->empty())
            r.fail("field 'id2label' must be an object {\"0\": label, ...}");
        n = static_cast<int64_t>(id2label->size());
    }
    if (n == 0)
        n = 2;
    c.labels.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const std::string key = std::to_string(i);
        if (!id2label || id2label->is_null()) {
            c.labels[static_cast<size_t>(i)] = "LABEL_" + key;
            continue;
        }
        const auto it = id2label->find(key);
        if (it == id2label->end() || !it->is_string())
            r.fail("id2label has no string label for id " + key + " (ids must be 0.." +
                   std::to_string(n - 1) + ")");
        c.labels[static_cast<size_t>(i)] = it->get<std::string>();
    }
    const std::string problem = r.optional_string("problem_type", "");
    if (problem == "multi_label_classification")
        r.fail(
            "problem_type 'multi_label_classification' is not implemented (single-label and regression are)");
}

ModelConfig parse_bert(const ConfigReader& r)
{
    const SizeKeys keys{};
    ModelConfig c = read_sizes(r, Architecture::Bert, keys);
    c.model_type = "bert";
    c.norm_eps = r.norm_epsilon("layer_norm_eps", 1e-12);
    c.activation = r.optional_string("hidden_act", "gelu");
    check_activation(r, "hidden_act", c.activation);
    check_heads_divide_hidden(r, c, keys);
    c.type_vocab_size = r.optional_int("type_vocab_size", 2);
    const std::string positions = r.optional_string("position_embedding_type", "absolute");
    if (positions != "absolute")
        r.fail("position_embedding_type '" + positions + "' is not implemented (absolute is)");
    refuse_if_set(r, "is_decoder", "bert as a decoder is not implemented");
    refuse_if_set(r, "add_cross_attention", "cross-attention is not implemented");
    read_encoder_head(r, c, "Bert");
    return c;
}

ModelConfig parse_distilbert(const ConfigReader& r)
{
    const SizeKeys keys{
        .hidden = "dim", .intermediate = "hidden_dim", .layers = "n_layers", .heads = "n_heads"};
    ModelConfig c = read_sizes(r, Architecture::Bert, keys);
    c.model_type = "distilbert";
    c.norm_eps = 1e-12; // DistilBERT's LayerNorms
    c.activation = r.optional_string("activation", "gelu");
    check_activation(r, "activation", c.activation);
    check_heads_divide_hidden(r, c, keys);
    c.type_vocab_size = 0;
    // sinusoidal_pos_embds: the table is still stored in the checkpoint, read as any table.
    read_encoder_head(r, c, "DistilBert");
    return c;
}

} // namespace

constexpr const char* supported_types =
    "gpt2, llama, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, gpt_neox, opt, bert, distilbert";

ModelConfig parse_hf_config(const std::string& json_text, const std::string& label)
{
    const json j = parse_json_unique<json>(json_text, label);
    if (!j.is_object())
        throw InputError(label + ": not a JSON object");
    const ConfigReader reader(j, label);

    const auto type_it = j.find("model_type");
    if (type_it == j.end() || !type_it->is_string())
        reader.fail(std::string("missing field 'model_type' (supported: ") + supported_types + ")");
    const std::string model_type = type_it->get<std::string>();
    if (model_type == "gpt2") {
        ModelConfig c = parse_gpt2(reader);
        c.model_type = "gpt2";
        check_activation(reader, "activation_function", c.activation);
        return c;
    }
    if (model_type == "llama")
        return parse_llama(reader);
    if (model_type == "qwen2" || model_type == "qwen3")
        return parse_qwen(reader, model_type);
    if (model_type == "gemma" || model_type == "gemma2" || model_type == "gemma3_text")
        return parse_gemma(reader, model_type);
    if (model_type == "gemma3")
        reader.fail("model_type 'gemma3' is the multimodal Gemma 3 (vision tower + language model); EmbedLab "
                    "reads its text-only form, model_type 'gemma3_text' (e.g. gemma-3-1b)");
    if (model_type == "phi3")
        return parse_phi3(reader);
    if (model_type == "gpt_neox")
        return parse_gpt_neox(reader);
    if (model_type == "opt")
        return parse_opt(reader);
    if (model_type == "bert")
        return parse_bert(reader);
    if (model_type == "distilbert")
        return parse_distilbert(reader);
    reader.fail("unsupported model_type '" + model_type + "' (supported: " + supported_types + ")");
}

} // namespace embedlab
