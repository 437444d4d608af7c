// Damaged and inconsistent model files: each must fail with an InputError whose
// message names the file and the problem (NaN weights only warn). The files are
// built by hand in a TempDir, so nothing here needs ../shared.
#include <cstring>
#include <fstream>
#include <functional>
#include <random>

#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "embedlab/error.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/model.hpp"
#include "embedlab/model_files.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace embedlab;
using namespace embedlab::test;

namespace {

// ---------------------------------------------------------------- builders

std::string f32_bytes(const torch::Tensor& t)
{
    const torch::Tensor c = t.to(torch::kFloat32).contiguous();
    return {static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel() * 4)};
}

std::string safetensors_raw(const std::string& header, const std::string& data)
{
    return le_bytes<uint64_t>(header.size()) + header + data;
}

std::string safetensors_f32(const WeightMap& tensors)
{
    json header = json::object();
    std::string data;
    for (const auto& [name, t] : tensors) {
        const std::string bytes = f32_bytes(t);
        header[name] = {{"dtype", "F32"},
                        {"shape", t.sizes().vec()},
                        {"data_offsets", {data.size(), data.size() + bytes.size()}}};
        data += bytes;
    }
    return safetensors_raw(header.dump(), data);
}

// A complete tiny GPT-2 (V=5, d=4, 1 layer) and its config.
WeightMap gpt2_weights()
{
    WeightMap w;
    const int64_t d = 4;
    w["wte.weight"] = torch::randn({5, d});
    w["wpe.weight"] = torch::randn({3, d});
    for (const char* n : {"ln_f.weight", "ln_f.bias", "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.ln_2.weight",
                          "h.0.ln_2.bias", "h.0.attn.c_proj.bias", "h.0.mlp.c_proj.bias"})
        w[n] = torch::randn({d});
    w["h.0.attn.c_attn.weight"] = torch::randn({d, 3 * d});
    w["h.0.attn.c_attn.bias"] = torch::randn({3 * d});
    w["h.0.attn.c_proj.weight"] = torch::randn({d, d});
    w["h.0.mlp.c_fc.weight"] = torch::randn({d, 4 * d});
    w["h.0.mlp.c_fc.bias"] = torch::randn({4 * d});
    w["h.0.mlp.c_proj.weight"] = torch::randn({4 * d, d});
    return w;
}

json gpt2_config()
{
    return {{"model_type", "gpt2"}, {"vocab_size", 5}, {"n_embd", 4},
            {"n_layer", 1},         {"n_head", 2},     {"n_positions", 3}};
}

fs::path write_gpt2_dir(const fs::path& dir, const json& config, const WeightMap& w)
{
    fs::create_directories(dir);
    write_file(dir / "config.json", config.dump());
    write_file(dir / "model.safetensors", safetensors_f32(w));
    return dir;
}

// GGUF pieces.
std::string gstr(const std::string& s)
{
    return le_bytes<uint64_t>(s.size()) + s;
}
std::string kv_u32(const std::string& key, uint32_t v)
{
    return gstr(key) + le_bytes<uint32_t>(4) + le_bytes(v);
}
std::string kv_str(const std::string& key, const std::string& v)
{
    return gstr(key) + le_bytes<uint32_t>(8) + gstr(v);
}

struct Gguf {
    std::string magic = "GGUF";
    uint32_t version = 3;
    std::vector<std::string> kvs;
    struct Tensor {
        std::string name;
        std::vector<uint64_t> ne;
        uint32_t type;
        std::string data;
    };
    std::vector<Tensor> tensors;

    // Up to the end of the tensor table.
    std::string header() const
    {
        std::string b =
            magic + le_bytes(version) + le_bytes<uint64_t>(tensors.size()) + le_bytes<uint64_t>(kvs.size());
        for (const auto& kv : kvs)
            b += kv;
        uint64_t offset = 0;
        for (const auto& t : tensors) {
            b += gstr(t.name) + le_bytes<uint32_t>(t.ne.size());
            for (uint64_t ne : t.ne)
                b += le_bytes(ne);
            b += le_bytes(t.type) + le_bytes(offset);
            offset += (t.data.size() + 31) / 32 * 32;
        }
        return b;
    }
    std::string bytes() const
    {
        std::string b = header();
        b.resize((b.size() + 31) / 32 * 32, '\0');
        for (const auto& t : tensors) {
            b += t.data;
            b.resize((b.size() + 31) / 32 * 32, '\0');
        }
        return b;
    }
};

// A valid one-layer llama GGUF: V=3, d=4, 2 heads, feed-forward 4.
Gguf tiny_llama_gguf()
{
    Gguf g;
    g.kvs = {kv_str("general.architecture", "llama"),
             kv_u32("llama.embedding_length", 4),
             kv_u32("llama.block_count", 1),
             kv_u32("llama.feed_forward_length", 4),
             kv_u32("llama.attention.head_count", 2),
             kv_u32("llama.context_length", 8),
             gstr("tokenizer.ggml.tokens") + le_bytes<uint32_t>(9) + le_bytes<uint32_t>(8) +
                 le_bytes<uint64_t>(3) + gstr("a") + gstr("b") + gstr("c")};
    auto f32 = [](std::vector<uint64_t> ne) {
        uint64_t n = 1;
        for (uint64_t x : ne)
            n *= x;
        return Gguf::Tensor{"", ne, 0, f32_bytes(torch::randn({static_cast<int64_t>(n)}))};
    };
    auto add = [&](const std::string& name, std::vector<uint64_t> ne) {
        g.tensors.push_back(f32(ne));
        g.tensors.back().name = name;
    };
    add("token_embd.weight", {4, 3});
    add("output_norm.weight", {4});
    for (const char* n : {"attn_norm", "ffn_norm"})
        add(std::string("blk.0.") + n + ".weight", {4});
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
        add(std::string("blk.0.") + n + ".weight", {4, 4});
    return g;
}

