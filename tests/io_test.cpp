// Model-file reading: safetensors, Hugging Face directories, GGUF and llama2.c.
// Most cases build tiny model files in a TempDir; the shared-model cases skip
// without ../shared.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "embedlab/error.hpp"
#include "embedlab/model_files.hpp"
#include "io/mapped_file.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------- file builders
namespace embedlab::test::iofiles {
namespace {

// Raw bytes of a tensor stored as dtype "F32", "F16" or "BF16".
std::string tensor_bytes(const torch::Tensor& t, const std::string& dtype)
{
    const auto type = dtype == "F16" ? torch::kHalf : dtype == "BF16" ? torch::kBFloat16 : torch::kFloat32;
    const torch::Tensor c = t.to(type).contiguous();
    return {static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel() * c.element_size())};
}

std::string safetensors_raw(const std::string& header, const std::string& data)
{
    return le_bytes<uint64_t>(header.size()) + header + data;
}

// A valid safetensors file of `tensors`, stored as `dtype`, header padded to 8 bytes.
std::string safetensors_bytes(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                              const std::string& dtype = "F32")
{
    json header = json::object();
    std::string data;
    for (const auto& [name, t] : tensors) {
        const std::string bytes = tensor_bytes(t, dtype);
        header[name] = {{"dtype", dtype},
                        {"shape", t.sizes().vec()},
                        {"data_offsets", {data.size(), data.size() + bytes.size()}}};
        data += bytes;
    }
    header["__metadata__"] = {{"format", "pt"}};
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    return safetensors_raw(text, data);
}

// GGUF files assembled key by key and tensor by tensor.
class GgufBuilder {
public:
    uint32_t version = 3;
    std::string magic = "GGUF";

    void kv_u32(const std::string& key, uint32_t v) { add_kv(key, 4, le_bytes(v)); }
    void kv_f32(const std::string& key, float v) { add_kv(key, 6, le_bytes(v)); }
    void kv_bool(const std::string& key, bool v) { add_kv(key, 7, std::string(1, v ? '\1' : '\0')); }
    void kv_string(const std::string& key, const std::string& v) { add_kv(key, 8, str(v)); }
    void kv_string_array(const std::string& key, const std::vector<std::string>& v)
    {
        std::string b = le_bytes<uint32_t>(8) + le_bytes<uint64_t>(v.size());
        for (const auto& s : v)
            b += str(s);
        add_kv(key, 9, b);
    }
    void kv_f32_array(const std::string& key, const std::vector<float>& v)
    {
        std::string b = le_bytes<uint32_t>(6) + le_bytes<uint64_t>(v.size());
        for (float f : v)
            b += le_bytes(f);
        add_kv(key, 9, b);
    }
    void kv_i32_array(const std::string& key, const std::vector<int32_t>& v)
    {
        std::string b = le_bytes<uint32_t>(5) + le_bytes<uint64_t>(v.size());
        for (int32_t x : v)
            b += le_bytes(x);
        add_kv(key, 9, b);
    }
    // Any value bytes, e.g. a lying array header.
    void kv_raw(const std::string& key, uint32_t type, const std::string& value) { add_kv(key, type, value); }

    // `t` is row-major [.., rows, cols]; GGUF stores its dims reversed.
    void tensor(const std::string& name, const torch::Tensor& t, uint32_t ggml_type = 0)
    {
        const std::string dtype = ggml_type == 1 ? "F16" : "F32";
        auto dims = t.sizes().vec();
        tensors_.push_back({name, {dims.rbegin(), dims.rend()}, ggml_type, tensor_bytes(t, dtype)});
    }
    void raw_tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type, std::string data)
    {
        tensors_.push_back({name, std::move(ne), type, std::move(data)});
    }

    // Bytes up to the end of the tensor table (before the data padding).
    std::string header_bytes() const
    {
        std::string b = magic + le_bytes(version) + le_bytes<uint64_t>(tensors_.size()) +
                        le_bytes<uint64_t>(n_kv_) + kvs_;
        uint64_t offset = 0;
        for (const auto& t : tensors_) {
            b += str(t.name) + le_bytes<uint32_t>(t.ne.size());
            for (int64_t ne : t.ne)
                b += le_bytes<uint64_t>(ne);
            b += le_bytes(t.type) + le_bytes(offset);
            offset += padded(t.data.size());
        }
        return b;
    }

    std::string bytes() const
    {
        std::string b = header_bytes();
        b.append(padded(b.size()) - b.size(), '\0');
        for (const auto& t : tensors_) {
            b += t.data;
            b.append(padded(t.data.size()) - t.data.size(), '\0');
        }
        return b;
    }

    static std::string str(const std::string& s) { return le_bytes<uint64_t>(s.size()) + s; }

private:
    struct Tensor {
        std::string name;
        std::vector<int64_t> ne;
        uint32_t type;
        std::string data;
    };
    static uint64_t padded(uint64_t n) { return (n + 31) / 32 * 32; }
    void add_kv(const std::string& key, uint32_t type, const std::string& value)
    {
        kvs_ += str(key) + le_bytes(type) + value;
        ++n_kv_;
    }

    std::string kvs_;
    uint64_t n_kv_ = 0;
    std::vector<Tensor> tensors_;
};

