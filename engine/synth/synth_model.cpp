// Random-weight Hugging Face directories in the layout of real checkpoints.
#include "embedlab/synth_model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <span>
#include <tuple>
#include <unordered_set>

#include "embedlab/parallel_for.hpp"
#include <nlohmann/json.hpp>

#include "embedlab/file_input.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/resources.hpp"
#include "io/gguf_output.hpp"

namespace embedlab {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

static_assert(std::endian::native == std::endian::little, "safetensors output needs a little-endian host");

enum class Family { GPT2, Llama, NeoX, OPT };

struct TokenizerPlan {
    enum class Kind {
        Gpt2Files,       // tokenizer.json, vocab.json, merges.txt copied (the model uses GPT-2's)
        Gpt2VocabMerges, // vocab.json, merges.txt copied (OPT ships these two)
        Synthesized,     // a byte-level BPE tokenizer.json of `size` tokens built on GPT-2's
    };
    Kind kind = Kind::Gpt2Files;
    int64_t size = 0;
    std::vector<std::pair<int64_t, std::string>> specials; // at the real model's ids
    std::string real;                                      // what the real model ships
};

struct ModelSpec {
    std::string like, repo;
    Family family = Family::Llama;
    bool qkv_bias = false; // Qwen2
    std::string dtype;     // of the real checkpoint
    Json config;           // the real config.json
    TokenizerPlan tokenizer;
};

std::vector<std::pair<int64_t, std::string>> llama3_specials()
{
    std::vector<std::pair<int64_t, std::string>> s = {{128000, "<|begin_of_text|>"},
                                                      {128001, "<|end_of_text|>"},
                                                      {128002, "<|reserved_special_token_0|>"},
                                                      {128003, "<|reserved_special_token_1|>"},
                                                      {128004, "<|finetune_right_pad_id|>"},
                                                      {128005, "<|reserved_special_token_2|>"},
                                                      {128006, "<|start_header_id|>"},
                                                      {128007, "<|end_header_id|>"},
                                                      {128008, "<|eom_id|>"},
                                                      {128009, "<|eot_id|>"},
                                                      {128010, "<|python_tag|>"}};
    for (int64_t id = 128011; id < 128256; ++id)
        s.emplace_back(id, "<|reserved_special_token_" + std::to_string(id - 128008) + "|>");
    return s;
}

std::vector<std::pair<int64_t, std::string>> numbered(int64_t first, const std::vector<std::string>& names)
{
    std::vector<std::pair<int64_t, std::string>> s;
    for (const auto& n : names)
        s.emplace_back(first++, n);
    return s;
}

Json gpt2_config(int64_t n_embd, int64_t n_head, int64_t n_layer)
{
    return {{"activation_function", "gelu_new"},
            {"architectures", {"GPT2LMHeadModel"}},
            {"attn_pdrop", 0.1},
            {"bos_token_id", 50256},
            {"embd_pdrop", 0.1},
            {"eos_token_id", 50256},
            {"initializer_range", 0.02},
            {"layer_norm_epsilon", 1e-05},
            {"model_type", "gpt2"},
            {"n_ctx", 1024},
            {"n_embd", n_embd},
            {"n_head", n_head},
            {"n_layer", n_layer},
            {"n_positions", 1024},
            {"resid_pdrop", 0.1},
            {"summary_activation", nullptr},
            {"summary_first_dropout", 0.1},
            {"summary_proj_to_labels", true},
            {"summary_type", "cls_index"},
            {"summary_use_proj", true},
            {"task_specific_params", {{"text-generation", {{"do_sample", true}, {"max_length", 50}}}}},
            {"vocab_size", 50257}};
}

Json smollm2_config(int64_t hidden, int64_t intermediate, int64_t heads, int64_t kv_heads, int64_t layers,
                    double init)
{
    return {{"architectures", {"LlamaForCausalLM"}},
            {"attention_bias", false},
            {"attention_dropout", 0.0},
            {"bos_token_id", 0},
            {"eos_token_id", 0},
            {"head_dim", 64},
            {"hidden_act", "silu"},
            {"hidden_size", hidden},
            {"initializer_range", init},
            {"intermediate_size", intermediate},
            {"is_llama_config", true},
            {"max_position_embeddings", 8192},
            {"mlp_bias", false},
            {"model_type", "llama"},
            {"num_attention_heads", heads},
            {"num_hidden_layers", layers},
            {"num_key_value_heads", kv_heads},
            {"pretraining_tp", 1},
            {"rms_norm_eps", 1e-05},
            {"rope_interleaved", false},
            {"rope_scaling", nullptr},
            {"rope_theta", 100000},
            {"tie_word_embeddings", true},
            {"torch_dtype", "bfloat16"},
            {"transformers_version", "4.42.3"},
            {"use_cache", true},
            {"vocab_size", 49152}};
}

const std::vector<ModelSpec>& model_specs()
{
    static const std::vector<ModelSpec> specs = [] {
        const std::vector<std::string> starcoder_specials = {
            "<|endoftext|>",    "<|im_start|>",    "<|im_end|>",     "<repo_name>",    "<reponame>",
            "<file_sep>",       "<filename>",      "<gh_stars>",     "<issue_start>",  "<issue_comment>",
            "<issue_closed>",   "<jupyter_start>", "<jupyter_text>", "<jupyter_code>", "<jupyter_output>",
            "<jupyter_script>", "<empty_output>"};
        const std::vector<std::string> qwen_specials = {
            "<|endoftext|>",      "<|im_start|>",     "<|im_end|>",     "<|object_ref_start|>",
            "<|object_ref_end|>", "<|box_start|>",    "<|box_end|>",    "<|quad_start|>",
            "<|quad_end|>",       "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
            "<|image_pad|>",      "<|video_pad|>",    "<tool_call>",    "</tool_call>",
            "<|fim_prefix|>",     "<|fim_middle|>",   "<|fim_suffix|>", "<|fim_pad|>",
            "<|repo_name|>",      "<|file_sep|>"};
        const TokenizerPlan gpt2_files{TokenizerPlan::Kind::Gpt2Files, 0, {}, "GPT-2's byte-level BPE"};
        const TokenizerPlan smollm2_tokenizer{TokenizerPlan::Kind::Synthesized, 49152,
                                              numbered(0, starcoder_specials),
                                              "SmolLM2's 49152-token byte-level BPE"};
        std::vector<ModelSpec> s;
        s.push_back({"gpt2-small", "openai-community/gpt2", Family::GPT2, false, "f32",
                     gpt2_config(768, 12, 12), gpt2_files});
        Json medium = gpt2_config(1024, 16, 24);
        medium["n_special"] = 0;
        medium["predict_special_tokens"] = true;
        s.push_back(
            {"gpt2-medium", "openai-community/gpt2-medium", Family::GPT2, false, "f32", medium, gpt2_files});
        s.push_back({"smollm2-135m", "HuggingFaceTB/SmolLM2-135M", Family::Llama, false, "bf16",
                     smollm2_config(576, 1536, 9, 3, 30, 0.041666666666666664), smollm2_tokenizer});
        s.push_back({"smollm2-360m", "HuggingFaceTB/SmolLM2-360M", Family::Llama, false, "bf16",
                     smollm2_config(960, 2560, 15, 5, 32, 0.02), smollm2_tokenizer});
        s.push_back({"qwen2.5-0.5b",
                     "Qwen/Qwen2.5-0.5B",
                     Family::Llama,
                     true,
                     "bf16",
                     {{"architectures", {"Qwen2ForCausalLM"}},
                      {"attention_dropout", 0.0},
                      {"bos_token_id", 151643},
                      {"eos_token_id", 151643},
                      {"hidden_act", "silu"},
                      {"hidden_size", 896},
                      {"initializer_range", 0.02},
                      {"intermediate_size", 4864},
                      {"max_position_embeddings", 32768},
                      {"max_window_layers", 24},
                      {"model_type", "qwen2"},
                      {"num_attention_heads", 14},
                      {"num_hidden_layers", 24},
                      {"num_key_value_heads", 2},
                      {"rms_norm_eps", 1e-06},
                      {"rope_theta", 1000000.0},
                      {"sliding_window", 32768},
                      {"tie_word_embeddings", true},
                      {"torch_dtype", "bfloat16"},
                      {"transformers_version", "4.40.1"},
                      {"use_cache", true},
                      {"use_mrope", false},
                      {"use_sliding_window", false},
                      {"vocab_size", 151936}},
                     {TokenizerPlan::Kind::Synthesized, 151665, numbered(151643, qwen_specials),
                      "Qwen2.5's byte-level BPE: 151643 tokens and 22 special tokens (151665 ids; the "
                      "embedding has 151936 rows)"}});
        s.push_back({"llama-3.2-1b",
                     "meta-llama/Llama-3.2-1B",
                     Family::Llama,
                     false,
                     "bf16",
                     {{"architectures", {"LlamaForCausalLM"}},
                      {"attention_bias", false},
                      {"attention_dropout", 0.0},
                      {"bos_token_id", 128000},
                      {"eos_token_id", 128001},
                      {"head_dim", 64},
                      {"hidden_act", "silu"},
                      {"hidden_size", 2048},
                      {"initializer_range", 0.02},
                      {"intermediate_size", 8192},
                      {"max_position_embeddings", 131072},
                      {"mlp_bias", false},
                      {"model_type", "llama"},
                      {"num_attention_heads", 32},
                      {"num_hidden_layers", 16},
                      {"num_key_value_heads", 8},
                      {"pretraining_tp", 1},
                      {"rms_norm_eps", 1e-05},
                      {"rope_scaling",
                       {{"factor", 32.0},
                        {"high_freq_factor", 4.0},
                        {"low_freq_factor", 1.0},
                        {"original_max_position_embeddings", 8192},
                        {"rope_type", "llama3"}}},
                      {"rope_theta", 500000.0},
                      {"tie_word_embeddings", true},
                      {"torch_dtype", "bfloat16"},
                      {"transformers_version", "4.45.0.dev0"},
                      {"use_cache", true},
                      {"vocab_size", 128256}},
                     {TokenizerPlan::Kind::Synthesized, 128256, llama3_specials(),
                      "Llama 3's 128000-token byte-level BPE and 256 special tokens"}});
        s.push_back({"pythia-160m",
                     "EleutherAI/pythia-160m",
                     Family::NeoX,
                     false,
                     "f16",
                     {{"architectures", {"GPTNeoXForCausalLM"}},
                      {"bos_token_id", 0},
                      {"eos_token_id", 0},
                      {"hidden_act", "gelu"},
                      {"hidden_size", 768},
                      {"initializer_range", 0.02},
                      {"intermediate_size", 3072},
                      {"layer_norm_eps", 1e-05},
                      {"max_position_embeddings", 2048},
                      {"model_type", "gpt_neox"},
                      {"num_attention_heads", 12},
                      {"num_hidden_layers", 12},
                      {"rotary_emb_base", 10000},
                      {"rotary_pct", 0.25},
                      {"tie_word_embeddings", false},
                      {"torch_dtype", "float16"},
                      {"transformers_version", "4.24.0"},
                      {"use_cache", true},
                      {"use_parallel_residual", true},
                      {"vocab_size", 50304}},
                     {TokenizerPlan::Kind::Synthesized,
                      50277,
                      {{0, "<|endoftext|>"}, {1, "<|padding|>"}},
                      "GPT-NeoX-20B's byte-level BPE (50277 ids; the embedding has 50304 rows)"}});
        s.push_back({"opt-125m",
                     "facebook/opt-125m",
                     Family::OPT,
                     false,
                     "f16",
                     {{"_remove_final_layer_norm", false},
                      {"activation_dropout", 0.0},
                      {"activation_function", "relu"},
                      {"architectures", {"OPTForCausalLM"}},
                      {"attention_dropout", 0.0},
                      {"bos_token_id", 2},
                      {"do_layer_norm_before", true},
                      {"dropout", 0.1},
                      {"eos_token_id", 2},
                      {"ffn_dim", 3072},
                      {"hidden_size", 768},
                      {"init_std", 0.02},
                      {"layerdrop", 0.0},
                      {"max_position_embeddings", 2048},
                      {"model_type", "opt"},
                      {"num_attention_heads", 12},
                      {"num_hidden_layers", 12},
                      {"pad_token_id", 1},
                      {"prefix", "</s>"},
                      {"torch_dtype", "float16"},
                      {"transformers_version", "4.21.0.dev0"},
                      {"use_cache", true},
                      {"vocab_size", 50272},
                      {"word_embed_proj_dim", 768}},
                     {TokenizerPlan::Kind::Gpt2VocabMerges,
                      0,
                      {},
                      "GPT-2's BPE merges with a vocab.json in fairseq's order (<s>, <pad>, </s>, <unk> "
                      "first)"}});
        return s;
    }();
    return specs;
}

// ---- Tensors --------------------------------------------------------------

struct Init {
    bool uniform = false;
    double a = 0, b = 0; // normal: mean a, std b; uniform: [a, b)
};

struct PlannedTensor {
    std::string name;
    std::vector<int64_t> shape;
    Init init;
};

constexpr double bias_std = 0.02;

int64_t config_int(const Json& c, const char* key)
{
    return c.at(key).get<int64_t>();
}

// The real checkpoint's tensor names and shapes (causal-mask buffers left out).
std::vector<PlannedTensor> plan_tensors(const ModelSpec& spec, const Json& c, int64_t layers)
{
    const double init_std = c.contains("initializer_range") ? c.at("initializer_range").get<double>()
                                                            : c.at("init_std").get<double>();
    const Init weight{false, 0.0, init_std}, scale{true, 0.5, 1.5}, bias{false, 0.0, bias_std};
    const int64_t V = config_int(c, "vocab_size");
    std::vector<PlannedTensor> t;
    auto add = [&](std::string name, std::vector<int64_t> shape, Init init) {
        t.push_back({std::move(name), std::move(shape), init});
    };
    auto layer_norm = [&](const std::string& name, int64_t d) {
        add(name + ".weight", {d}, scale);
        add(name + ".bias", {d}, bias);
    };
    // out x in, as torch.nn.Linear stores it (GPT-2's Conv1D is in x out).
    auto linear = [&](const std::string& name, int64_t out, int64_t in, bool with_bias) {
        add(name + ".weight", {out, in}, weight);
        if (with_bias)
            add(name + ".bias", {out}, bias);
    };
    switch (spec.family) {
    case Family::GPT2: {
        const int64_t d = config_int(c, "n_embd"), ff = c.value("n_inner", 4 * d);
        add("wte.weight", {V, d}, weight);
        add("wpe.weight", {config_int(c, "n_positions"), d}, weight);
        for (int64_t l = 0; l < layers; ++l) {
            const std::string p = "h." + std::to_string(l) + ".";
            layer_norm(p + "ln_1", d);
            add(p + "attn.c_attn.weight", {d, 3 * d}, weight);
            add(p + "attn.c_attn.bias", {3 * d}, bias);
            add(p + "attn.c_proj.weight", {d, d}, weight);
            add(p + "attn.c_proj.bias", {d}, bias);
            layer_norm(p + "ln_2", d);
            add(p + "mlp.c_fc.weight", {d, ff}, weight);
            add(p + "mlp.c_fc.bias", {ff}, bias);
            add(p + "mlp.c_proj.weight", {ff, d}, weight);
            add(p + "mlp.c_proj.bias", {d}, bias);
        }
        layer_norm("ln_f", d);
        break;
    }
    case Family::Llama: {
        const int64_t d = config_int(c, "hidden_size"), ff = config_int(c, "intermediate_size");
        const int64_t H = config_int(c, "num_attention_heads"), Hkv = config_int(c, "num_key_value_heads");
        const int64_t hd = c.contains("head_dim") ? config_int(c, "head_dim") : d / H;
        add("model.embed_tokens.weight", {V, d}, weight);
        for (int64_t l = 0; l < layers; ++l) {
            const std::string p = "model.layers." + std::to_string(l) + ".";
            add(p + "input_layernorm.weight", {d}, scale);
            linear(p + "self_attn.q_proj", H * hd, d, spec.qkv_bias);
            linear(p + "self_attn.k_proj", Hkv * hd, d, spec.qkv_bias);
            linear(p + "self_attn.v_proj", Hkv * hd, d, spec.qkv_bias);
            linear(p + "self_attn.o_proj", d, H * hd, false);
            add(p + "post_attention_layernorm.weight", {d}, scale);
            linear(p + "mlp.gate_proj", ff, d, false);
            linear(p + "mlp.up_proj", ff, d, false);
            linear(p + "mlp.down_proj", d, ff, false);
        }
        add("model.norm.weight", {d}, scale);
        if (!c.value("tie_word_embeddings", false))
            add("lm_head.weight", {V, d}, weight);
        break;
    }
    case Family::NeoX: {
        const int64_t d = config_int(c, "hidden_size"), ff = config_int(c, "intermediate_size");
        add("gpt_neox.embed_in.weight", {V, d}, weight);
        for (int64_t l = 0; l < layers; ++l) {
            const std::string p = "gpt_neox.layers." + std::to_string(l) + ".";
            layer_norm(p + "input_layernorm", d);
            layer_norm(p + "post_attention_layernorm", d);
            linear(p + "attention.query_key_value", 3 * d, d, true); // rows per head: q, k, v
            linear(p + "attention.dense", d, d, true);
            linear(p + "mlp.dense_h_to_4h", ff, d, true);
            linear(p + "mlp.dense_4h_to_h", d, ff, true);
        }
        layer_norm("gpt_neox.final_layer_norm", d);
        add("embed_out.weight", {V, d}, weight);
        break;
    }
    case Family::OPT: {
        const int64_t d = config_int(c, "hidden_size"), ff = config_int(c, "ffn_dim");
        add("model.decoder.embed_tokens.weight", {V, d}, weight);
        // OPT's learned positions start at offset 2.
        add("model.decoder.embed_positions.weight", {config_int(c, "max_position_embeddings") + 2, d},
            weight);
        for (int64_t l = 0; l < layers; ++l) {
            const std::string p = "model.decoder.layers." + std::to_string(l) + ".";
            linear(p + "self_attn.k_proj", d, d, true);
            linear(p + "self_attn.v_proj", d, d, true);
            linear(p + "self_attn.q_proj", d, d, true);
            linear(p + "self_attn.out_proj", d, d, true);
            layer_norm(p + "self_attn_layer_norm", d);
            linear(p + "fc1", ff, d, true);
            linear(p + "fc2", d, ff, true);
            layer_norm(p + "final_layer_norm", d);
        }
        layer_norm("model.decoder.final_layer_norm", d);
        break;
    }
    }
    return t;
}

// ---- Random values --------------------------------------------------------

// Values per random stream: every block is generated on its own (in parallel,
// from any chunk boundary) and gives the same values however it is scheduled.
constexpr int64_t block_values = int64_t{1} << 16;

uint64_t splitmix64(uint64_t& x)
{
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

class Xoshiro256StarStar {
public:
    explicit Xoshiro256StarStar(uint64_t seed)
    {
        for (auto& word : s_)
            word = splitmix64(seed);
    }
    uint64_t next()
    {
        const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = std::rotl(s_[3], 45);
        return result;
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; } // [0, 1)

private:
    uint64_t s_[4];
};

uint64_t fnv1a(const std::string& s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char ch : s)
        h = (h ^ ch) * 0x100000001b3ull;
    return h;
}

// Seeded by name, not position in the file: --layers does not change the other tensors.
uint64_t block_seed(uint64_t seed, const std::string& name, int64_t block)
{
    uint64_t x = seed;
    return splitmix64(x) ^ fnv1a(name) ^ (static_cast<uint64_t>(block) * 0xD1B54A32D192ED03ull);
}

void generate_block(uint64_t stream_seed, const Init& init, float* out, int64_t count)
{
    Xoshiro256StarStar rng(stream_seed);
    if (init.uniform) {
        for (int64_t i = 0; i < count; ++i)
            out[i] = static_cast<float>(init.a + (init.b - init.a) * rng.uniform());
        return;
    }
    // Marsaglia's polar form of Box-Muller: two normals per accepted pair, no trigonometry.
    for (int64_t i = 0; i < count; i += 2) {
        double u = 0, v = 0, s = 0;
        do {
            u = 2 * rng.uniform() - 1;
            v = 2 * rng.uniform() - 1;
            s = u * u + v * v;
        } while (s >= 1.0 || s == 0.0);
        const double f = std::sqrt(-2.0 * std::log(s) / s);
        out[i] = static_cast<float>(init.a + init.b * u * f);
        if (i + 1 < count)
            out[i + 1] = static_cast<float>(init.a + init.b * v * f);
    }
}

// Round to nearest even; the values are finite.
uint16_t float_to_bfloat16(float f)
{
    const auto x = std::bit_cast<uint32_t>(f);
    return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

struct DtypeInfo {
    const char* option;      // "bf16"
    const char* safetensors; // "BF16"
    const char* torch_name;  // "bfloat16" (config.json's torch_dtype)
    uint64_t size;
};

const DtypeInfo& dtype_info(const std::string& option)
{
    static const DtypeInfo known[] = {
        {"f32", "F32", "float32", 4}, {"f16", "F16", "float16", 2}, {"bf16", "BF16", "bfloat16", 2}};
    for (const auto& d : known)
        if (option == d.option)
            return d;
    throw InputError("synth: dtype '" + option + "': use f32, f16 or bf16");
}

// Bytes [offset, offset + out.size()) of `tensor` in `dtype`; offset is a multiple
// of a block's bytes, so the blocks it covers are whole (the tensor's last may be short).
void fill_tensor(const PlannedTensor& tensor, uint64_t seed, const DtypeInfo& dtype, uint64_t offset,
                 std::span<char> out)
{
    const auto first = static_cast<int64_t>(offset / dtype.size);
    if (first % block_values != 0)
        throw std::logic_error("synth: a chunk starts inside a random block");
    const auto count = static_cast<int64_t>(out.size() / dtype.size);
    const int64_t blocks = (count + block_values - 1) / block_values;
    at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
        std::vector<float> values(static_cast<size_t>(block_values));
        for (int64_t b = b0; b < b1; ++b) {
            const int64_t n = std::min(block_values, count - b * block_values);
            generate_block(block_seed(seed, tensor.name, (first / block_values) + b), tensor.init,
                           values.data(), n);
            char* dst = out.data() + static_cast<size_t>(b * block_values) * dtype.size;
            if (dtype.size == 4) {
                std::memcpy(dst, values.data(), static_cast<size_t>(n) * 4);
                continue;
            }
            const bool bf16 = std::strcmp(dtype.option, "bf16") == 0;
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = bf16 ? float_to_bfloat16(values[static_cast<size_t>(i)])
                                        : io::float_to_half(values[static_cast<size_t>(i)]);
                std::memcpy(dst + 2 * i, &h, 2);
            }
        }
    });
}