// llama2.c checkpoint bytes for dim 4, hidden 4, 1 layer, 2 heads, vocab 3, seq 2.
std::string tiny_llama2c()
{
    std::string b;
    for (int32_t v : {4, 4, 1, 2, 2, 3, 2})
        b += le_bytes(v);
    const int64_t floats = 3 * 4 + 4 + 16 * 4 + 4 + 16 * 3 + 4 + 2 * 2;
    return b + f32_bytes(torch::randn({floats}));
}

// ---------------------------------------------------------------- checks

// `call` throws InputError naming `file` and containing every word of `words`.
template <typename Call>
void expect_input_error(Call call, const fs::path& file, std::initializer_list<const char*> words)
{
    try {
        call();
        ADD_FAILURE() << "no InputError for " << file;
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(file.string()), std::string::npos) << "message does not name the file: " << msg;
        for (const char* w : words)
            EXPECT_NE(msg.find(w), std::string::npos) << "message lacks '" << w << "': " << msg;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "wrong exception type for " << file << ": " << e.what();
    }
}

// The same, and the message is one line.
template <typename Call>
void expect_one_line_input_error(Call call, const fs::path& file, std::initializer_list<const char*> words)
{
    expect_input_error(
        [&] {
            try {
                call();
            } catch (const InputError& e) {
                EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
                throw;
            }
        },
        file, words);
}

void expect_read_error(const fs::path& path, std::initializer_list<const char*> words,
                       const fs::path& named = {})
{
    expect_input_error([&] { read_model_files(path); }, named.empty() ? path : named, words);
}

void expect_safetensors_error(const TempDir& dir, const std::string& bytes,
                              std::initializer_list<const char*> words)
{
    const fs::path file = dir / "bad.safetensors";
    write_file(file, bytes);
    expect_input_error([&] { load_safetensors(file); }, file, words);
}

// ---------------------------------------------------------------- safetensors

TEST(BadSafetensors, Truncated)
{
    TempDir dir;
    const std::string good = safetensors_f32({{"t", torch::randn({16})}});
    expect_safetensors_error(dir, good.substr(0, 5), {"truncated"});
    expect_safetensors_error(dir, good.substr(0, good.size() - 10), {"truncated", "outside the data"});
}

TEST(BadSafetensors, HeaderLengthLargerThanFile)
{
    TempDir dir;
    expect_safetensors_error(dir, le_bytes<uint64_t>(1000000) + "{}",
                             {"header length 1000000", "larger than the file"});
    expect_safetensors_error(dir, le_bytes<uint64_t>(~0ull) + "{}", {"larger than the file"});
}

TEST(BadSafetensors, HeaderNotJson)
{
    TempDir dir;
    expect_safetensors_error(dir, safetensors_raw("{\"t\": [", ""), {"not valid JSON"});
    expect_safetensors_error(dir, safetensors_raw("[1, 2]", ""), {"not a JSON object"});
}

TEST(BadSafetensors, OffsetsOutsideData)
{
    TempDir dir;
    const std::string h = R"({"t":{"dtype":"F32","shape":[250],"data_offsets":[0,1000]}})";
    expect_safetensors_error(dir, safetensors_raw(h, std::string(16, '\0')),
                             {"'t'", "outside the data section"});
    const std::string reversed = R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})";
    expect_safetensors_error(dir, safetensors_raw(reversed, std::string(16, '\0')), {"outside"});
}

TEST(BadSafetensors, OverlappingOffsets)
{
    TempDir dir;
    const std::string h = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                          R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})";
    expect_safetensors_error(dir, safetensors_raw(h, std::string(24, '\0')), {"'a'", "'b'", "overlap"});
}

// Two tensors on one byte range (an alias the file cannot mean): refused naming
// both, as GGUF refuses overlapping tensors (issue 57 item 11; fuzz seed same-range).
TEST(BadSafetensors, TensorsSharingOneByteRangeAreRefused)
{
    TempDir dir;
    const std::string h = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                          R"("b":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
    expect_safetensors_error(dir, safetensors_raw(h, std::string(16, '\0')),
                             {"'a' [0, 16]", "'b' [0, 16]", "overlap"});
}

TEST(BadSafetensors, ShapeDisagreesWithByteCount)
{
    TempDir dir;
    const std::string h = R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})";
    expect_safetensors_error(dir, safetensors_raw(h, std::string(16, '\0')),
                             {"'t'", "needs 16 bytes", "span 12"});
}

