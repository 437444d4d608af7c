// GGUF export checked by real llama.cpp (../shared/tools/llama.cpp): the
// exported file's perplexity under llamacpp-ppl equals EmbedLab's perplexity
// of the same (compressed) model, for every zoo architecture, compressed
// tables, FLAT-LLM's narrowed heads and gpt2; llama-perplexity runs on it.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_in_process.hpp"
#include "cli_support.hpp"
#include "embedlab/error.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/model.hpp"
#include "embedlab/model_export.hpp"
#include "embedlab/model_files.hpp"
#include "io/gguf_output.hpp"
#include "io/gguf_parser.hpp"
#include "io/gguf_quants.hpp"
#include "io/mapped_file.hpp"
#include "llama_cpp_tools.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::shared_dir;

#define REQUIRE_LLAMA_CPP()                                                                                  \
    do {                                                                                                     \
        EMBEDLAB_REQUIRE_SHARED();                                                                           \
        if (!test::have_llama_cpp())                                                                         \
            GTEST_SKIP() << "needs llama.cpp in " << test::llama_cpp_dir();                                  \
    } while (0)

// The first n ids of a reference token file, and the same as a text file for llama.cpp.
struct IdsFile {
    test::TempDir dir;
    std::vector<int32_t> ids;
    fs::path path;
    IdsFile(const std::string& reference, size_t n)
    {
        ids = read_ids_file(shared_dir() / "reference" / reference);
        ids.resize(std::min(ids.size(), n));
        path = dir.path() / "ids.txt";
        std::ofstream out(path);
        for (int32_t id : ids)
            out << id << ' ';
    }
};

const IdsFile& llama_ids()
{
    static const IdsFile f("tokens-tinyllama-tinystories-heldout.json", 4097);
    return f;
}

std::string run_command(const std::string& cmd, int* exit_code)
{
    std::string out;
    FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!p)
        return out;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, p))
        out.append(buf, n);
    const int status = ::pclose(p);
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}

// llamacpp-ppl's perplexity of `gguf` on the ids file (the project protocol).
double llamacpp_ppl(const fs::path& gguf, const fs::path& ids, int64_t ctx)
{
    int code = -1;
    const auto out = run_command(test::llama_cpp_command("llamacpp-ppl") + " " + test::quote(gguf.string()) +
                                     " " + test::quote(ids.string()) + " " + std::to_string(ctx) + " " +
                                     test::llama_cpp_threads(),
                                 &code);
    EXPECT_EQ(code, 0) << out;
    const auto brace = out.rfind('{');
    if (code != 0 || brace == std::string::npos)
        return -1;
    return json::parse(out.substr(brace)).at("ppl").get<double>();
}

double embedlab_ppl(const LanguageModel& m, const std::vector<int32_t>& ids, int64_t ctx)
{
    return evaluate_perplexity(m, ids, {.ctx = ctx}).ppl;
}

// ------------------------------------------------------------ the GGUF writer

TEST(GgufOutput, HalfConversionRoundsToNearestEven)
{
    EXPECT_EQ(io::float_to_half(1.0f), 0x3C00);
    EXPECT_EQ(io::float_to_half(-2.0f), 0xC000);
    EXPECT_EQ(io::float_to_half(65504.0f), 0x7BFF);
    EXPECT_EQ(io::float_to_half(65520.0f), 0x7C00);                         // rounds up to infinity
    EXPECT_EQ(io::float_to_half(std::ldexp(1.0f, -24)), 0x0001);            // smallest subnormal
    EXPECT_EQ(io::float_to_half(std::ldexp(1.0f, -25)), 0x0000);            // a tie: to even (zero)
    EXPECT_EQ(io::float_to_half(std::ldexp(3.0f, -25)), 0x0002);            // a tie: to even (two)
    EXPECT_EQ(io::float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);     // tie below: even
    EXPECT_EQ(io::float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02); // tie above: even
}