// ---- Tokenizers -----------------------------------------------------------

struct Gpt2Vocabulary {
    std::vector<std::string> tokens; // ids 0..50255: the 256 bytes, then merge i's result at 256 + i
    std::vector<std::string> merges; // "left right", in priority order
};

Gpt2Vocabulary read_gpt2_vocabulary(const fs::path& tokenizer_json)
{
    const std::string label = tokenizer_json.string();
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(
            io::read_regular_file(tokenizer_json, io::tokenizer_file_cap, "tokenizer file"));
    } catch (const nlohmann::json::exception& e) {
        throw InputError(label + ": not valid JSON (" + e.what() + ")");
    }
    Gpt2Vocabulary v;
    try {
        const auto& vocab = j.at("model").at("vocab");
        v.tokens.resize(50256);
        for (const auto& [text, id] : vocab.items()) {
            const auto i = id.get<int64_t>();
            if (i >= 0 && i < 50256)
                v.tokens[static_cast<size_t>(i)] = text;
        }
        for (const auto& m : j.at("model").at("merges"))
            v.merges.push_back(m.is_string() ? m.get<std::string>()
                                             : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
    } catch (const nlohmann::json::exception& e) {
        throw InputError(label + ": not a Hugging Face BPE tokenizer.json (" + e.what() + ")");
    }
    // The synthesized vocabularies take GPT-2's tokens in id order, so ids must
    // follow the merges for every prefix of them to be a working BPE.
    bool gpt2 = v.merges.size() == 50000;
    for (size_t i = 0; gpt2 && i < v.merges.size(); ++i) {
        const size_t space = v.merges[i].find(' ');
        gpt2 = space != std::string::npos &&
               v.merges[i].substr(0, space) + v.merges[i].substr(space + 1) == v.tokens[256 + i];
    }
    if (!gpt2)
        throw InputError(label + ": not GPT-2's tokenizer (50257 tokens whose ids follow its 50000 merges)");
    return v;
}