TEST(BadSafetensors, UnknownDtype)
{
    TempDir dir;
    const std::string h = R"({"t":{"dtype":"Q4_K","shape":[4],"data_offsets":[0,4]}})";
    expect_safetensors_error(dir, safetensors_raw(h, std::string(4, '\0')), {"unknown dtype 'Q4_K'"});
}

TEST(BadSafetensors, NegativeAndHugeDimensions)
{
    TempDir dir;
    const std::string neg = R"({"t":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,16]}})";
    expect_safetensors_error(dir, safetensors_raw(neg, std::string(16, '\0')), {"negative dimension -1"});
    const std::string huge =
        R"({"t":{"dtype":"F32","shape":[1000000000000,1000000000000],"data_offsets":[0,16]}})";
    expect_safetensors_error(dir, safetensors_raw(huge, std::string(16, '\0')), {"too large"});
    const std::string big = R"({"t":{"dtype":"F32","shape":[1000000000,1000000000],"data_offsets":[0,16]}})";
    expect_safetensors_error(dir, safetensors_raw(big, std::string(16, '\0')),
                             {"needs 4000000000000000000 bytes"});
    const std::string frac = R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})";
    expect_safetensors_error(dir, safetensors_raw(frac, std::string(16, '\0')), {"not a list of integers"});
}

// Issue 35 item 7: no shape reaches libtorch whose size does not fit in 64 bits,
// an empty one included (libtorch computes its strides all the same).
TEST(BadSafetensors, ShapesWhoseSizeWrapsAreRefused)
{
    TempDir dir;
    const fs::path file = dir / "model.safetensors";
    for (const char* shape :
         {"[4611686018427387904,4]", "[0,4611686018427387904,4]", "[0,9223372036854775807,2]"}) {
        write_file(file, safetensors_raw(std::string(R"({"t":{"dtype":"F32","shape":)") + shape +
                                             R"(,"data_offsets":[0,0]}})",
                                         ""));
        expect_one_line_input_error([&] { load_safetensors(file); }, file, {"tensor 't'", "too large"});
    }
}

// Issue 24 item 15: JSON keeps the last of two equal keys; a tensor named twice is refused.
TEST(BadSafetensors, DuplicateTensorNameIsRefused)
{
    TempDir dir;
    const std::string h = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    expect_safetensors_error(dir, safetensors_raw(h, std::string(8, '\0')), {"tensor 't' is named twice"});
}

TEST(BadSafetensors, ParseHeaderNamesTheLabel)
{
    const std::string bytes = "abc";
    expect_input_error(
        [&] {
            parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                     "my.safetensors");
        },
        "my.safetensors", {"truncated"});
}

// ---------------------------------------------------------------- HF directories

TEST(BadHfModel, MissingTensor)
{
    TempDir dir;
    WeightMap w = gpt2_weights();
    w.erase("h.0.mlp.c_fc.bias");
    const fs::path model = write_gpt2_dir(dir / "m", gpt2_config(), w);
    expect_read_error(model, {"missing tensor 'h.0.mlp.c_fc.bias'"}, model / "model.safetensors");
}

TEST(BadHfModel, TensorShapeDisagreesWithConfig)
{
    TempDir dir;
    WeightMap w = gpt2_weights();
    w["h.0.attn.c_proj.weight"] = torch::randn({4, 5});
    const fs::path model = write_gpt2_dir(dir / "m", gpt2_config(), w);
    expect_read_error(model, {"h.0.attn.c_proj.weight", "[4, 5]", "[4, 4]"}, model / "model.safetensors");
}

TEST(BadHfModel, VocabSizeDisagreesWithEmbedding)
{
    TempDir dir;
    json config = gpt2_config();
    config["vocab_size"] = 7;
    const fs::path model = write_gpt2_dir(dir / "m", config, gpt2_weights());
    expect_read_error(model, {"vocab_size 7", "disagrees", "5 rows", "wte.weight"}, model / "config.json");
}

TEST(BadHfModel, ConfigNotJson)
{
    TempDir dir;
    const fs::path model = write_gpt2_dir(dir / "m", gpt2_config(), gpt2_weights());
    write_file(model / "config.json", "{ \"model_type\": \"gpt2\", ");
    expect_read_error(model, {"not valid JSON"}, model / "config.json");
}

TEST(BadHfModel, ConfigLacksField)
{
    TempDir dir;
    json config = gpt2_config();
    config.erase("n_head");
    const fs::path model = write_gpt2_dir(dir / "m", config, gpt2_weights());
    expect_read_error(model, {"missing field 'n_head'"}, model / "config.json");
    expect_input_error([] { parse_hf_config(R"({"model_type":"llama","vocab_size":3})", "c.json"); },
                       "c.json", {"missing field 'hidden_size'"});
    expect_input_error([] { parse_hf_config(R"({"vocab_size":3})", "c.json"); }, "c.json",
                       {"missing field 'model_type'"});
    expect_input_error([] { parse_hf_config(R"({"model_type":"gpt2","vocab_size":"many"})", "c.json"); },
                       "c.json", {"'vocab_size'", "positive integer"});
}

