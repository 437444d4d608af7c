// embedlab-cli synth: random-weight directories with real configs and tensor
// names, loaded back by EmbedLab's own loader (inspect, eval), deterministic by
// seed, and refused cleanly on bad input. Two layers keep each model small.
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_in_process.hpp"
#include "cli_support.hpp"
#include "embedlab/synth_model.hpp"

namespace {

namespace fs = std::filesystem;
using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::CliRun;
using embedlab::test::read_text;
using embedlab::test::TempDir;

struct Expected {
    std::string like;
    std::string dtype;      // written with --dtype
    std::string stored;     // inspect's dtype
    std::string model_type; // config.json
    int64_t vocab, hidden, heads, kv_heads, tokenizer_vocab;
};

const std::vector<Expected>& expectations()
{
    static const std::vector<Expected> e = {
        {"gpt2-small", "f32", "F32", "gpt2", 50257, 768, 12, 12, 50257},
        {"gpt2-medium", "bf16", "BF16", "gpt2", 50257, 1024, 16, 16, 50257},
        {"smollm2-135m", "f16", "F16", "llama", 49152, 576, 9, 3, 49152},
        {"smollm2-360m", "bf16", "BF16", "llama", 49152, 960, 15, 5, 49152},
        {"qwen2.5-0.5b", "bf16", "BF16", "qwen2", 151936, 896, 14, 2, 151665},
        {"llama-3.2-1b", "bf16", "BF16", "llama", 128256, 2048, 32, 8, 128256},
        {"pythia-160m", "f16", "F16", "gpt_neox", 50304, 768, 12, 12, 50277},
        {"opt-125m", "f32", "F32", "opt", 50272, 768, 12, 12, 50257},
    };
    return e;
}

// The tensor names of the real checkpoints (Hugging Face's own names), written
// out here rather than taken from the engine.
std::set<std::string> real_tensor_names(const std::string& model_type, int layers)
{
    std::set<std::string> names;
    std::vector<std::string> global, per_layer;
    std::string prefix;
    if (model_type == "gpt2") {
        global = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
        prefix = "h.";
        per_layer = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                     "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                     "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    } else if (model_type == "llama" || model_type == "qwen2") {
        global = {"model.embed_tokens.weight", "model.norm.weight"};
        prefix = "model.layers.";
        per_layer = {"input_layernorm.weight",  "post_attention_layernorm.weight",
                     "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                     "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                     "mlp.gate_proj.weight",    "mlp.up_proj.weight",
                     "mlp.down_proj.weight"};
        if (model_type == "qwen2")
            for (const char* b : {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"})
                per_layer.push_back(b);
    } else if (model_type == "gpt_neox") {
        global = {"gpt_neox.embed_in.weight", "gpt_neox.final_layer_norm.weight",
                  "gpt_neox.final_layer_norm.bias", "embed_out.weight"};
        prefix = "gpt_neox.layers.";
        per_layer = {"input_layernorm.weight",           "input_layernorm.bias",
                     "post_attention_layernorm.weight",  "post_attention_layernorm.bias",
                     "attention.query_key_value.weight", "attention.query_key_value.bias",
                     "attention.dense.weight",           "attention.dense.bias",
                     "mlp.dense_h_to_4h.weight",         "mlp.dense_h_to_4h.bias",
                     "mlp.dense_4h_to_h.weight",         "mlp.dense_4h_to_h.bias"};
    } else if (model_type == "opt") {
        global = {"model.decoder.embed_tokens.weight", "model.decoder.embed_positions.weight",
                  "model.decoder.final_layer_norm.weight", "model.decoder.final_layer_norm.bias"};
        prefix = "model.decoder.layers.";
        for (const char* p : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                              "self_attn.out_proj", "self_attn_layer_norm", "fc1", "fc2", "final_layer_norm"})
            for (const char* kind : {".weight", ".bias"})
                per_layer.push_back(std::string(p) + kind);
    }
    names.insert(global.begin(), global.end());
    for (int l = 0; l < layers; ++l)
        for (const auto& p : per_layer)
            names.insert(prefix + std::to_string(l) + "." + p);
    return names;
}

// The safetensors header (the tensor entries and __metadata__).
nlohmann::json safetensors_header(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    std::string text(n, '\0');
    in.read(text.data(), static_cast<std::streamsize>(n));
    return nlohmann::json::parse(text);
}

// The stored bytes of one tensor.
std::string tensor_bytes(const fs::path& file, const std::string& name)
{
    const auto header = safetensors_header(file);
    const auto begin = header[name]["data_offsets"][0].get<uint64_t>();
    const auto end = header[name]["data_offsets"][1].get<uint64_t>();
    uint64_t n = 0;
    std::ifstream in(file, std::ios::binary);
    in.read(reinterpret_cast<char*>(&n), 8);
    in.seekg(static_cast<std::streamoff>(8 + n + begin));
    std::string bytes(end - begin, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return bytes;
}

// A short English text: about 64 tokens.
std::string short_text(const TempDir& dir)
{
    const auto text = read_text(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt");
    const auto path = dir / "short.txt";
    std::ofstream(path) << text.substr(0, 260);
    return path.string();
}

bool has_temporaries(const fs::path& dir)
{
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".tmp-") != std::string::npos)
            return true;
    return false;
}

class SynthEveryModel : public ::testing::TestWithParam<std::string> {};

TEST_P(SynthEveryModel, LoadsWithRealNamesAndEvaluates)
{
    const Expected* e = nullptr;
    for (const auto& x : expectations())
        if (x.like == GetParam())
            e = &x;
    ASSERT_NE(e, nullptr);
    TempDir tmp;
    const fs::path out = tmp / e->like;
    const CliRun s = cli(
        {"synth", "--like", e->like, "--out", out.string(), "--layers", "2", "--dtype", e->dtype, "--json"});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const auto report = nlohmann::json::parse(s.out);
    EXPECT_EQ(report["layers"], 2);
    EXPECT_EQ(report["tokenizer_vocab_size"], e->tokenizer_vocab);
    EXPECT_FALSE(report["tokenizer"].get<std::string>().empty());

    const auto config = nlohmann::json::parse(read_text(out / "config.json"));
    EXPECT_EQ(config["model_type"], e->model_type);
    EXPECT_EQ(config[e->model_type == "gpt2" ? "n_layer" : "num_hidden_layers"], 2);
    EXPECT_EQ(config["torch_dtype"], e->dtype == "f32"   ? "float32"
                                     : e->dtype == "f16" ? "float16"
                                                         : "bfloat16");

    auto header = safetensors_header(out / "model.safetensors");
    header.erase("__metadata__");
    std::set<std::string> names;
    int64_t parameters = 0;
    for (const auto& [name, entry] : header.items()) {
        names.insert(name);
        EXPECT_EQ(entry["dtype"], e->stored) << name;
        int64_t n = 1;
        for (const auto& d : entry["shape"])
            n *= d.get<int64_t>();
        parameters += n;
    }
    EXPECT_EQ(names, real_tensor_names(e->model_type, 2));
    EXPECT_EQ(report["parameters"], parameters);

    const auto inspect = embedlab::test::json_of(cli({"inspect", out.string(), "--json"}));
    ASSERT_FALSE(inspect.is_null());
    EXPECT_EQ(inspect["architecture"], e->model_type);
    EXPECT_EQ(inspect["vocab_size"], e->vocab);
    EXPECT_EQ(inspect["hidden_size"], e->hidden);
    EXPECT_EQ(inspect["layers"], 2);
    EXPECT_EQ(inspect["heads"], e->heads);
    EXPECT_EQ(inspect["kv_heads"], e->kv_heads);
    EXPECT_EQ(inspect["dtype"], e->stored);
    EXPECT_EQ(inspect["parameters"]["counts"]["total"], parameters);
    EXPECT_EQ(inspect["tokenizer"]["vocab_size"], e->tokenizer_vocab) << inspect["tokenizer"].dump();
    EXPECT_TRUE(inspect["warnings"].empty()) << inspect["warnings"].dump();

    const auto eval = embedlab::test::json_of(
        cli({"eval", out.string(), "--text", short_text(tmp), "--ctx", "64", "--json", "--quiet"}));
    ASSERT_FALSE(eval.is_null());
    const double ppl = eval["ppl"].get<double>();
    EXPECT_TRUE(std::isfinite(ppl)) << ppl;
    EXPECT_GT(ppl, 1.0);
    EXPECT_GE(eval["tokens"].get<int64_t>(), 40);
    EXPECT_FALSE(has_temporaries(tmp.path()));
}

std::vector<std::string> model_names()
{
    std::vector<std::string> names;
    for (const auto& e : expectations())
        names.push_back(e.like);
    return names;
}

INSTANTIATE_TEST_SUITE_P(Synth, SynthEveryModel, ::testing::ValuesIn(model_names()),
                         embedlab::test::ParamName());

TEST(Synth, EngineListsExactlyTheTestedModels)
{
    EXPECT_EQ(embedlab::synth_model_names(), model_names());
}

TEST(Synth, SameSeedSameBytesOtherSeedOtherBytes)
{
    TempDir tmp;
    auto synth = [&](const std::string& dir, const std::string& seed, const std::string& layers) {
        const CliRun r = cli({"synth", "--like", "smollm2-135m", "--out", (tmp / dir).string(), "--seed",
                              seed, "--layers", layers, "--quiet"});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return tmp / dir / "model.safetensors";
    };
    const auto a = synth("a", "7", "1"), b = synth("b", "7", "1"), c = synth("c", "8", "1");
    const auto a2 = synth("a2", "7", "2");
    EXPECT_TRUE(read_text(a) == read_text(b)) << "same seed, different bytes";
    EXPECT_FALSE(read_text(a) == read_text(c)) << "different seeds, same bytes";
    EXPECT_EQ(read_text(tmp / "a" / "tokenizer.json"), read_text(tmp / "c" / "tokenizer.json"));
    // Values depend on the tensor name, not the layer count.
    for (const char* name : {"model.embed_tokens.weight", "model.layers.0.mlp.down_proj.weight"})
        EXPECT_TRUE(tensor_bytes(a, name) == tensor_bytes(a2, name)) << name;
    EXPECT_FALSE(tensor_bytes(a, "model.embed_tokens.weight") ==
                 tensor_bytes(c, "model.embed_tokens.weight"));
}

TEST(Synth, BadInputIsExitTwoAndLeavesNoDirectory)
{
    TempDir tmp;
    const auto out = (tmp / "m").string();

    CliRun r = cli_here({"synth", "--like", "gpt3", "--out", out});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("unknown model 'gpt3'"), std::string::npos) << r.err;
    for (const auto& name : model_names())
        EXPECT_NE(r.err.find(name), std::string::npos) << r.err;

    r = cli_here({"synth", "--like", "gpt2-small", "--out", out, "--layers", "0"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--layers"), std::string::npos) << r.err;

    r = cli_here({"synth", "--like", "gpt2-small", "--out", out, "--dtype", "f8"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("f32, f16 or bf16"), std::string::npos) << r.err;

    r = cli_here({"synth", "--out", out});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--like"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));

    // An existing directory stays as it was, with or without --force when EmbedLab did not write it.
    fs::create_directory(out);
    std::ofstream(fs::path(out) / "notes.txt") << "mine";
    r = cli_here({"synth", "--like", "smollm2-135m", "--out", out, "--layers", "1"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("already exists (use --force"), std::string::npos) << r.err;
    r = cli_here({"synth", "--like", "smollm2-135m", "--out", out, "--layers", "1", "--force"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("not written by EmbedLab"), std::string::npos) << r.err;
    EXPECT_EQ(read_text(fs::path(out) / "notes.txt"), "mine");
    EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 1);
    EXPECT_FALSE(has_temporaries(tmp.path()));
}

TEST(Synth, ForceReplacesAModelDirectory)
{
    TempDir tmp;
    const auto out = (tmp / "m").string();
    ASSERT_EQ(cli({"synth", "--like", "smollm2-135m", "--out", out, "--layers", "1", "--quiet"}).exit_code,
              0);
    const auto before = read_text(fs::path(out) / "model.safetensors");
    const CliRun r = cli({"synth", "--like", "smollm2-135m", "--out", out, "--layers", "1", "--seed", "2",
                          "--force", "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(read_text(fs::path(out) / "model.safetensors") == before);
    EXPECT_FALSE(has_temporaries(tmp.path()));
}

TEST(Synth, CancelledLeavesNothing)
{
    TempDir tmp;
    embedlab::SynthOptions o;
    o.like = "smollm2-135m";
    o.out = tmp / "m";
    o.layers = 1;
    int calls = 0;
    EXPECT_THROW(embedlab::synth_model(o, [&](int64_t, int64_t) { return ++calls < 3; }),
                 embedlab::Cancelled);
    EXPECT_EQ(calls, 3);
    EXPECT_FALSE(fs::exists(o.out));
    EXPECT_TRUE(fs::is_empty(tmp.path()));
}

} // namespace