std::string json_string(const std::string& s)
{
    return nlohmann::json(s).dump();
}

struct SynthesizedTokenizer {
    std::string json;
    int64_t from_gpt2 = 0, merges = 0, placeholders = 0;
};

// A byte-level BPE tokenizer.json of plan.size ids: the special tokens at the real
// model's ids, GPT-2's bytes and merge results in order on the other ids, and
// "<|unused_ID|>" placeholders (never produced) once GPT-2's run out.
SynthesizedTokenizer synthesize_tokenizer(const Gpt2Vocabulary& gpt2, const TokenizerPlan& plan)
{
    const auto size = static_cast<size_t>(plan.size);
    std::vector<std::string> tokens(size);
    std::vector<bool> special(size, false);
    for (const auto& [id, content] : plan.specials) {
        tokens[static_cast<size_t>(id)] = content;
        special[static_cast<size_t>(id)] = true;
    }
    SynthesizedTokenizer out;
    size_t next = 0;
    for (size_t id = 0; id < size; ++id) {
        if (special[id])
            continue;
        if (next < gpt2.tokens.size()) {
            tokens[id] = gpt2.tokens[next++];
            ++out.from_gpt2;
        } else {
            tokens[id] = "<|unused_" + std::to_string(id) + "|>";
            ++out.placeholders;
        }
    }
    const std::unordered_set<std::string> present(tokens.begin(), tokens.end());

    std::string added = "[";
    for (const auto& [id, content] : plan.specials)
        added +=
            std::string(added.size() > 1 ? "," : "") + "{\"id\":" + std::to_string(id) +
            ",\"content\":" + json_string(content) +
            ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}";
    added += "]";
    std::string vocab;
    for (size_t id = 0; id < size; ++id) { // piecewise: GCC 12 misreads "lit" + string (-Wstringop-overflow)
        if (id)
            vocab += ',';
        vocab += json_string(tokens[id]);
        vocab += ':';
        vocab += std::to_string(id);
    }
    std::string merges;
    for (const std::string& m : gpt2.merges) {
        const size_t space = m.find(' ');
        const std::string left = m.substr(0, space), right = m.substr(space + 1);
        if (!present.count(left) || !present.count(right) || !present.count(left + right))
            continue;
        if (out.merges++)
            merges += ',';
        merges += json_string(m);
    }
    const std::string byte_level = R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,)"
                                   R"("use_regex":true})";
    out.json = R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":)" + added +
               R"(,"normalizer":null,"pre_tokenizer":)" + byte_level + R"(,"post_processor":)" + byte_level +
               R"(,"decoder":)" + byte_level +
               R"(,"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,)"
               R"("end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":false,)"
               R"("vocab":{)" +
               vocab + R"(},"merges":[)" + merges + "]}}\n";
    return out;
}