// What the writer writes, EmbedLab's GGUF parser reads back: keys in order,
// shapes reversed into ggml order, aligned offsets, F32 exact, Q8_0 as ggml.
TEST(GgufOutput, RoundTripsThroughTheParser)
{
    test::TempDir tmp;
    io::GgufMetadata meta;
    meta.set_string("general.architecture", "llama");
    meta.set_uint32("llama.block_count", 3);
    meta.set_float32("llama.rope.freq_base", 10000.0f);
    meta.set_bool("tokenizer.ggml.add_space_prefix", false);
    meta.set_string_array("tokenizer.ggml.tokens", {"a", "bb", ""});
    meta.set_int32_array("tokenizer.ggml.token_type", {1, 3, 6});
    std::vector<float> matrix(2 * 64), vec{1.5f, -2.0f, 0.25f};
    for (size_t i = 0; i < matrix.size(); ++i)
        matrix[i] = static_cast<float>(i % 64) - 31.5f;
    const std::vector<io::GgufTensorSource> tensors{
        {"m.q8", {2, 64}, matrix.data(), io::GgufTensorType::Q8_0},
        {"v.f32", {3}, vec.data(), io::GgufTensorType::F32},
        {"m.f16", {2, 64}, matrix.data(), io::GgufTensorType::F16}};
    const auto path = tmp.path() / "t.gguf";
    const uint64_t bytes = io::write_gguf(path, meta, tensors, false);
    EXPECT_EQ(bytes, fs::file_size(path));
    const auto file = io::MappedFile::open(path);
    const auto g = io::parse_gguf(*file);
    EXPECT_EQ(g.version, 3u);
    EXPECT_EQ(g.metadata.size(), 6u);
    EXPECT_EQ(g.find("general.architecture")->s, "llama");
    EXPECT_EQ(g.find("llama.block_count")->u, 3u);
    EXPECT_EQ(g.find("tokenizer.ggml.tokens")->strings, (std::vector<std::string>{"a", "bb", ""}));
    EXPECT_EQ(g.find("tokenizer.ggml.token_type")->element(2).i, 6);
    ASSERT_EQ(g.tensors.size(), 3u);
    EXPECT_EQ(g.tensors[0].ne, (std::vector<int64_t>{64, 2}));
    EXPECT_EQ(g.tensors[0].type, 8u);
    for (const auto& t : g.tensors)
        EXPECT_EQ(t.offset % 32, 0u) << t.name;
    const uint8_t* data = file->data() + g.data_start;
    float back[3];
    std::memcpy(back, data + g.tensors[1].offset, sizeof back);
    EXPECT_EQ(std::vector<float>(back, back + 3), vec);
    // Q8_0 block 0: amax 31.5, d = 31.5 / 127 as half, q = round(x / d).
    const uint8_t* block = data + g.tensors[0].offset;
    uint16_t d;
    std::memcpy(&d, block, 2);
    EXPECT_EQ(d, io::float_to_half(31.5f / 127.0f));
    EXPECT_EQ(static_cast<int8_t>(block[2]), -127);
    EXPECT_EQ(static_cast<int8_t>(block[2 + 31]), static_cast<int8_t>(std::roundf(-0.5f * 127.0f / 31.5f)));
    uint16_t h;
    std::memcpy(&h, data + g.tensors[2].offset + 2 * 5, 2);
    EXPECT_EQ(h, io::float_to_half(matrix[5]));
}