// An epsilon of 1e300 (or 1, or more) in config.json is no LayerNorm or RMSNorm
// epsilon: it swamps the variance and every norm's output is ~0. Refused naming
// the file and the field (issue 57 item 11).
TEST(BadHfModel, AbsurdNormEpsilonIsRefused)
{
    const json llama = {{"model_type", "llama"},       {"vocab_size", 8},          {"hidden_size", 4},
                        {"num_hidden_layers", 1},      {"num_attention_heads", 2}, {"intermediate_size", 8},
                        {"max_position_embeddings", 8}};
    const json bert = {{"model_type", "bert"},        {"vocab_size", 8},          {"hidden_size", 4},
                       {"num_hidden_layers", 1},      {"num_attention_heads", 2}, {"intermediate_size", 8},
                       {"max_position_embeddings", 8}};
    const std::pair<json, const char*> families[] = {
        {llama, "rms_norm_eps"}, {gpt2_config(), "layer_norm_epsilon"}, {bert, "layer_norm_eps"}};
    for (const auto& [base, field] : families) {
        SCOPED_TRACE(field);
        for (const double eps : {1e300, 1.0, 2.5}) {
            json c = base;
            c[field] = eps;
            expect_input_error([&] { parse_hf_config(c.dump(), "c.json"); }, "c.json",
                               {(std::string("field '") + field + "'").c_str(), "less than 1"});
        }
        json c = base;
        c[field] = 1e-5;
        EXPECT_NO_THROW(parse_hf_config(c.dump(), "c.json"));
    }
    TempDir dir;
    json config = gpt2_config();
    config["layer_norm_epsilon"] = 1e300;
    const fs::path model = write_gpt2_dir(dir / "m", config, gpt2_weights());
    expect_read_error(model, {"'layer_norm_epsilon'", "1e+300"}, model / "config.json");
}

TEST(BadHfModel, UnknownModelType)
{
    TempDir dir;
    json config = gpt2_config();
    config["model_type"] = "mamba";
    const fs::path model = write_gpt2_dir(dir / "m", config, gpt2_weights());
    expect_read_error(model, {"model_type 'mamba'", "gpt2", "llama"}, model / "config.json");
}

TEST(BadHfModel, NoWeightsOrMissingShard)
{
    TempDir dir;
    const fs::path model = write_gpt2_dir(dir / "m", gpt2_config(), gpt2_weights());
    fs::remove(model / "model.safetensors");
    expect_read_error(model, {"no model.safetensors"});
    write_file(model / "model.safetensors.index.json",
               json{{"weight_map", {{"wte.weight", "model-00001-of-00002.safetensors"}}}}.dump());
    expect_read_error(model, {"model-00001-of-00002.safetensors", "missing"},
                      model / "model.safetensors.index.json");
    write_file(model / "model.safetensors.index.json",
               json{{"weight_map", {{"wte.weight", "../x.safetensors"}}}}.dump());
    expect_read_error(model, {"not a file in the model directory"}, model / "model.safetensors.index.json");
}

TEST(BadHfModel, NaNAndInfAreWarningsNotErrors)
{
    TempDir dir;
    WeightMap w = gpt2_weights();
    w["h.0.mlp.c_fc.bias"][3] = NAN;
    w["wpe.weight"][0][0] = INFINITY;
    w["ln_f.bias"][0] = NAN;
    w["ln_f.bias"][1] = -INFINITY;
    const fs::path model = write_gpt2_dir(dir / "m", gpt2_config(), w);
    const ModelFiles mf = read_model_files(model);
    EXPECT_EQ(mf.warnings,
              (std::vector<std::string>{"NaN in tensor h.0.mlp.c_fc.bias", "NaN and Inf in tensor ln_f.bias",
                                        "Inf in tensor wpe.weight"}));
}

// inspect's reading (WeightValues::ShapesOnly): the same tensors and shapes without
// values, and the same NaN/Inf warnings, read from the stored F32, F16 or BF16 bits.
TEST(BadHfModel, ShapesOnlyScansTheStoredBits)
{
    WeightMap w = gpt2_weights();
    w["h.0.mlp.c_fc.bias"][3] = NAN;
    w["wpe.weight"][0][0] = INFINITY;
    w["ln_f.bias"][0] = NAN;
    w["ln_f.bias"][1] = -INFINITY;
    for (const auto dtype : {torch::kFloat32, torch::kFloat16, torch::kBFloat16}) {
        SCOPED_TRACE(c10::toString(dtype));
        TempDir dir;
        fs::create_directories(dir / "m");
        write_file(dir / "m" / "config.json", gpt2_config().dump());
        std::vector<std::pair<std::string, torch::Tensor>> stored;
        for (const auto& [name, t] : w)
            stored.emplace_back(name, t.to(dtype));
        write_safetensors(dir / "m" / "model.safetensors", stored);
        const ModelFiles loaded = read_model_files(dir / "m");
        const ModelFiles shapes = read_model_files(dir / "m", WeightValues::ShapesOnly);
        EXPECT_EQ(loaded.warnings.size(), 3u);
        EXPECT_EQ(shapes.warnings, loaded.warnings);
        EXPECT_EQ(shapes.stored_dtype, loaded.stored_dtype);
        ASSERT_EQ(shapes.weights.size(), loaded.weights.size());
        for (const auto& [name, t] : loaded.weights) {
            EXPECT_TRUE(shapes.weights.at(name).is_meta()) << name;
            EXPECT_EQ(shapes.weights.at(name).sizes(), t.sizes()) << name;
        }
    }
}