void copy_into(const fs::path& from, const fs::path& to)
{
    std::error_code ec;
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec)
        throw InputError(from.string() + ": cannot copy to " + to.string() + " (" + ec.message() + ")");
}

// Writes the tokenizer files into `dir`; returns (vocabulary size, description).
std::pair<int64_t, std::string> write_tokenizer(const ModelSpec& spec, const fs::path& gpt2_dir,
                                                const fs::path& dir)
{
    const auto& plan = spec.tokenizer;
    for (const char* file : {"tokenizer.json", "vocab.json", "merges.txt"})
        if (!fs::is_regular_file(gpt2_dir / file))
            throw InputError(gpt2_dir.string() + ": no " + file +
                             " (synth builds every tokenizer from GPT-2's; pass a directory holding "
                             "GPT-2's tokenizer.json, vocab.json and merges.txt)");
    const Gpt2Vocabulary gpt2 = read_gpt2_vocabulary(gpt2_dir / "tokenizer.json");
    if (plan.kind == TokenizerPlan::Kind::Gpt2Files) {
        for (const char* file : {"tokenizer.json", "vocab.json", "merges.txt"})
            copy_into(gpt2_dir / file, dir / file);
        return {50257,
                "GPT-2's tokenizer (tokenizer.json, vocab.json, merges.txt; 50257 tokens), as the real "
                "model ships it"};
    }
    if (plan.kind == TokenizerPlan::Kind::Gpt2VocabMerges) {
        for (const char* file : {"vocab.json", "merges.txt"})
            copy_into(gpt2_dir / file, dir / file);
        return {50257, "GPT-2's vocab.json and merges.txt (50257 tokens in GPT-2's order); the real model "
                       "ships " +
                           plan.real};
    }
    const SynthesizedTokenizer t = synthesize_tokenizer(gpt2, plan);
    write_file_atomic(dir / "tokenizer.json", t.json);
    return {plan.size, "a byte-level BPE tokenizer.json of " + std::to_string(plan.size) + " ids: GPT-2's " +
                           std::to_string(t.from_gpt2) + " byte and merge tokens (" +
                           std::to_string(t.merges) + " merges), " + std::to_string(plan.specials.size()) +
                           " special tokens at the real ids, " + std::to_string(t.placeholders) +
                           " unused placeholders; stands in for " + plan.real};
}