TEST(GgufOutput, BadTensorsAreRefusedAndLeaveNothing)
{
    test::TempDir tmp;
    const auto path = tmp.path() / "bad.gguf";
    std::vector<float> row(33, 1.0f);
    auto refused = [&](const std::vector<io::GgufTensorSource>& tensors, const std::string& expected) {
        try {
            io::write_gguf(path, {}, tensors, false);
            ADD_FAILURE() << "no error; expected " << expected;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
        }
        EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()),
                  fs::exists(path) ? 1 : 0)
            << "left a file behind";
    };
    refused({{"w", {1, 33}, row.data(), io::GgufTensorType::Q8_0}}, "tensor 'w' has rows of 33 values");
    refused(
        {{"w", {33}, row.data(), io::GgufTensorType::F32}, {"w", {33}, row.data(), io::GgufTensorType::F32}},
        "tensor 'w' appears twice");
    row[7] = std::nanf("");
    refused({{"w", {33}, row.data(), io::GgufTensorType::F32}}, "tensor 'w' holds NaN at element 7");
    row[7] = 1e6f;
    refused({{"w", {33}, row.data(), io::GgufTensorType::F16}}, "beyond F16's range");
    std::ofstream(path) << "not a model";
    refused({}, "already exists");
    try {
        io::write_gguf(path, {}, {}, /*overwrite=*/true);
        ADD_FAILURE() << "replaced a file that is not GGUF";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("is not a GGUF file"), std::string::npos) << e.what();
    }
    EXPECT_EQ(test::read_text(path), "not a model");
}

// Issue 21: tensors given as `load` are produced when written and released before the
// next is loaded (the writer holds one at a time), and give the same file.
TEST(GgufOutput, LoadedTensorsAreWrittenOneAtATime)
{
    test::TempDir tmp;
    std::vector<std::vector<float>> values;
    for (int k = 0; k < 3; ++k) {
        values.emplace_back(2 * 64 + 32 * k);
        for (size_t i = 0; i < values.back().size(); ++i)
            values.back()[i] = static_cast<float>((i * 7 + k) % 61) - 30.0f;
    }
    const std::vector<io::GgufTensorType> types{io::GgufTensorType::F32, io::GgufTensorType::F16,
                                                io::GgufTensorType::Q8_0};
    std::vector<io::GgufTensorSource> given, loaded;
    int alive = 0, most = 0, loads = 0;
    for (int k = 0; k < 3; ++k) {
        const std::vector<int64_t> shape{static_cast<int64_t>(values[k].size()) / 32, 32};
        const std::string name = "t" + std::to_string(k);
        given.push_back({name, shape, values[k].data(), types[k]});
        loaded.push_back(
            {name, shape, nullptr, types[k], [&, k] {
                 ++loads;
                 most = std::max(most, ++alive);
                 auto copy = std::make_shared<std::vector<float>>(values[k]);
                 const float* data = copy->data();
                 return io::GgufTensorData{
                     data, std::shared_ptr<const void>(copy.get(), [&alive, copy](const void*) mutable {
                         --alive;
                         copy.reset();
                     })};
             }});
    }
    // The same tensors made 3 rows (of 32 values) at a time.
    int blocks = 0;
    std::vector<io::GgufTensorSource> by_rows;
    for (const auto& t : given) {
        auto source = t;
        source.data = nullptr;
        source.block_rows = 3;
        source.load_rows = [&, data = t.data](int64_t begin, int64_t count) {
            ++blocks;
            most = std::max(most, ++alive);
            auto copy = std::make_shared<std::vector<float>>(data + begin * 32, data + (begin + count) * 32);
            return io::GgufTensorData{
                copy->data(), std::shared_ptr<const void>(copy.get(), [&alive, copy](const void*) mutable {
                    --alive;
                    copy.reset();
                })};
        };
        by_rows.push_back(std::move(source));
    }
    io::write_gguf(tmp.path() / "given.gguf", {}, given, false);
    io::write_gguf(tmp.path() / "loaded.gguf", {}, loaded, false);
    io::write_gguf(tmp.path() / "rows.gguf", {}, by_rows, false);
    EXPECT_EQ(loads, 3);
    EXPECT_EQ(blocks, 2 + 2 + 2); // 4, 5 and 6 rows, 3 at a time
    EXPECT_EQ(most, 1);
    EXPECT_EQ(alive, 0);
    EXPECT_EQ(test::read_text(tmp.path() / "loaded.gguf"), test::read_text(tmp.path() / "given.gguf"));
    EXPECT_EQ(test::read_text(tmp.path() / "rows.gguf"), test::read_text(tmp.path() / "given.gguf"));
    fs::remove(tmp.path() / "rows.gguf");
    // A loaded tensor is checked as it comes: a NaN refuses the file and leaves nothing.
    values[2][40] = std::nanf("");
    const auto bad = tmp.path() / "bad.gguf";
    try {
        io::write_gguf(bad, {}, loaded, false);
        ADD_FAILURE() << "a NaN was written";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("tensor 't2' holds NaN at element 40"), std::string::npos)
            << e.what();
    }
    EXPECT_FALSE(fs::exists(bad));
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 2);
}