// Generation keeps f16/bf16 matrices as stored (generation_weights.hpp): they are scanned
// from their bits and give the float32 load's warnings.
TEST(BadHfModel, HalfMatricesKeptForGenerationAreScannedToo)
{
    WeightMap w = gpt2_weights();
    w["h.0.mlp.c_fc.bias"][3] = NAN;
    w["wpe.weight"][0][0] = INFINITY;
    w["h.0.attn.c_attn.weight"][1][2] = NAN;
    for (const auto dtype : {torch::kFloat16, torch::kBFloat16}) {
        SCOPED_TRACE(c10::toString(dtype));
        TempDir dir;
        fs::create_directories(dir / "m");
        write_file(dir / "m" / "config.json", gpt2_config().dump());
        std::vector<std::pair<std::string, torch::Tensor>> stored;
        for (const auto& [name, t] : w)
            stored.emplace_back(name, t.to(dtype));
        write_safetensors(dir / "m" / "model.safetensors", stored);
        const auto f32 = load_model(dir / "m", {.need_tokenizer = false});
        const auto half =
            load_model_for_generation(dir / "m", {.need_tokenizer = false}, GenerationWeights::Half);
        EXPECT_TRUE(holds_half_weights(*half.model));
        EXPECT_EQ(half.model->weights().at("h.0.attn.c_attn.weight").scalar_type(), dtype);
        EXPECT_EQ(half.files.warnings.size(), 3u);
        EXPECT_EQ(half.files.warnings, f32.files.warnings);
    }
}

// ---------------------------------------------------------------- GGUF

fs::path write_gguf(const TempDir& dir, const std::string& bytes)
{
    const fs::path file = dir / "bad.gguf";
    write_file(file, bytes);
    return file;
}

TEST(BadGguf, TheBuilderMakesAValidFile)
{
    TempDir dir;
    const ModelFiles mf = read_model_files(write_gguf(dir, tiny_llama_gguf().bytes()));
    EXPECT_EQ(mf.config.vocab_size, 3);
    EXPECT_TRUE(mf.config.tied_embeddings);
}

TEST(BadGguf, WrongMagic)
{
    TempDir dir;
    Gguf g = tiny_llama_gguf();
    g.magic = "GGML";
    expect_read_error(write_gguf(dir, g.bytes()), {"wrong magic 'GGML'"});
    expect_read_error(write_gguf(dir, "GG"), {"truncated"});
}

TEST(BadGguf, WrongVersion)
{
    TempDir dir;
    Gguf g = tiny_llama_gguf();
    g.version = 7;
    expect_read_error(write_gguf(dir, g.bytes()), {"version 7"});
    g.version = 1;
    expect_read_error(write_gguf(dir, g.bytes()), {"version 1"});
}

TEST(BadGguf, TruncatedTensorTable)
{
    TempDir dir;
    const std::string header = tiny_llama_gguf().header();
    expect_read_error(write_gguf(dir, header.substr(0, header.size() - 6)), {"truncated"});
    expect_read_error(write_gguf(dir, header.substr(0, header.size() - 40)), {"truncated"});
}

TEST(BadGguf, TruncatedData)
{
    TempDir dir;
    const std::string bytes = tiny_llama_gguf().bytes();
    expect_read_error(write_gguf(dir, bytes.substr(0, bytes.size() - 40)),
                      {"outside the data section", "truncated"});
}

TEST(BadGguf, ClaimsOfATrillionFailFast)
{
    TempDir dir;
    const uint64_t trillion = 1000000000000ull;
    Gguf g = tiny_llama_gguf();
    g.kvs.push_back(gstr("huge.array") + le_bytes<uint32_t>(9) + le_bytes<uint32_t>(0) + le_bytes(trillion));
    expect_read_error(write_gguf(dir, g.bytes()), {"claims 1000000000000", "huge.array"});

    g = tiny_llama_gguf();
    g.kvs.push_back(gstr("huge.strings") + le_bytes<uint32_t>(9) + le_bytes<uint32_t>(8) +
                    le_bytes(trillion));
    expect_read_error(write_gguf(dir, g.bytes()), {"claims 1000000000000"});

    g = tiny_llama_gguf();
    g.kvs.push_back(gstr("huge.string") + le_bytes<uint32_t>(8) + le_bytes(trillion));
    expect_read_error(write_gguf(dir, g.bytes()), {"claims a string of 1000000000000 bytes"});

    g = tiny_llama_gguf();
    g.tensors[0].ne = {trillion, trillion, trillion};
    expect_read_error(write_gguf(dir, g.bytes()), {"token_embd.weight", "impossibly large"});
    g.tensors[0].ne = {trillion, 4};
    expect_read_error(write_gguf(dir, g.bytes()), {"token_embd.weight", "outside the data section"});

    std::string counts = tiny_llama_gguf().bytes();
    std::memcpy(counts.data() + 8, &trillion, 8); // tensor count
    expect_read_error(write_gguf(dir, counts), {"claims 1000000000000 tensors"});
    counts = tiny_llama_gguf().bytes();
    std::memcpy(counts.data() + 16, &trillion, 8); // key/value count
    expect_read_error(write_gguf(dir, counts), {"claims 1000000000000 metadata"});
}