// A tiny random llama with its weights in Meta's interleaved RoPE layout, as
// GGUF and llama2.c store them.
struct TinyLlama {
    int64_t vocab = 10, dim = 8, layers = 2, heads = 2, kv_heads = 1, hidden = 12, seq = 16;
    bool tied = true;
    WeightMap meta; // canonical names, Meta q/k row order

    int64_t head_dim() const { return dim / heads; }
    int64_t kv_dim() const { return head_dim() * kv_heads; }

    static TinyLlama make(bool tied = true, uint64_t seed = 1)
    {
        TinyLlama m;
        m.tied = tied;
        torch::manual_seed(seed);
        m.meta["model.embed_tokens.weight"] = torch::randn({m.vocab, m.dim});
        m.meta["model.norm.weight"] = torch::rand({m.dim}) + 0.5;
        if (!tied)
            m.meta["lm_head.weight"] = torch::randn({m.vocab, m.dim});
        for (int64_t i = 0; i < m.layers; ++i) {
            const std::string p = "model.layers." + std::to_string(i) + ".";
            m.meta[p + "input_layernorm.weight"] = torch::rand({m.dim}) + 0.5;
            m.meta[p + "post_attention_layernorm.weight"] = torch::rand({m.dim}) + 0.5;
            m.meta[p + "self_attn.q_proj.weight"] = torch::randn({m.dim, m.dim});
            m.meta[p + "self_attn.k_proj.weight"] = torch::randn({m.kv_dim(), m.dim});
            m.meta[p + "self_attn.v_proj.weight"] = torch::randn({m.kv_dim(), m.dim});
            m.meta[p + "self_attn.o_proj.weight"] = torch::randn({m.dim, m.dim});
            m.meta[p + "mlp.gate_proj.weight"] = torch::randn({m.hidden, m.dim});
            m.meta[p + "mlp.up_proj.weight"] = torch::randn({m.hidden, m.dim});
            m.meta[p + "mlp.down_proj.weight"] = torch::randn({m.dim, m.hidden});
        }
        return m;
    }

    std::vector<std::string> tokens() const
    {
        std::vector<std::string> t = {"<unk>", "<s>", "</s>"};
        for (int64_t i = 3; i < vocab; ++i)
            t.push_back("\xe2\x96\x81t" + std::to_string(i));
        return t;
    }

    // Every tensor and key of a llama.cpp GGUF; callers may add or drop pieces.
    GgufBuilder gguf(uint32_t ggml_type = 0) const
    {
        static const std::map<std::string, std::string> names = {
            {"input_layernorm.weight", "attn_norm.weight"},
            {"post_attention_layernorm.weight", "ffn_norm.weight"},
            {"self_attn.q_proj.weight", "attn_q.weight"},
            {"self_attn.k_proj.weight", "attn_k.weight"},
            {"self_attn.v_proj.weight", "attn_v.weight"},
            {"self_attn.o_proj.weight", "attn_output.weight"},
            {"mlp.gate_proj.weight", "ffn_gate.weight"},
            {"mlp.up_proj.weight", "ffn_up.weight"},
            {"mlp.down_proj.weight", "ffn_down.weight"},
        };
        GgufBuilder g;
        g.kv_string("general.architecture", "llama");
        g.kv_u32("llama.embedding_length", dim);
        g.kv_u32("llama.block_count", layers);
        g.kv_u32("llama.feed_forward_length", hidden);
        g.kv_u32("llama.attention.head_count", heads);
        g.kv_u32("llama.attention.head_count_kv", kv_heads);
        g.kv_u32("llama.context_length", seq);
        g.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
        g.kv_string("tokenizer.ggml.model", "llama");
        g.kv_string_array("tokenizer.ggml.tokens", tokens());
        std::vector<float> scores;
        std::vector<int32_t> types;
        for (int64_t i = 0; i < vocab; ++i) {
            scores.push_back(-static_cast<float>(i));
            types.push_back(i == 0 ? 2 : i < 3 ? 3 : 1);
        }
        g.kv_f32_array("tokenizer.ggml.scores", scores);
        g.kv_i32_array("tokenizer.ggml.token_type", types);
        g.kv_u32("tokenizer.ggml.bos_token_id", 1);
        g.kv_u32("tokenizer.ggml.eos_token_id", 2);
        g.kv_u32("tokenizer.ggml.unknown_token_id", 0);
        g.kv_bool("tokenizer.ggml.add_space_prefix", false);

        g.tensor("token_embd.weight", meta.at("model.embed_tokens.weight"), ggml_type);
        g.tensor("output_norm.weight", meta.at("model.norm.weight"), ggml_type);
        if (!tied)
            g.tensor("output.weight", meta.at("lm_head.weight"), ggml_type);
        for (int64_t i = 0; i < layers; ++i)
            for (const auto& [hf, gg] : names)
                g.tensor("blk." + std::to_string(i) + "." + gg,
                         meta.at("model.layers." + std::to_string(i) + "." + hf), ggml_type);
        return g;
    }