// Exports `lm` as F32 GGUF to `out`: llama.cpp's perplexity on it agrees with EmbedLab's
// to 1e-3, and the file reads back into EmbedLab as the same model (1e-6). Returns
// EmbedLab's perplexity and the model read back.
std::pair<double, LoadedModel> expect_llama_cpp_agrees(const LoadedModel& lm, const fs::path& out,
                                                       const std::string& name)
{
    const auto report = export_gguf(lm, out, {.type = GgufExportType::F32});
    EXPECT_GT(report.tensors, 0);
    EXPECT_EQ(report.most_tensors_held, 1) << name << ": converted tensors are written one at a time";
    const double ours = embedlab_ppl(*lm.model, llama_ids().ids, 64);
    const double theirs = llamacpp_ppl(out, llama_ids().path, 64);
    std::printf("%-20s EmbedLab %.6g  llama.cpp on the export %.6g  relative %.2e\n", name.c_str(), ours,
                theirs, theirs / ours - 1);
    EXPECT_NEAR(theirs / ours, 1.0, 1e-3) << name;
    // phi3 and gptneox read back through their fused tensors.
    auto back = load_model(out);
    EXPECT_NEAR(embedlab_ppl(*back.model, llama_ids().ids, 64) / ours, 1.0, 1e-6) << name;
    return {ours, std::move(back)};
}

class ExportZoo : public ::testing::TestWithParam<std::string> {};

// Every architecture, exported in F32, runs in llama.cpp with EmbedLab's perplexity.
TEST_P(ExportZoo, LlamaCppAgreesWithEmbedLab)
{
    REQUIRE_LLAMA_CPP();
    const auto lm = load_model(shared_dir() / "models" / "zoo" / GetParam());
    test::TempDir tmp;
    expect_llama_cpp_agrees(lm, tmp.path() / "model.gguf", GetParam());
}

INSTANTIATE_TEST_SUITE_P(Zoo, ExportZoo,
                         ::testing::Values("smollm2-tied", "llama32-ropescaled", "qwen2", "qwen3", "gemma2",
                                           "phi3", "gptneox"),
                         test::ParamName());