const ModelSpec& find_spec(const std::string& like)
{
    for (const auto& s : model_specs())
        if (s.like == like)
            return s;
    std::string known;
    for (const auto& n : synth_model_names())
        known += (known.empty() ? "" : ", ") + n;
    throw InputError("synth: unknown model '" + like + "' (known: " + known + ")");
}

// --force replaces what EmbedLab wrote, never other data (someone's real model).
void check_target(const fs::path& out, bool overwrite)
{
    check_replaceable_directory(out, overwrite);
}

} // namespace

std::vector<std::string> synth_model_names()
{
    std::vector<std::string> names;
    for (const auto& s : model_specs())
        names.push_back(s.like);
    return names;
}

SynthReport synth_model(const SynthOptions& options, const ProgressFn& progress)
{
    const ModelSpec& spec = find_spec(options.like);
    const DtypeInfo& dtype = dtype_info(options.dtype.empty() ? spec.dtype : options.dtype);
    const bool gpt2 = spec.family == Family::GPT2;
    const char* layers_key = gpt2 ? "n_layer" : "num_hidden_layers";
    const int64_t layers = options.layers.value_or(config_int(spec.config, layers_key));
    if (layers < 1 || layers > 1024)
        throw InputError("synth: the layer count must be between 1 and 1024, got " + std::to_string(layers));
    if (options.out.empty())
        throw InputError("synth: the output directory name is empty");
    // "out/model/" means out/model, not a child of it.
    const fs::path out = options.out.has_filename() ? options.out : options.out.parent_path();
    check_target(out, options.overwrite);
    const fs::path gpt2_dir =
        options.gpt2_tokenizer_dir.empty() ? default_model_path() : options.gpt2_tokenizer_dir;

    Json config = spec.config;
    config[layers_key] = layers;
    config["torch_dtype"] = dtype.torch_name;
    const std::vector<PlannedTensor> plan = plan_tensors(spec, config, layers);

    SynthReport report;
    report.path = out;
    report.like = spec.like;
    report.model_type = config.at("model_type").get<std::string>();
    report.dtype = dtype.option;
    report.layers = layers;
    report.tensors = static_cast<int64_t>(plan.size());
    std::vector<StreamedTensor> streamed;
    for (const auto& t : plan) {
        streamed.push_back({t.name, dtype.safetensors, t.shape});
        int64_t n = 1;
        for (const int64_t s : t.shape)
            n *= s;
        report.parameters += n;
    }

    // The weights are streamed to disk, never held: what must fit is the file (a
    // 1,000-layer gpt2-small is 27 GB), with the tokenizer and config beside it.
    check_fits_on_disk(out, static_cast<uint64_t>(report.parameters) * dtype.size + (uint64_t{64} << 20),
                       "synth: " + out.string(), "use fewer --layers or a smaller --dtype");
    create_parent_directories(out);
    AtomicDirectory dir(out, options.overwrite);
    std::tie(report.tokenizer_vocab, report.tokenizer) = write_tokenizer(spec, gpt2_dir, dir.path());
    write_file_atomic(dir.path() / "config.json", config.dump(2) + "\n");
    const std::map<std::string, std::string> metadata = {
        {"format", "pt"},
        {"embedlab_synth", spec.like + " (" + spec.repo + "), seed " + std::to_string(options.seed) + ", " +
                               std::to_string(layers) + " layers, random weights"}};
    // 8 MB chunks hold whole blocks for 2- and 4-byte types.
    constexpr size_t chunk_bytes = size_t{8} << 20;
    static_assert(chunk_bytes % (block_values * 4) == 0);
    write_safetensors_streamed(
        dir.path() / "model.safetensors", streamed,
        [&](size_t index, uint64_t offset, std::span<char> out) {
            fill_tensor(plan[index], options.seed, dtype, offset, out);
        },
        metadata, progress, chunk_bytes);
    report.bytes = fs::file_size(dir.path() / "model.safetensors");
    dir.commit();

    if (gpt2)
        report.notes.push_back("the real checkpoint's h.N.attn.bias causal-mask buffers are not written "
                               "(constants every loader rebuilds)");
    if (spec.family == Family::OPT)
        report.notes.push_back("the tokenizer is GPT-2's: ids differ from OPT's own vocab.json, and config "
                               "bos/eos id 2 is an ordinary token here");
    return report;
}

} // namespace embedlab