    std::string llama2c() const
    {
        std::string b;
        for (int64_t v : {dim, hidden, layers, heads, kv_heads, tied ? vocab : -vocab, seq})
            b += le_bytes<int32_t>(static_cast<int32_t>(v));
        auto add = [&](const torch::Tensor& t) { b += tensor_bytes(t, "F32"); };
        auto per_layer = [&](const std::string& suffix) {
            for (int64_t i = 0; i < layers; ++i)
                add(meta.at("model.layers." + std::to_string(i) + "." + suffix));
        };
        add(meta.at("model.embed_tokens.weight"));
        per_layer("input_layernorm.weight");
        per_layer("self_attn.q_proj.weight");
        per_layer("self_attn.k_proj.weight");
        per_layer("self_attn.v_proj.weight");
        per_layer("self_attn.o_proj.weight");
        per_layer("post_attention_layernorm.weight");
        per_layer("mlp.gate_proj.weight");
        per_layer("mlp.down_proj.weight");
        per_layer("mlp.up_proj.weight");
        add(meta.at("model.norm.weight"));
        add(torch::zeros({2, seq, head_dim() / 2})); // freq_cis_real, freq_cis_imag
        if (!tied)
            add(meta.at("lm_head.weight"));
        return b;
    }

    json hf_config() const
    {
        return {{"model_type", "llama"},
                {"vocab_size", vocab},
                {"hidden_size", dim},
                {"intermediate_size", hidden},
                {"num_hidden_layers", layers},
                {"num_attention_heads", heads},
                {"num_key_value_heads", kv_heads},
                {"max_position_embeddings", seq},
                {"rms_norm_eps", 1e-5},
                {"tie_word_embeddings", tied}};
    }
};

// A tiny random GPT-2 in Hugging Face layout (Conv1D weights [in, out]).
WeightMap tiny_gpt2_weights(int64_t vocab = 12, int64_t d = 8, int64_t layers = 2, int64_t positions = 6)
{
    torch::manual_seed(7);
    WeightMap w;
    w["wte.weight"] = torch::randn({vocab, d});
    w["wpe.weight"] = torch::randn({positions, d});
    w["ln_f.weight"] = torch::randn({d});
    w["ln_f.bias"] = torch::randn({d});
    for (int64_t i = 0; i < layers; ++i) {
        const std::string p = "h." + std::to_string(i) + ".";
        for (const char* ln : {"ln_1", "ln_2"}) {
            w[p + ln + ".weight"] = torch::randn({d});
            w[p + ln + ".bias"] = torch::randn({d});
        }
        w[p + "attn.c_attn.weight"] = torch::randn({d, 3 * d});
        w[p + "attn.c_attn.bias"] = torch::randn({3 * d});
        w[p + "attn.c_proj.weight"] = torch::randn({d, d});
        w[p + "attn.c_proj.bias"] = torch::randn({d});
        w[p + "mlp.c_fc.weight"] = torch::randn({d, 4 * d});
        w[p + "mlp.c_fc.bias"] = torch::randn({4 * d});
        w[p + "mlp.c_proj.weight"] = torch::randn({4 * d, d});
        w[p + "mlp.c_proj.bias"] = torch::randn({d});
    }
    return w;
}

json tiny_gpt2_config(int64_t vocab = 12, int64_t d = 8, int64_t layers = 2, int64_t positions = 6)
{
    return {{"model_type", "gpt2"},
            {"vocab_size", vocab},
            {"n_embd", d},
            {"n_layer", layers},
            {"n_head", 2},
            {"n_positions", positions},
            {"n_inner", nullptr},
            {"layer_norm_epsilon", 1e-5},
            {"activation_function", "gelu_new"}};
}

// Writes config.json and model.safetensors of `weights` into `dir`.
void write_hf_model(const fs::path& dir, const json& config, const WeightMap& weights,
                    const std::string& dtype = "F32", const std::string& prefix = "")
{
    fs::create_directories(dir);
    write_file(dir / "config.json", config.dump(2));
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& [name, t] : weights)
        tensors.emplace_back(prefix + name, t);
    write_file(dir / "model.safetensors", safetensors_bytes(tensors, dtype));
}

} // namespace
} // namespace embedlab::test::iofiles

// ---------------------------------------------------------------- tests
namespace {

using namespace embedlab;
using namespace embedlab::test;
using namespace embedlab::test::iofiles;

// Meta row (h, 2i + j) -> HF row (h, j * hd/2 + i), spelled out index by index.
torch::Tensor meta_to_hf_by_index(const torch::Tensor& w, int64_t heads)
{
    const int64_t hd = w.size(0) / heads;
    torch::Tensor out = torch::empty_like(w);
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < hd / 2; ++i)
            for (int64_t j = 0; j < 2; ++j)
                out[h * hd + j * hd / 2 + i] = w[h * hd + 2 * i + j];
    return out;
}

// The sizes a test expects of a configuration (d: hidden_size, mlp: intermediate_size,
// positions: max_positions); a field left unset is not checked.
struct ExpectedSizes {
    std::optional<int64_t> vocab, d, layers, heads, kv_heads, mlp, positions;
};