// Gemma (v1) and Gemma 3's text model, built from the zoo's gemma2 weights (the
// zoo ships neither): `gemma` drops the sandwich norms; `gemma3_text` adds
// per-head q/k norms and a second RoPE base, with layer 0 sliding (window 16)
// and layer 1 global; `gemma3_text-linear` adds a linear rope_scaling.
fs::path make_gemma_variant(const fs::path& dir, const std::string& variant, double local_theta = 10000.0)
{
    const fs::path src = shared_dir() / "models" / "zoo" / "gemma2";
    fs::create_directories(dir);
    for (const char* f : {"tokenizer.model", "tokenizer_config.json"})
        fs::copy_file(src / f, dir / f);
    auto config = json::parse(test::read_text(src / "config.json"));
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    const bool gemma3 = variant != "gemma";
    torch::manual_seed(7);
    for (const auto& [name, t] : load_safetensors(src / "model.safetensors")) {
        std::string n = name;
        if (!gemma3) { // Gemma: input_layernorm before attention, post_attention_layernorm before the MLP
            if (n.find("post_attention_layernorm") != std::string::npos ||
                n.find("post_feedforward_layernorm") != std::string::npos)
                continue;
            if (const auto at = n.find("pre_feedforward_layernorm"); at != std::string::npos)
                n.replace(at, std::strlen("pre_feedforward_layernorm"), "post_attention_layernorm");
        }
        tensors.emplace_back(n, t);
        if (gemma3 && n.find("self_attn.k_proj.weight") != std::string::npos) {
            const auto layer = n.substr(0, n.find("self_attn."));
            for (const char* norm : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"})
                tensors.emplace_back(layer + norm, (torch::randn({16}) * 0.3).to(t.dtype()));
        }
    }
    write_safetensors(dir / "model.safetensors", tensors);
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping", "sliding_window",
                            "query_pre_attn_scalar", "cache_implementation"})
        config.erase(key);
    if (gemma3) {
        config["model_type"] = "gemma3_text";
        config["architectures"] = {"Gemma3ForCausalLM"};
        config["query_pre_attn_scalar"] = 16;
        config["final_logit_softcapping"] = 10.0;
        config["sliding_window"] = 16;
        config["sliding_window_pattern"] = 2;
        config["rope_theta"] = 1000000.0;
        config["rope_local_base_freq"] = local_theta;
        if (variant == "gemma3_text-linear")
            config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
    } else {
        config["model_type"] = "gemma";
        config["architectures"] = {"GemmaForCausalLM"};
    }
    std::ofstream(dir / "config.json") << config.dump(2);
    return dir;
}

class ExportGemma : public ::testing::TestWithParam<std::string> {};

// Gemma and Gemma 3: llama.cpp runs the export with EmbedLab's perplexity, the
// export reads back as the same model, and the switches bite (another local
// RoPE base changes the perplexity by more than the 1e-3 tolerance).
TEST_P(ExportGemma, LlamaCppAgreesWithEmbedLab)
{
    REQUIRE_LLAMA_CPP();
    test::TempDir tmp;
    const auto lm = load_model(make_gemma_variant(tmp.path() / "hf", GetParam()));
    const auto [ours, back] = expect_llama_cpp_agrees(lm, tmp.path() / "model.gguf", GetParam());
    EXPECT_EQ(back.model->config().sliding_layers, lm.model->config().sliding_layers);
    if (GetParam() == "gemma3_text") {
        const auto other = load_model(make_gemma_variant(tmp.path() / "hf-base", GetParam(), 1000000.0));
        EXPECT_GT(std::abs(embedlab_ppl(*other.model, llama_ids().ids, 64) / ours - 1.0), 1e-3);
    }
}

INSTANTIATE_TEST_SUITE_P(Gemma, ExportGemma, ::testing::Values("gemma", "gemma3_text", "gemma3_text-linear"),
                         test::ParamName());

// tinyllama compressed as `request` asks, exported to `dir` and loaded back.
LoadedModel exported_tinyllama(CompressionRequest request, const fs::path& dir)
{
    request.model = (shared_dir() / "models" / "tinyllama").string();
    export_run(run_compression(request), dir);
    return load_model(dir);
}

