// config.json of a Hugging Face model -> ModelConfig.
#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/format_parsers.hpp"

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

    int64_t optional_int(const char* key, int64_t fallback) const
    {
        const auto it = j_.find(key);
        return it == j_.end() || it->is_null() ? fallback : positive_int(key, *it);
    }

    double optional_double(const char* key, double fallback) const
    {
        const auto it = j_.find(key);
        if (it == j_.end() || it->is_null())
            return fallback;
        if (!it->is_number())
            fail(std::string("field '") + key + "' must be a number (got " + it->dump() + ")");
        return it->get<double>();
    }

    bool optional_bool(const char* key, bool fallback) const
    {
        const auto it = j_.find(key);
        if (it == j_.end() || it->is_null())
            return fallback;
        if (!it->is_boolean())
            fail(std::string("field '") + key + "' must be true or false (got " + it->dump() + ")");
        return it->get<bool>();
    }

    std::string optional_string(const char* key, const std::string& fallback) const
    {
        const auto it = j_.find(key);
        if (it == j_.end() || it->is_null())
            return fallback;
        if (!it->is_string())
            fail(std::string("field '") + key + "' must be a string (got " + it->dump() + ")");
        return it->get<std::string>();
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
    int64_t positive_int(const char* key, const json& v) const
    {
        if (!v.is_number_integer() || v.get<int64_t>() <= 0)
            fail(std::string("field '") + key + "' must be a positive integer (got " + v.dump() + ")");
        return v.get<int64_t>();
    }

    const json& j_;
    std::string label_;
};

ModelConfig parse_gpt2(const ConfigReader& r)
{
    ModelConfig c;
    c.arch = Architecture::GPT2;
    c.vocab_size = r.required_int("vocab_size");
    c.hidden_size = r.required_int("n_embd");
    c.num_layers = r.required_int("n_layer");
    c.num_heads = r.required_int("n_head");
    c.num_kv_heads = c.num_heads;
    c.max_positions = r.required_int("n_positions");
    c.intermediate_size = r.optional_int("n_inner", 4 * c.hidden_size);
    c.norm_eps = r.optional_double("layer_norm_epsilon", 1e-5);
    c.activation = r.optional_string("activation_function", "gelu_new");
    c.tied_embeddings = r.optional_bool("tie_word_embeddings", true);
    c.bos_token_id = r.token_id("bos_token_id");
    c.eos_token_id = r.token_id("eos_token_id");
    if (c.hidden_size % c.num_heads != 0)
        r.fail("n_embd " + std::to_string(c.hidden_size) + " is not divisible by n_head " +
               std::to_string(c.num_heads));
    return c;
}

ModelConfig parse_llama(const ConfigReader& r)
{
    ModelConfig c;
    c.arch = Architecture::Llama;
    c.vocab_size = r.required_int("vocab_size");
    c.hidden_size = r.required_int("hidden_size");
    c.intermediate_size = r.required_int("intermediate_size");
    c.num_layers = r.required_int("num_hidden_layers");
    c.num_heads = r.required_int("num_attention_heads");
    c.num_kv_heads = r.optional_int("num_key_value_heads", c.num_heads);
    c.max_positions = r.required_int("max_position_embeddings");
    c.norm_eps = r.optional_double("rms_norm_eps", 1e-6); // LlamaConfig's default
    c.rope_theta = r.optional_double("rope_theta", 10000.0);
    c.tied_embeddings = r.optional_bool("tie_word_embeddings", false);
    c.activation = r.optional_string("hidden_act", "silu");
    c.bos_token_id = r.token_id("bos_token_id");
    c.eos_token_id = r.token_id("eos_token_id");
    if (c.hidden_size % c.num_heads != 0)
        r.fail("hidden_size " + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads " +
               std::to_string(c.num_heads));
    if (c.num_heads % c.num_kv_heads != 0)
        r.fail("num_attention_heads " + std::to_string(c.num_heads) +
               " is not a multiple of num_key_value_heads " + std::to_string(c.num_kv_heads));
    if (c.head_dim() % 2 != 0)
        r.fail("head size " + std::to_string(c.head_dim()) + " is odd; RoPE needs an even head size");
    // Some models decouple the head size from hidden_size / heads; not supported.
    const int64_t head_dim = r.optional_int("head_dim", c.head_dim());
    if (head_dim != c.head_dim())
        r.fail("head_dim " + std::to_string(head_dim) + " differs from hidden_size / num_attention_heads = " +
               std::to_string(c.head_dim()) + "; such models are not supported");
    return c;
}

} // namespace

ModelConfig parse_hf_config(const std::string& json_text, const std::string& label)
{
    json j;
    try {
        j = json::parse(json_text);
    } catch (const json::exception& ex) {
        throw InputError(label + ": not valid JSON (" + ex.what() + ")");
    }
    if (!j.is_object())
        throw InputError(label + ": not a JSON object");
    const ConfigReader reader(j, label);

    const auto type_it = j.find("model_type");
    if (type_it == j.end() || !type_it->is_string())
        reader.fail("missing field 'model_type' (supported: gpt2, llama)");
    const std::string model_type = type_it->get<std::string>();
    if (model_type == "gpt2")
        return parse_gpt2(reader);
    if (model_type == "llama")
        return parse_llama(reader);
    reader.fail("unsupported model_type '" + model_type + "' (supported: gpt2, llama)");
}

} // namespace embedlab