// Issue 35 item 7: dimensions whose size product wraps 64 bits ([2^62, 4] in F32 is
// 2^64 bytes, i.e. 0) passed the bounds check, and libtorch then failed with a
// stack trace that named no file. Refused as one line naming the file and tensor.
TEST(BadGguf, DimensionsWhoseSizeWrapsAreRefused)
{
    TempDir dir;
    Gguf g = tiny_llama_gguf();
    g.tensors[0].ne = {uint64_t{1} << 62, 4};
    const fs::path file = write_gguf(dir, g.bytes());
    expect_one_line_input_error([&] { read_model_files(file); }, file,
                                {"token_embd.weight", "[4611686018427387904, 4]", "impossibly large"});
    // An empty tensor whose other dimensions overflow libtorch's strides.
    g.tensors[0].ne = {4, 0, uint64_t{1} << 62, uint64_t{1} << 62};
    expect_one_line_input_error([&] { read_model_files(write_gguf(dir, g.bytes())); }, file,
                                {"token_embd.weight", "impossibly large"});
}

TEST(BadGguf, BadDimensionsAndTypes)
{
    TempDir dir;
    Gguf g = tiny_llama_gguf();
    g.tensors[1].ne = {1, 1, 1, 1, 4};
    expect_read_error(write_gguf(dir, g.bytes()), {"output_norm.weight", "5 dimensions"});

    g = tiny_llama_gguf();
    g.tensors[1].type = 2; // Q4_0
    expect_read_error(write_gguf(dir, g.bytes()), {"output_norm.weight", "Q4_0"});

    g = tiny_llama_gguf();
    g.kvs.push_back(gstr("odd.type") + le_bytes<uint32_t>(13) + le_bytes<uint32_t>(0));
    expect_read_error(write_gguf(dir, g.bytes()), {"odd.type", "unknown value type 13"});

    g = tiny_llama_gguf();
    std::string nested = gstr("deep") + le_bytes<uint32_t>(9);
    for (int i = 0; i < 20; ++i)
        nested += le_bytes<uint32_t>(9) + le_bytes<uint64_t>(1);
    g.kvs.push_back(nested + le_bytes<uint32_t>(0) + le_bytes<uint64_t>(0));
    expect_read_error(write_gguf(dir, g.bytes()), {"deep", "nests arrays"});
}

TEST(BadGguf, ArchitectureAndConsistency)
{
    TempDir dir;
    Gguf g = tiny_llama_gguf();
    g.kvs[0] = kv_str("general.architecture", "falcon");
    expect_read_error(write_gguf(dir, g.bytes()), {"general.architecture is 'falcon'", "llama"});

    g = tiny_llama_gguf();
    g.kvs[1] = kv_u32("llama.embedding_length", 8);
    expect_read_error(write_gguf(dir, g.bytes()), {"hidden size 8", "disagrees"});

    g = tiny_llama_gguf();
    g.kvs.back() = gstr("tokenizer.ggml.tokens") + le_bytes<uint32_t>(9) + le_bytes<uint32_t>(8) +
                   le_bytes<uint64_t>(2) + gstr("a") + gstr("b");
    expect_read_error(write_gguf(dir, g.bytes()), {"vocab_size 2", "disagrees", "3 rows"});

    g = tiny_llama_gguf();
    g.tensors.pop_back();
    expect_read_error(write_gguf(dir, g.bytes()), {"missing tensor 'model.layers.0.mlp.down_proj.weight'"});

    g = tiny_llama_gguf();
    g.kvs.erase(g.kvs.begin() + 2);
    expect_read_error(write_gguf(dir, g.bytes()), {"missing metadata 'llama.block_count'"});
}

std::string kv_f32(const std::string& key, float v)
{
    return gstr(key) + le_bytes<uint32_t>(6) + le_bytes(v);
}

// The GGUF's own epsilon too (issue 57 item 11; fuzz seed rms-eps-1e30).
TEST(BadGguf, AbsurdNormEpsilonIsRefused)
{
    TempDir dir;
    for (const float eps : {1e30f, 1.0f}) {
        Gguf g = tiny_llama_gguf();
        g.kvs.push_back(kv_f32("llama.attention.layer_norm_rms_epsilon", eps));
        const fs::path file = write_gguf(dir, g.bytes());
        expect_read_error(file, {"'llama.attention.layer_norm_rms_epsilon'", "less than 1"});
    }
    Gguf g = tiny_llama_gguf();
    g.kvs.push_back(kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f));
    EXPECT_NO_THROW(read_model_files(write_gguf(dir, g.bytes())));
}

std::string kv_tokens(const std::vector<std::string>& tokens)
{
    std::string b = gstr("tokenizer.ggml.tokens") + le_bytes<uint32_t>(9) + le_bytes<uint32_t>(8) +
                    le_bytes<uint64_t>(tokens.size());
    for (const auto& t : tokens)
        b += gstr(t);
    return b;
}