// A compressed model reaches llama.cpp as its dense reconstruction: F32 to 1e-3,
// Q8_0 to 1%; then through the CLI, and llama-perplexity runs on the file.
TEST(ExportGguf, CompressedModelKeepsItsPerplexity)
{
    REQUIRE_LLAMA_CPP();
    test::TempDir tmp;
    const auto lm = exported_tinyllama({.method = "pca", .rank = 32}, tmp.path() / "pca");
    const IdsFile ids("tokens-tinyllama-tinystories-heldout.json", 2049);
    const double ours = embedlab_ppl(*lm.model, ids.ids, 128);
    for (const auto& [type, tolerance] : {std::pair{"f32", 1e-3}, {"q8_0", 1e-2}}) {
        const auto out = tmp.path() / (std::string(type) + ".gguf");
        const auto res =
            test::cli({"export", (tmp.path() / "pca").string(), "--type", type, "--out", out.string()});
        ASSERT_EQ(res.exit_code, 0) << res.err;
        EXPECT_NE(res.out.find("reconstructed as a dense table"), std::string::npos) << res.out;
        const double theirs = llamacpp_ppl(out, ids.path, 128);
        std::printf("pca-32 %-5s EmbedLab %.6g  llama.cpp %.6g  relative %.2e\n", type, ours, theirs,
                    theirs / ours - 1);
        EXPECT_NEAR(theirs / ours, 1.0, tolerance) << type;
    }
    std::ofstream(tmp.path() / "text.txt")
        << test::read_text(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt")
               .substr(0, 6000);
    int code = -1;
    const auto out = run_command(test::llama_cpp_command("llama-perplexity") + " -m " +
                                     test::quote((tmp.path() / "q8_0.gguf").string()) + " -f " +
                                     test::quote((tmp.path() / "text.txt").string()) + " -c 128 -t " +
                                     test::llama_cpp_threads(),
                                 &code);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("Final estimate"), std::string::npos) << out;
}

// A tensor's stored type and bytes in a GGUF file.
std::pair<uint32_t, std::string> gguf_tensor(const fs::path& path, const std::string& name)
{
    const auto file = io::MappedFile::open(path);
    const auto g = io::parse_gguf(*file);
    for (const auto& t : g.tensors)
        if (t.name == name) {
            int64_t n = 1;
            for (int64_t e : t.ne)
                n *= e;
            const auto* at = reinterpret_cast<const char*>(file->data() + g.data_start + t.offset);
            return {t.type, std::string(at, io::ggml_row_bytes(t.type, n))};
        }
    ADD_FAILURE() << path << " has no " << name;
    return {};
}