void expect_sizes(const ModelConfig& c, const ExpectedSizes& e)
{
    const std::tuple<const char*, std::optional<int64_t>, int64_t> sizes[] = {
        {"vocab_size", e.vocab, c.vocab_size},          {"hidden_size", e.d, c.hidden_size},
        {"num_layers", e.layers, c.num_layers},         {"num_heads", e.heads, c.num_heads},
        {"num_kv_heads", e.kv_heads, c.num_kv_heads},   {"intermediate_size", e.mlp, c.intermediate_size},
        {"max_positions", e.positions, c.max_positions}};
    for (const auto& [name, expected, actual] : sizes) {
        if (expected) {
            EXPECT_EQ(actual, *expected) << name;
        }
    }
}

void expect_same_weights(const WeightMap& a, const WeightMap& b, double tolerance = 0.0)
{
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a) {
        ASSERT_TRUE(b.count(name)) << name;
        const torch::Tensor& u = b.at(name);
        ASSERT_EQ(t.sizes(), u.sizes()) << name;
        EXPECT_LE((t - u).abs().max().item<double>(), tolerance) << name;
    }
}

TEST(SafetensorsLoad, F16AllBitPatternsMatchTorch)
{
    TempDir dir;
    const torch::Tensor bits = torch::arange(0, 65536, torch::kInt32).to(torch::kInt16);
    const std::string raw(static_cast<const char*>(bits.data_ptr()), 65536 * 2);
    for (const std::string dtype : {"F16", "BF16"}) {
        const std::string header =
            json{{"x", {{"dtype", dtype}, {"shape", {256, 256}}, {"data_offsets", {0, raw.size()}}}}}.dump();
        write_file(dir / "all.safetensors", safetensors_raw(header, raw));
        const WeightMap w = load_safetensors(dir / "all.safetensors");
        const torch::Tensor got = w.at("x");
        const torch::Tensor expected =
            bits.view(dtype == "F16" ? torch::kHalf : torch::kBFloat16).to(torch::kFloat32).view({256, 256});
        ASSERT_EQ(got.scalar_type(), torch::kFloat32);
        EXPECT_TRUE(torch::equal(got.isnan(), expected.isnan())) << dtype;
        const torch::Tensor finite = ~expected.isnan();
        EXPECT_TRUE(torch::equal(got.masked_select(finite), expected.masked_select(finite))) << dtype;
        // Signed zeros survive.
        EXPECT_TRUE(std::signbit(got.view(-1)[0x8000].item<float>())) << dtype;
    }
}

TEST(SafetensorsLoad, MisalignedF32IsCopiedCorrectly)
{
    TempDir dir;
    const torch::Tensor t = torch::arange(6, torch::kFloat32).view({2, 3});
    // A 13-byte header puts the data at offset 21, not a multiple of 4.
    std::string header = json{{"t", {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}}}}.dump();
    header.append((13 - header.size() % 8 + 8) % 8, ' ');
    ASSERT_NE((8 + header.size()) % 4, 0u);
    write_file(dir / "m.safetensors", safetensors_raw(header, tensor_bytes(t, "F32")));
    EXPECT_TRUE(torch::equal(load_safetensors(dir / "m.safetensors").at("t"), t));
}

TEST(SafetensorsLoad, HeaderMetadataAndOrder)
{
    const std::string header =
        R"({"__metadata__":{"format":"pt","n":3},"b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]},)"
        R"("a":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
        R"("c":{"dtype":"F32","shape":[1,0],"data_offsets":[0,0]},)"
        R"("z":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
    const std::string file = safetensors_raw(header, std::string(16, '\0'));
    const auto h =
        parse_safetensors_header(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "x.safetensors");
    ASSERT_EQ(h.entries.size(), 4u);
    EXPECT_EQ(h.metadata.at("format"), "pt");
    EXPECT_EQ(h.metadata.at("n"), "3");
    EXPECT_EQ(h.data_start, 8 + header.size());
    for (size_t i = 1; i < h.entries.size(); ++i)
        EXPECT_LE(h.entries[i - 1].begin, h.entries[i].begin);
    EXPECT_EQ(h.entries.back().name, "a");
    EXPECT_EQ(h.entries.back().shape, std::vector<int64_t>{});
}

TEST(SafetensorsLoad, TensorsOutliveTheReaderAndAreWritable)
{
    TempDir dir;
    const torch::Tensor t = torch::randn({64, 32});
    write_file(dir / "w.safetensors", safetensors_bytes({{"t", t}}));
    const std::string before = read_text(dir / "w.safetensors");
    torch::Tensor loaded = load_safetensors(dir / "w.safetensors").at("t");
    fs::remove(dir / "w.safetensors"); // the mapping keeps the data
    EXPECT_TRUE(torch::equal(loaded, t));
    loaded.mul_(2); // copy-on-write pages: no crash, file untouched
    EXPECT_TRUE(torch::equal(loaded, t * 2));
    write_file(dir / "w2.safetensors", before);
    EXPECT_TRUE(torch::equal(load_safetensors(dir / "w2.safetensors").at("t"), t));
}