// A GPT-2 BPE tokenizer directory (vocab.json + merges.txt) of `tokens`, no merges.
fs::path write_bpe_tokenizer(const fs::path& dir, const std::vector<std::string>& tokens)
{
    fs::create_directories(dir);
    json vocab = json::object();
    for (size_t id = 0; id < tokens.size(); ++id)
        vocab[tokens[id]] = id;
    write_file(dir / "vocab.json", vocab.dump());
    write_file(dir / "merges.txt", "#version: 0.2\n");
    return dir;
}

// A --tokenizer on a GGUF that lists its own tokens (tokenizer.ggml.tokens, here
// without the scores EmbedLab's own reading needs, as gpt2's BPE) must be that list:
// a 32,000-token tokenizer on a 50,257-row gpt2 GGUF gave perplexity 76,879
// (issue 57 item 11). Refused naming both files and the counts or the first id
// that differs; llama.cpp's [PADn] rows after the tokenizer's last id are rows no
// id reaches, so they pass.
TEST(BadGguf, ExternalTokenizerMustBeTheGgufsOwnList)
{
    TempDir dir;
    const fs::path gguf = write_gguf(dir, tiny_llama_gguf().bytes()); // lists a, b, c
    const auto load = [&](const fs::path& file, const fs::path& tokenizer) {
        return load_model(file, {.tokenizer = tokenizer});
    };
    EXPECT_EQ(load(gguf, write_bpe_tokenizer(dir / "same", {"a", "b", "c"})).tokenizer->vocab_size(), 3);

    const fs::path fewer = write_bpe_tokenizer(dir / "fewer", {"a", "b"});
    expect_input_error([&] { load(gguf, fewer); }, gguf,
                       {fewer.string().c_str(), "has 2 tokens", "lists 3", "tokenizer.ggml.tokens"});
    const fs::path other = write_bpe_tokenizer(dir / "other", {"a", "x", "c"});
    expect_input_error([&] { load(gguf, other); }, gguf,
                       {other.string().c_str(), "token 1 is 'x'", "lists 'b'", "tokenizer.ggml.tokens"});

    Gguf padded = tiny_llama_gguf();
    padded.kvs.back() = kv_tokens({"a", "b", "[PAD2]"});
    const fs::path padded_file = dir / "padded.gguf";
    write_file(padded_file, padded.bytes());
    EXPECT_NO_THROW(load(padded_file, fewer));
    // A padding row inside the tokenizer's ids is a disagreement like any other.
    expect_input_error(
        [&] {
            load(padded_file, write_bpe_tokenizer(dir / "abc", {"a", "b", "c"}));
        },
        padded_file, {"token 2 is 'c'", "lists '[PAD2]'"});
}

// Random byte flips and truncations of valid files: reading either succeeds or
// throws InputError; never another exception, never a crash.
void expect_only_input_errors(const fs::path& file, const std::string& good, uint64_t mutable_prefix,
                              const std::function<void()>& read)
{
    std::mt19937_64 rng(12345);
    for (int round = 0; round < 400; ++round) {
        std::string bytes = good;
        if (round % 4 == 0) {
            bytes.resize(rng() % good.size());
        } else {
            for (int k = 0, flips = 1 + static_cast<int>(rng() % 4); k < flips; ++k)
                bytes[rng() % std::min<uint64_t>(mutable_prefix, bytes.size())] = static_cast<char>(rng());
        }
        write_file(file, bytes);
        try {
            read();
        } catch (const InputError&) {
        } catch (const std::exception& e) {
            ADD_FAILURE() << "round " << round << ": not an InputError: " << e.what();
        }
    }
}

TEST(BadFiles, RandomCorruptionOnlyThrowsInputError)
{
    TempDir dir;
    const Gguf g = tiny_llama_gguf();
    const fs::path gguf = dir / "fuzz.gguf";
    expect_only_input_errors(gguf, g.bytes(), g.header().size(), [&] { read_model_files(gguf); });

    const std::string st = safetensors_f32(gpt2_weights());
    uint64_t header_len;
    std::memcpy(&header_len, st.data(), 8);
    const fs::path model = write_gpt2_dir(dir / "m", gpt2_config(), gpt2_weights());
    expect_only_input_errors(model / "model.safetensors", st, 8 + header_len,
                             [&] { read_model_files(model); });

    const std::string bin = tiny_llama2c();
    const fs::path l2c = dir / "fuzz.bin";
    expect_only_input_errors(l2c, bin, 28, [&] { read_model_files(l2c); });
}

// ---------------------------------------------------------------- llama2.c and dispatch

TEST(BadLlama2c, TruncatedOrTooLong)
{
    TempDir dir;
    const fs::path file = dir / "m.bin";
    const std::string good = tiny_llama2c();
    write_file(file, good);
    EXPECT_EQ(read_model_files(file).config.vocab_size, 3);

    const std::string expected = std::to_string(good.size()) + " bytes";
    write_file(file, good.substr(0, good.size() - 4));
    expect_read_error(file, {"truncated", expected.c_str(), std::to_string(good.size() - 4).c_str()});
    write_file(file, good + "xxxx");
    expect_read_error(file, {"too long", expected.c_str()});
    write_file(file, good.substr(0, 10));
    expect_read_error(file, {"truncated"});
}