// --embedding-type (issue 38): the token table at a ggml type, as llama-quantize's
// --token-embedding-type writes it, is the quant baseline: llama.cpp's perplexity of
// the export is EmbedLab's of compress --method quant at that type; a quantised table
// keeps its type and its blocks; an untied head takes --output-type, a tied one refuses
// it; a type whose blocks do not divide d is refused, naming those that do.
TEST(ExportGguf, EmbeddingTypeIsTheQuantBaselineInLlamaCpp)
{
    REQUIRE_LLAMA_CPP();
    test::TempDir tmp;
    const auto quant = exported_tinyllama({.method = "quant", .type = "q4_0"}, tmp.path() / "q4_0");
    const auto original = load_model(shared_dir() / "models" / "tinyllama");
    const auto asked =
        export_gguf(original, tmp.path() / "asked.gguf",
                    {.type = GgufExportType::F32, .embedding_type = "q4_0", .output_type = "q8_0"});
    EXPECT_EQ(asked.embedding_type, "q4_0");
    EXPECT_EQ(asked.output_type, "q8_0");
    EXPECT_EQ(gguf_tensor(tmp.path() / "asked.gguf", "output.weight").first, 8u); // Q8_0
    const auto own = export_gguf(quant, tmp.path() / "own.gguf", {.type = GgufExportType::F32});
    EXPECT_EQ(own.embedding_type, "q4_0");
    EXPECT_EQ(own.output_type, "f32");
    const auto [own_type, own_bytes] = gguf_tensor(tmp.path() / "own.gguf", "token_embd.weight");
    const auto [asked_type, asked_bytes] = gguf_tensor(tmp.path() / "asked.gguf", "token_embd.weight");
    EXPECT_EQ(own_type, 2u); // Q4_0
    EXPECT_EQ(asked_type, 2u);
    EXPECT_TRUE(own_bytes == asked_bytes) << "the quantised table's blocks changed on the way out";
    EXPECT_EQ(own_bytes.size(), 32000u * 128 / 32 * 18);
    const IdsFile ids("tokens-tinyllama-tinystories-heldout.json", 2049);
    const double ours = embedlab_ppl(*quant.model, ids.ids, 128);
    const double theirs = llamacpp_ppl(tmp.path() / "own.gguf", ids.path, 128);
    std::printf("quant q4_0 EmbedLab %.6g  llama.cpp %.6g  relative %.2e\n", ours, theirs, theirs / ours - 1);
    EXPECT_NEAR(theirs / ours, 1.0, 1e-3);

    auto refused = [&](const LoadedModel& lm, GgufExportOptions o, const std::string& needle) {
        try {
            export_gguf(lm, tmp.path() / "refused.gguf", o);
            ADD_FAILURE() << "exported; wanted: " << needle;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
        EXPECT_FALSE(fs::exists(tmp.path() / "refused.gguf"));
    };
    refused(original, {.embedding_type = "q4_k"}, "the types that fit d = 128: f32, f16, bf16, q8_0");
    refused(original, {.embedding_type = "q7"}, "--embedding-type 'q7'");
    refused(load_model(shared_dir() / "models" / "tinygpt2"), {.output_type = "q8_0"}, "tied");
}

// FLAT-LLM's narrowed value heads are zero-padded, its narrowed MLPs become
// per-layer widths: the same function in llama.cpp.
TEST(ExportGguf, FlatModelRunsInLlamaCpp)
{
    REQUIRE_LLAMA_CPP();
    test::TempDir tmp;
    const auto calib = fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt";
    const auto lm = exported_tinyllama({.method = "flat",
                                        .remaining = 0.5,
                                        .compress_mlp = true,
                                        .calib_text = calib.string(),
                                        .samples = 16,
                                        .seqlen = 64},
                                       tmp.path() / "flat");
    ASSERT_FALSE(lm.model->config().value_head_dims.empty());
    const auto report = export_gguf(lm, tmp.path() / "flat.gguf", {.type = GgufExportType::F32});
    EXPECT_EQ(report.most_tensors_held, 1); // padded copies are made one at a time
    ASSERT_FALSE(report.notes.empty());
    EXPECT_NE(report.notes[0].find("zero-padded"), std::string::npos) << report.notes[0];
    const IdsFile ids("tokens-tinyllama-tinystories-heldout.json", 2049);
    const double ours = embedlab_ppl(*lm.model, ids.ids, 128);
    const double theirs = llamacpp_ppl(tmp.path() / "flat.gguf", ids.path, 128);
    EXPECT_NEAR(theirs / ours, 1.0, 1e-3);
}

TEST(ExportGguf, Gpt2RunsInLlamaCpp)
{
    REQUIRE_LLAMA_CPP();
    test::TempDir tmp;
    const auto lm = load_model(shared_dir() / "models" / "tinygpt2");
    EXPECT_EQ(export_gguf(lm, tmp.path() / "gpt2.gguf", {.type = GgufExportType::F32}).most_tensors_held, 1);
    const IdsFile ids("tokens-tinygpt2-tinystories-heldout.json", 2049);
    const double ours = embedlab_ppl(*lm.model, ids.ids, 128);
    const double theirs = llamacpp_ppl(tmp.path() / "gpt2.gguf", ids.path, 128);
    std::printf("tinygpt2 EmbedLab %.6g  llama.cpp %.6g  relative %.2e\n", ours, theirs, theirs / ours - 1);
    EXPECT_NEAR(theirs / ours, 1.0, 1e-3);
}

// A gpt2 GGUF reads back (issue 38): EmbedLab's export with the table at Q8_0 (the tied
// head too, as llama.cpp reads it) gives EmbedLab llama.cpp's perplexity, and the quant
// baseline's at q8_0, whose table it holds.
TEST(ExportGguf, Gpt2ReadsBackWithItsQuantisedTable)
{
    REQUIRE_LLAMA_CPP();
    test::TempDir tmp;
    const auto model = shared_dir() / "models" / "tinygpt2";
    const auto report = export_gguf(load_model(model), tmp.path() / "q8.gguf",
                                    {.type = GgufExportType::F32, .embedding_type = "q8_0"});
    EXPECT_EQ(report.embedding_type, "q8_0");
    EXPECT_EQ(report.output_type, ""); // tied: no output.weight
    // Its BPE vocabulary is gpt2's, which EmbedLab reads from the Hugging Face directory.
    const auto back = load_model(tmp.path() / "q8.gguf", {.tokenizer = model});
    ASSERT_TRUE(back.tokenizer);
    EXPECT_EQ(back.tokenizer->encode("Once upon a time"),
              load_model(model).tokenizer->encode("Once upon a time"));
    EXPECT_EQ(back.model->config().arch, Architecture::GPT2);
    EXPECT_TRUE(back.model->config().tied_embeddings);
    const IdsFile ids("tokens-tinygpt2-tinystories-heldout.json", 2049);
    const double read_back = embedlab_ppl(*back.model, ids.ids, 128);
    const double theirs = llamacpp_ppl(tmp.path() / "q8.gguf", ids.path, 128);
    std::printf("tinygpt2 q8_0 table: EmbedLab %.8g  llama.cpp %.8g  relative %.2e\n", read_back, theirs,
                theirs / read_back - 1);
    EXPECT_NEAR(theirs / read_back, 1.0, 1e-3);
    export_run(run_compression({.model = model.string(), .method = "quant", .type = "q8_0"}),
               tmp.path() / "quant");
    const auto quant = load_model(tmp.path() / "quant");
    EXPECT_NEAR(read_back / embedlab_ppl(*quant.model, ids.ids, 128), 1.0, 1e-6);
}

TEST(ExportCli, BadTypeAndTakenOutputAreRefused)
{
    EMBEDLAB_REQUIRE_SHARED();
    test::TempDir tmp;
    const auto model = (shared_dir() / "models" / "zoo" / "qwen3").string();
    auto r = test::cli_here({"export", model, "--type", "q4_k", "--out", (tmp.path() / "x.gguf").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("GGUF exports are f32, f16 or q8_0"), std::string::npos) << r.err;
    std::ofstream(tmp.path() / "taken.gguf") << "x";
    r = test::cli_here({"export", model, "--out", (tmp.path() / "taken.gguf").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
    EXPECT_EQ(test::read_text(tmp.path() / "taken.gguf"), "x");
    r = test::cli_here({"export", model, "--format", "safetensors", "--out", (tmp.path() / "y").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("use gguf, hf or onnx"), std::string::npos) << r.err;
}

// --format hf of a compressed directory: a plain directory transformers would
// load, which EmbedLab reads back to the compressed model's numbers.
TEST(ExportCli, HfFormatWritesTheDenseModel)
{
    EMBEDLAB_REQUIRE_SHARED();
    test::TempDir tmp;
    CompressionRequest r;
    r.model = (shared_dir() / "models" / "zoo" / "gptneox").string();
    r.method = "svd";
    r.rank = 16;
    const auto run = run_compression(r);
    export_run(run, tmp.path() / "svd");
    const auto res = test::cli({"export", (tmp.path() / "svd").string(), "--format", "hf", "--out",
                                (tmp.path() / "dense").string()});
    ASSERT_EQ(res.exit_code, 0) << res.err;
    EXPECT_FALSE(fs::exists(tmp.path() / "dense" / "embedlab.json"));
    const auto dense = load_model(tmp.path() / "dense");
    const auto compressed = load_model(tmp.path() / "svd");
    const auto& ids = llama_ids().ids;
    EXPECT_NEAR(embedlab_ppl(*dense.model, ids, 64) / embedlab_ppl(*compressed.model, ids, 64), 1.0, 1e-5);
}

} // namespace
} // namespace embedlab