TEST(HfConfig, Gpt2Defaults)
{
    json j = tiny_gpt2_config();
    const ModelConfig c = parse_hf_config(j.dump(), "config.json");
    // n_inner null -> intermediate 4 d
    EXPECT_EQ(c.arch, Architecture::GPT2);
    expect_sizes(c, {.vocab = 12, .d = 8, .kv_heads = 2, .mlp = 32, .positions = 6});
    EXPECT_TRUE(c.tied_embeddings);
    EXPECT_EQ(c.activation, "gelu_new");
    j["n_inner"] = 20;
    j["tie_word_embeddings"] = false;
    j["eos_token_id"] = {5, 6};
    const ModelConfig d = parse_hf_config(j.dump(), "config.json");
    EXPECT_EQ(d.intermediate_size, 20);
    EXPECT_FALSE(d.tied_embeddings);
    EXPECT_EQ(d.eos_token_id, 5);
}

TEST(HfConfig, LlamaDefaults)
{
    json j = TinyLlama{}.hf_config();
    j.erase("num_key_value_heads");
    j.erase("tie_word_embeddings");
    j.erase("rms_norm_eps");
    const ModelConfig c = parse_hf_config(j.dump(), "config.json");
    EXPECT_EQ(c.arch, Architecture::Llama);
    EXPECT_EQ(c.num_kv_heads, c.num_heads);
    EXPECT_FALSE(c.tied_embeddings);
    EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
    EXPECT_DOUBLE_EQ(c.norm_eps, 1e-6);
    EXPECT_EQ(c.activation, "silu");
    EXPECT_EQ(c.bos_token_id, -1);
}

TEST(HfModel, Gpt2InEveryDtype)
{
    TempDir dir;
    const WeightMap w = tiny_gpt2_weights();
    for (const std::string dtype : {"F32", "F16", "BF16"}) {
        write_hf_model(dir / dtype, tiny_gpt2_config(), w, dtype, dtype == "F16" ? "transformer." : "");
        const ModelFiles mf = read_model_files(dir / dtype);
        EXPECT_EQ(mf.format, ModelFormat::HuggingFace);
        EXPECT_EQ(mf.stored_dtype, dtype);
        EXPECT_EQ(mf.files, std::vector<fs::path>{dir / dtype / "model.safetensors"});
        EXPECT_TRUE(mf.warnings.empty());
        EXPECT_EQ(mf.weights.at("h.0.attn.c_attn.weight").sizes(), (std::vector<int64_t>{8, 24}));
        for (const auto& [name, t] : mf.weights) {
            EXPECT_EQ(t.scalar_type(), torch::kFloat32) << name;
            EXPECT_TRUE(t.is_contiguous()) << name;
        }
        const double tolerance = dtype == "F32" ? 0.0 : dtype == "F16" ? 4e-3 : 3e-2;
        expect_same_weights(mf.weights, w, tolerance);
    }
}

TEST(HfModel, TiedLmHeadIsDroppedAndMissingHeadMeansTied)
{
    TempDir dir;
    WeightMap w = tiny_gpt2_weights();
    w["lm_head.weight"] = w.at("wte.weight");
    write_hf_model(dir / "gpt2", tiny_gpt2_config(), w);
    const ModelFiles g = read_model_files(dir / "gpt2");
    EXPECT_FALSE(g.weights.count("lm_head.weight"));
    EXPECT_TRUE(g.config.tied_embeddings);

    TinyLlama m = TinyLlama::make(/*tied=*/true);
    json config = m.hf_config();
    config["tie_word_embeddings"] = false;
    write_hf_model(dir / "llama", config, m.meta);
    const ModelFiles l = read_model_files(dir / "llama");
    EXPECT_TRUE(l.config.tied_embeddings);
    ASSERT_EQ(l.warnings.size(), 1u);
    EXPECT_NE(l.warnings[0].find("lm_head.weight"), std::string::npos);
    EXPECT_NE(l.warnings[0].find("tied"), std::string::npos);
}