TEST(BadLlama2c, NonsenseHeader)
{
    TempDir dir;
    const fs::path file = dir / "m.bin";
    std::string bad = tiny_llama2c();
    const int32_t heads = 3; // dim 4 is not divisible by 3
    std::memcpy(bad.data() + 12, &heads, 4);
    write_file(file, bad);
    expect_read_error(file, {"n_heads 3", "inconsistent"});

    std::string huge = tiny_llama2c();
    const int32_t big = 2000000000;
    for (int field : {0, 1, 2, 5, 6})
        std::memcpy(huge.data() + 4 * field, &big, 4);
    const int32_t heads_big = 2000000000;
    std::memcpy(huge.data() + 12, &heads_big, 4);
    std::memcpy(huge.data() + 16, &heads_big, 4);
    write_file(file, huge);
    expect_read_error(file, {"dim 2000000000"});

    write_file(file, std::string("PK\x03\x04", 4) + std::string(100, '\0'));
    expect_read_error(file, {"PyTorch"});
}

// Issue 35 item 7: a header whose sizes overflow 64 bits.
TEST(BadLlama2c, HugeDimensionsAreRefused)
{
    TempDir dir;
    const fs::path file = dir / "m.bin";
    std::string huge = tiny_llama2c();
    // dim, hidden_dim, n_layers 2^30, 2^20 heads of 1024: n_layers * hidden_dim * dim = 2^90.
    for (const auto& [field, value] : {std::pair{0, 1 << 30},
                                       {1, 1 << 30},
                                       {2, 1 << 30},
                                       {3, 1 << 20},
                                       {4, 1 << 20},
                                       {5, 1 << 30},
                                       {6, 1 << 30}})
        std::memcpy(huge.data() + 4 * field, &value, 4);
    write_file(file, huge);
    expect_one_line_input_error([&] { read_model_files(file); }, file, {"dim 1073741824", "impossible size"});
}

TEST(BadPaths, NonexistentAndUnsupported)
{
    TempDir dir;
    expect_read_error(dir / "nothing-here", {"no such file or directory"});
    write_file(dir / "model.onnx", "x");
    expect_read_error(dir / "model.onnx", {"unsupported model file", ".gguf", "llama2.c", "Hugging Face"});
    fs::create_directories(dir / "empty");
    expect_read_error(dir / "empty", {"no config.json"});
    write_file(dir / "empty.bin", "");
    expect_read_error(dir / "empty.bin", {"truncated"});
}

// Issue 24, items 8 and 9: a FIFO or a device in place of a file is refused at
// once (no read blocks: a hang would hit the test's TIMEOUT), and metadata files
// are read under a size cap that the message names.
TEST(BadPaths, FifosDevicesAndHugeFilesAreRefused)
{
    TempDir dir;
    const fs::path good = write_gpt2_dir(dir / "m", gpt2_config(), gpt2_weights());
    auto replaced = [&](const std::string& name, const std::function<void(const fs::path&)>& make) {
        const fs::path copy = dir / ("copy-" + std::to_string(std::rand()));
        fs::copy(good, copy, fs::copy_options::recursive);
        fs::remove(copy / name);
        make(copy / name);
        return copy;
    };
    auto fifo = [](const fs::path& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0); };
    auto zero = [](const fs::path& p) { fs::create_symlink("/dev/zero", p); };
    for (const char* name : {"config.json", "model.safetensors"})
        for (const auto& make :
             {std::function<void(const fs::path&)>(fifo), std::function<void(const fs::path&)>(zero)}) {
            const fs::path model = replaced(name, make);
            expect_read_error(model, {"not a regular file"}, model / name);
        }
    const fs::path gguf = dir / "model.gguf";
    fifo(gguf);
    expect_read_error(gguf, {"not a regular file"});
    // A sparse 65 MB config.json: refused by its size, before it is read.
    const fs::path big = replaced("config.json", [](const fs::path& p) {
        std::ofstream(p) << "{";
        fs::resize_file(p, 65ull << 20);
    });
    expect_read_error(big, {"65 MB is above the 64 MB EmbedLab reads for a metadata file"},
                      big / "config.json");
    // Texts and ids files.
    const fs::path text_fifo = dir / "text.txt";
    fifo(text_fifo);
    expect_input_error([&] { read_text_file(text_fifo); }, text_fifo, {"not a regular file"});
    expect_input_error([&] { read_text_file("/dev/zero"); }, "/dev/zero", {"not a regular file"});
    expect_input_error([&] { read_ids_file("/dev/urandom"); }, "/dev/urandom", {"not a regular file"});
    expect_input_error([&] { read_text_file(dir.path()); }, dir.path(), {"is a directory"});
    // Issue 35 item 4: the text cap's message says what it is and why.
    const fs::path big_text = dir / "big.txt";
    std::ofstream(big_text) << "x";
    fs::resize_file(big_text, (1ull << 30) + 1);
    expect_input_error([&] { read_text_file(big_text); }, big_text,
                       {"1025 MB is above the 1024 MB", "1 GiB = 1073741824 bytes", "tokenized in memory",
                        "split the text"});
}

} // namespace