TEST(HfModel, ShardedEqualsSingleFile)
{
    TempDir dir;
    const TinyLlama m = TinyLlama::make(/*tied=*/false);
    write_hf_model(dir / "single", m.hf_config(), m.meta);

    const fs::path sharded = dir / "sharded";
    fs::create_directories(sharded);
    write_file(sharded / "config.json", m.hf_config().dump());
    std::vector<std::pair<std::string, torch::Tensor>> first, second;
    json weight_map;
    for (const auto& [name, t] : m.meta) {
        const bool in_first = name.find("layers.1.") == std::string::npos;
        (in_first ? first : second).emplace_back(name, t);
        weight_map[name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    write_file(sharded / "model-00001-of-00002.safetensors", safetensors_bytes(first));
    write_file(sharded / "model-00002-of-00002.safetensors", safetensors_bytes(second, "F16"));
    write_file(sharded / "model.safetensors.index.json",
               json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());

    const ModelFiles a = read_model_files(dir / "single");
    const ModelFiles b = read_model_files(sharded / "config.json"); // a file inside names the directory
    EXPECT_EQ(b.files.size(), 2u);
    EXPECT_EQ(b.stored_dtype, "mixed");
    expect_same_weights(a.weights, b.weights, 4e-3);
    EXPECT_TRUE(a.weights.count("lm_head.weight"));
}

TEST(Gguf, TinyLlamaConfigVocabAndNames)
{
    TempDir dir;
    const TinyLlama m = TinyLlama::make(/*tied=*/false);
    write_file(dir / "tiny.gguf", m.gguf().bytes());
    const ModelFiles mf = read_model_files(dir / "tiny.gguf");
    EXPECT_EQ(mf.format, ModelFormat::GGUF);
    EXPECT_EQ(mf.stored_dtype, "F32");
    EXPECT_TRUE(mf.warnings.empty());
    const ModelConfig& c = mf.config;
    EXPECT_EQ(c.arch, Architecture::Llama);
    expect_sizes(c,
                 {.vocab = 10, .d = 8, .layers = 2, .heads = 2, .kv_heads = 1, .mlp = 12, .positions = 16});
    EXPECT_NEAR(c.norm_eps, 1e-5, 1e-12);
    EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
    EXPECT_FALSE(c.tied_embeddings);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_id, 2);

    ASSERT_TRUE(mf.embedded_vocab.has_value());
    const ScoredVocab& v = *mf.embedded_vocab;
    EXPECT_EQ(v.tokens, m.tokens());
    EXPECT_FLOAT_EQ(v.scores[4], -4.0f);
    EXPECT_EQ(v.types[0], 2);
    EXPECT_EQ(v.unk_id, 0);
    EXPECT_FALSE(v.add_dummy_prefix);

    // Same names; dims reversed back to row-major; q/k permuted, the rest verbatim.
    ASSERT_EQ(mf.weights.size(), m.meta.size());
    for (const auto& [name, t] : m.meta) {
        ASSERT_TRUE(mf.weights.count(name)) << name;
        torch::Tensor expected = t;
        if (name.find("q_proj") != std::string::npos)
            expected = meta_to_hf_by_index(t, m.heads);
        else if (name.find("k_proj") != std::string::npos)
            expected = meta_to_hf_by_index(t, m.kv_heads);
        EXPECT_TRUE(torch::equal(mf.weights.at(name), expected)) << name;
    }
}

// The permutation must turn Meta's interleaved RoPE into rotate-half: attention
// scores computed each way from the respective weights must agree.
TEST(Gguf, PermutedWeightsGiveTheSameAttentionScores)
{
    TempDir dir;
    const TinyLlama m = TinyLlama::make();
    write_file(dir / "tiny.gguf", m.gguf().bytes());
    const ModelFiles mf = read_model_files(dir / "tiny.gguf");
    const int64_t hd = m.head_dim(), half = hd / 2;
    const torch::Tensor theta = torch::pow(10000.0, -torch::arange(0, half, torch::kFloat64) * 2.0 / hd);

    auto rope_meta = [&](torch::Tensor x, int64_t pos) { // pairs (2i, 2i+1)
        auto p = x.view({-1, half, 2});
        auto a = p.select(2, 0), b = p.select(2, 1);
        auto c = torch::cos(theta * pos), s = torch::sin(theta * pos);
        return torch::stack({a * c - b * s, a * s + b * c}, 2).view(-1);
    };
    auto rope_hf = [&](torch::Tensor x, int64_t pos) { // pairs (i, i + hd/2)
        auto p = x.view({-1, 2, half});
        auto a = p.select(1, 0), b = p.select(1, 1);
        auto c = torch::cos(theta * pos), s = torch::sin(theta * pos);
        return torch::stack({a * c - b * s, b * c + a * s}, 1).view(-1);
    };
    const torch::Tensor x1 = torch::randn({m.dim}, torch::kFloat64),
                        x2 = torch::randn({m.dim}, torch::kFloat64);
    for (int64_t layer = 0; layer < m.layers; ++layer) {
        const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
        auto wq_meta = m.meta.at(p + "q_proj.weight").to(torch::kFloat64);
        auto wk_meta = m.meta.at(p + "k_proj.weight").to(torch::kFloat64);
        auto wq_hf = mf.weights.at(p + "q_proj.weight").to(torch::kFloat64);
        auto wk_hf = mf.weights.at(p + "k_proj.weight").to(torch::kFloat64);
        for (int64_t head = 0; head < m.heads; ++head) {
            const int64_t kv_head = head / (m.heads / m.kv_heads);
            auto q_rows = torch::indexing::Slice(head * hd, (head + 1) * hd);
            auto k_rows = torch::indexing::Slice(kv_head * hd, (kv_head + 1) * hd);
            const double meta_score = torch::dot(rope_meta(wq_meta.index({q_rows}).mv(x1), 5),
                                                 rope_meta(wk_meta.index({k_rows}).mv(x2), 2))
                                          .item<double>();
            const double hf_score =
                torch::dot(rope_hf(wq_hf.index({q_rows}).mv(x1), 5), rope_hf(wk_hf.index({k_rows}).mv(x2), 2))
                    .item<double>();
            EXPECT_NEAR(meta_score, hf_score, 1e-9 * (1 + std::abs(meta_score))) << p << " head " << head;
        }
    }
}

TEST(Gguf, MatchesLlama2cOfTheSameWeights)
{
    TempDir dir;
    for (bool tied : {true, false}) {
        const TinyLlama m = TinyLlama::make(tied, tied ? 3 : 4);
        write_file(dir / "m.gguf", m.gguf().bytes());
        write_file(dir / "m.bin", m.llama2c());
        const ModelFiles g = read_model_files(dir / "m.gguf");
        const ModelFiles b = read_model_files(dir / "m.bin");
        EXPECT_EQ(b.format, ModelFormat::Llama2c);
        EXPECT_EQ(b.config.tied_embeddings, tied);
        EXPECT_EQ(g.config.tied_embeddings, tied);
        EXPECT_EQ(b.config.num_kv_heads, 1);
        EXPECT_EQ(b.config.intermediate_size, 12);
        EXPECT_EQ(b.config.max_positions, 16);
        EXPECT_EQ(b.stored_dtype, "F32");
        expect_same_weights(g.weights, b.weights);
    }
}

TEST(Gguf, DuplicatedOutputHeadIsTied)
{
    TempDir dir;
    const TinyLlama m = TinyLlama::make();
    GgufBuilder g = m.gguf();
    g.tensor("output.weight", m.meta.at("model.embed_tokens.weight"));
    write_file(dir / "dup.gguf", g.bytes());
    const ModelFiles mf = read_model_files(dir / "dup.gguf");
    EXPECT_TRUE(mf.config.tied_embeddings);
    EXPECT_FALSE(mf.weights.count("lm_head.weight"));
    // Information (llama2.c converters write this), not a warning printed on every run.
    EXPECT_TRUE(mf.warnings.empty());
    ASSERT_EQ(mf.notes.size(), 1u);
    EXPECT_NE(mf.notes[0].find("output.weight"), std::string::npos);
}

TEST(Gguf, Version2F16AndRopeFrequencyFactors)
{
    TempDir dir;
    const TinyLlama m = TinyLlama::make();
    GgufBuilder g = m.gguf(/*ggml_type=*/1);
    g.version = 2;
    const int64_t half = m.head_dim() / 2;
    g.tensor("rope_freqs.weight", torch::full({half}, 2.0f)); // llama3 rope_scaling, as divisors
    write_file(dir / "half.gguf.bin", g.bytes());             // GGUF magic wins over the .bin extension
    const ModelFiles mf = read_model_files(dir / "half.gguf.bin");
    EXPECT_EQ(mf.format, ModelFormat::GGUF);
    EXPECT_EQ(mf.stored_dtype, "F16"); // rope_freqs is configuration, not a weight
    EXPECT_TRUE(mf.warnings.empty());
    EXPECT_EQ(mf.config.rope_freq_divisors, std::vector<double>(static_cast<size_t>(half), 2.0));
    EXPECT_NEAR((mf.weights.at("model.embed_tokens.weight") - m.meta.at("model.embed_tokens.weight"))
                    .abs()
                    .max()
                    .item<double>(),
                0.0, 4e-3);
}

// A tensor EmbedLab has no meaning for is refused by name, never ignored.
TEST(Gguf, UnknownTensorIsRefused)
{
    TempDir dir;
    const TinyLlama m = TinyLlama::make();
    GgufBuilder g = m.gguf();
    g.tensor("blk.0.attn_sinks.weight", torch::ones({2}));
    write_file(dir / "sinks.gguf", g.bytes());
    try {
        read_model_files(dir / "sinks.gguf");
        FAIL() << "loaded a GGUF with an unknown tensor";
    } catch (const InputError& e) {
        EXPECT_NE(
            std::string(e.what()).find("tensor 'blk.0.attn_sinks.weight' has no meaning EmbedLab implements"),
            std::string::npos)
            << e.what();
    }
}

// ------------------------------------------------------------ shared models
double load_ms(const fs::path& path, ModelFiles& out)
{
    const auto start = std::chrono::steady_clock::now();
    out = read_model_files(path);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::cout << "[   load   ] " << path.filename().string() << ": " << ms << " ms\n";
    return ms;
}

TEST(SharedModels, TinyGpt2F32AndF16Agree)
{
    EMBEDLAB_REQUIRE_SHARED();
    ModelFiles f32, f16;
    load_ms(shared_dir() / "models" / "tinygpt2", f32);
    load_ms(shared_dir() / "models" / "tinygpt2-f16", f16);
    EXPECT_EQ(f32.stored_dtype, "F32");
    EXPECT_EQ(f16.stored_dtype, "F16");
    EXPECT_TRUE(f32.warnings.empty());
    EXPECT_TRUE(f16.warnings.empty());
    const ModelConfig& c = f16.config;
    EXPECT_EQ(c.arch, Architecture::GPT2);
    expect_sizes(c, {.vocab = 50257, .d = 128, .layers = 4, .heads = 4, .mlp = 512, .positions = 256});
    EXPECT_TRUE(c.tied_embeddings);
    EXPECT_EQ(c.bos_token_id, 50256);
    EXPECT_EQ(f32.weights.at("wte.weight").sizes(), (std::vector<int64_t>{50257, 128}));
    EXPECT_EQ(f32.weights.at("h.3.attn.c_attn.weight").sizes(), (std::vector<int64_t>{128, 384}));
    EXPECT_EQ(f32.weights.at("h.3.mlp.c_proj.weight").sizes(), (std::vector<int64_t>{512, 128}));

    ASSERT_EQ(f32.weights.size(), f16.weights.size());
    for (const auto& [name, a] : f32.weights) {
        ASSERT_TRUE(f16.weights.count(name)) << name;
        const torch::Tensor& b = f16.weights.at(name);
        ASSERT_EQ(a.sizes(), b.sizes()) << name;
        // F16 round-to-nearest: relative error <= 2^-11, absolute <= 2^-25 near zero.
        const torch::Tensor bound = a.abs() * std::ldexp(1.0, -11) + std::ldexp(1.0, -24);
        EXPECT_TRUE(((a - b).abs() <= bound).all().item<bool>()) << name;
    }
}

TEST(SharedModels, TinyLlamaConfig)
{
    EMBEDLAB_REQUIRE_SHARED();
    ModelFiles mf;
    load_ms(shared_dir() / "models" / "tinyllama", mf);
    const ModelConfig& c = mf.config;
    EXPECT_EQ(c.arch, Architecture::Llama);
    expect_sizes(c, {.vocab = 32000, .d = 128, .layers = 4, .heads = 4, .kv_heads = 2, .mlp = 352});
    EXPECT_FALSE(c.tied_embeddings);
    EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
    EXPECT_EQ(mf.stored_dtype, "F32");
    EXPECT_TRUE(mf.warnings.empty());
    EXPECT_EQ(mf.weights.size(), 3u + 9u * 4u);
    EXPECT_EQ(mf.weights.at("lm_head.weight").sizes(), (std::vector<int64_t>{32000, 128}));
    EXPECT_EQ(mf.weights.at("model.layers.2.self_attn.k_proj.weight").sizes(),
              (std::vector<int64_t>{64, 128}));
}

TEST(SharedModels, Stories260KGgufEqualsLlama2c)
{
    EMBEDLAB_REQUIRE_SHARED();
    ModelFiles g, b;
    load_ms(shared_dir() / "models" / "stories260K" / "stories260K.gguf", g);
    load_ms(shared_dir() / "models" / "stories260K" / "stories260K.bin", b);
    for (const ModelFiles* mf : {&g, &b}) {
        const ModelConfig& c = mf->config;
        expect_sizes(c, {.vocab = 512, .d = 64, .layers = 5, .heads = 8, .kv_heads = 4, .mlp = 172});
        EXPECT_TRUE(c.tied_embeddings);
        EXPECT_TRUE(mf->weights.count("model.embed_tokens.weight"));
        EXPECT_TRUE(mf->weights.count("model.layers.4.mlp.down_proj.weight"));
        EXPECT_EQ(mf->weights.at("model.layers.0.self_attn.k_proj.weight").sizes(),
                  (std::vector<int64_t>{32, 64}));
    }
    expect_same_weights(g.weights, b.weights);

    ASSERT_TRUE(g.embedded_vocab.has_value());
    EXPECT_EQ(g.embedded_vocab->tokens.size(), 512u);
    EXPECT_EQ(g.embedded_vocab->tokens[1], "<s>");
    EXPECT_EQ(g.embedded_vocab->bos_id, 1);
    EXPECT_EQ(g.embedded_vocab->eos_id, 2);
    EXPECT_EQ(g.embedded_vocab->unk_id, 0);
    EXPECT_EQ(g.embedded_vocab->types[3], 6);
    EXPECT_TRUE(g.embedded_vocab->add_dummy_prefix);
    EXPECT_FALSE(b.embedded_vocab.has_value());
}

// Resident kB of the mapping that holds `p` (/proc/self/smaps), -1 if none does.
long resident_kb_of_mapping(const void* p)
{
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<uintptr_t>(p);
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        unsigned long begin = 0, end = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(':') > line.find(' ')) {
            inside = at >= begin && at < end;
            continue;
        }
        if (inside && line.rfind("Rss:", 0) == 0)
            return std::stol(line.substr(4));
    }
    return -1;
}

// A float32 file's tensors wrap its mapping; the loader drops their pages once
// scanned. release_if_mapped must do that for mapped bytes only: the same call on
// ordinary memory must leave it as it was (madvise would zero anonymous pages).
TEST(MappedFile, ReleaseIfMappedDropsMappedPagesAndLeavesOtherMemoryAlone)
{
    TempDir dir;
    const auto path = dir / "bytes.bin";
    const size_t n = 8u << 20;
    {
        std::ofstream out(path, std::ios::binary);
        for (size_t i = 0; i < n; ++i)
            out.put(static_cast<char>(i % 251));
    }
    const auto file = io::MappedFile::open(path);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; ++i)
        sum += file->data()[i];
    EXPECT_GT(resident_kb_of_mapping(file->data()), 7000);
    io::MappedFile::release_if_mapped(file->data(), n);
    EXPECT_LT(resident_kb_of_mapping(file->data()), 100);
    uint64_t again = 0; // the bytes read back from the file
    for (size_t i = 0; i < n; ++i)
        again += file->data()[i];
    EXPECT_EQ(again, sum);

    std::vector<uint8_t> heap(n, 7);
    io::MappedFile::release_if_mapped(heap.data(), n);
    EXPECT_EQ(std::count(heap.begin(), heap.end(), 7), static_cast<long>(n));
}

} // namespace
