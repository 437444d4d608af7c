// ONNX export (onnx_export.hpp): the exported decoder's logits and perplexity in ONNX
// Runtime equal EmbedLab's on every architecture and every table method; the KV-cache
// interface (--with-past) decodes the same greedy tokens as generate(); the compressed
// file is smaller by the table's saving; outputs, --force and refusals.
#include <fstream>
#include <iterator>
#include <map>

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include "cli_support.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/generate.hpp"
#include "embedlab/method_registry.hpp"
#include "embedlab/model.hpp"
#include "embedlab/onnx_export.hpp"
#include "embedlab/table_method.hpp"
#include "io/onnx_graph.hpp"
#include "onnx_runtime.hpp"
#include "shared_models.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;
using test::shared_dir;

#define EMBEDLAB_REQUIRE_ONNXRUNTIME()                                                                       \
    do {                                                                                                     \
        if (!test::have_onnxruntime())                                                                       \
            GTEST_SKIP() << test::onnxruntime_skip_reason();                                                 \
    } while (0)

torch::Tensor as_ids(const std::vector<int32_t>& ids)
{
    return torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong).unsqueeze(0);
}

// ONNX Runtime's logits [T, V] for one sequence, positions 0..T-1, nothing masked.
torch::Tensor ort_logits(const fs::path& onnx, const torch::Tensor& ids)
{
    const int64_t T = ids.size(1);
    const auto run = test::run_onnx(onnx,
                                    {{"input_ids", ids},
                                     {"attention_mask", torch::ones({1, T}, torch::kLong)},
                                     {"position_ids", torch::arange(T, torch::kLong).unsqueeze(0)}},
                                    {"logits"});
    return run.outputs.at("logits")[0];
}

// Perplexity of ids[1..] under logits [T, V] (row t predicts id t + 1).
double perplexity(const torch::Tensor& logits, const torch::Tensor& ids)
{
    const int64_t T = ids.size(1);
    const auto lp = torch::log_softmax(logits.narrow(0, 0, T - 1).to(torch::kFloat64), -1);
    return std::exp(-lp.gather(1, ids[0].narrow(0, 1, T - 1).unsqueeze(1)).mean().item<double>());
}

// The exported graph in ONNX Runtime gives EmbedLab's logits (within 1e-4 of the largest)
// and its perplexity within 1e-4 relative.
void expect_runtime_matches(const LanguageModel& m, const fs::path& onnx, const torch::Tensor& ids,
                            const std::string& what)
{
    const auto ours = m.logits(ids)[0];
    const auto theirs = ort_logits(onnx, ids);
    ASSERT_EQ(theirs.sizes(), ours.sizes()) << what;
    const double scale = std::max(1.0, ours.abs().max().item<double>());
    const double diff = (theirs - ours).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4 * scale) << what << ": max |logit diff| " << diff << " of " << scale;
    const double p = perplexity(ours, ids), q = perplexity(theirs, ids);
    EXPECT_LT(std::abs(q - p) / p, 1e-4)
        << what << ": perplexity " << p << " (EmbedLab) vs " << q << " (ONNX Runtime)";
    std::printf("%s: ppl %.6f EmbedLab, %.6f ONNX Runtime (rel %.1e), max |dlogit| %.1e\n", what.c_str(), p,
                q, std::abs(q - p) / p, diff);
}

ModelExportReport export_to(const LanguageModel& m, const fs::path& out, OnnxExportOptions o = {})
{
    return export_onnx(m, out, o, {}, {});
}

std::unique_ptr<LanguageModel> tiny_model(const ModelConfig& c)
{
    return std::make_unique<LanguageModel>(c, test::random_weights(c), "tiny");
}

std::vector<std::pair<std::string, ModelConfig>> tiny_configs()
{
    auto llama = test::tiny_config(Architecture::Llama);
    auto sliding = llama; // a window that bites, soft-capping, partial rotary
    sliding.sliding_window = 4;
    sliding.sliding_layers = {true, false};
    sliding.attn_softcap = 2.0;
    sliding.final_softcap = 3.0;
    sliding.rotary_dim = 2;
    auto gemma3 = llama; // Gemma 3: (1 + w) norms, sandwich norms, q/k norms, a local RoPE base
    gemma3.norm = NormKind::RMSOnePlus;
    gemma3.sandwich_norms = true;
    gemma3.qk_norm = true;
    gemma3.embedding_scale = 4.0;
    gemma3.query_scale = 0.3;
    gemma3.activation = "gelu_pytorch_tanh";
    gemma3.sliding_window = 5;
    gemma3.sliding_layers = {true, false};
    gemma3.rope_local_theta = 100.0;
    gemma3.rope_freq_divisors = {1.0, 8.0};
    gemma3.tied_embeddings = true;
    auto opt = llama; // OPT-350m: learned positions (offset 2), post-norm LayerNorm, a projected table
    opt.learned_positions = true;
    opt.position_offset = 2;
    opt.norm = NormKind::LayerNorm;
    opt.post_norm = true;
    opt.final_norm = false;
    opt.word_embed_proj_dim = 8;
    opt.gated_mlp = false;
    opt.activation = "relu";
    opt.qkv_bias = opt.o_bias = opt.mlp_bias = true;
    opt.num_kv_heads = opt.num_heads;
    auto neox = llama; // gpt_neox: parallel residual, partial rotary, LayerNorm, exact GELU
    neox.parallel_residual = true;
    neox.rotary_dim = 2;
    neox.norm = NormKind::LayerNorm;
    neox.gated_mlp = false;
    neox.activation = "gelu";
    neox.qkv_bias = neox.o_bias = neox.mlp_bias = true;
    return {{"gpt2", test::tiny_config(Architecture::GPT2)},
            {"llama", llama},
            {"llama sliding", sliding},
            {"gemma3", gemma3},
            {"opt-350m", opt},
            {"gpt_neox", neox}};
}

// ---- without ONNX Runtime: what is written, and what is refused ----

TEST(OnnxExport, WritesACheckedGraphAndReportsItsBytes)
{
    test::TempDir tmp;
    for (const auto& [name, c] : tiny_configs()) {
        const auto m = tiny_model(c);
        const auto out = tmp.path() / (std::to_string(c.num_layers) + name + ".onnx");
        const auto r = export_to(*m, out);
        EXPECT_EQ(r.bytes, fs::file_size(out)) << name;
        EXPECT_EQ(onnx_export_refusal(*m), "") << name;
        // With external data: a small graph and the tensors beside it, the same bytes in all.
        const auto split = tmp.path() / (name + "-external.onnx");
        OnnxExportOptions o;
        o.external_data = true;
        const auto e = export_to(*m, split, o);
        ASSERT_TRUE(fs::exists(split.string() + ".data")) << name;
        EXPECT_EQ(e.bytes, fs::file_size(split) + fs::file_size(split.string() + ".data")) << name;
        EXPECT_LT(fs::file_size(split), 64u * 1024) << name;
    }
}

TEST(OnnxExport, ReplacesOnlyItsOwnFilesAndLeavesNothingOnCancel)
{
    test::TempDir tmp;
    const auto m = tiny_model(test::tiny_config(Architecture::Llama));
    const auto out = tmp.path() / "m.onnx";
    export_to(*m, out);
    try {
        export_to(*m, out);
        ADD_FAILURE() << "an existing file was replaced without overwrite";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
    }
    OnnxExportOptions force;
    force.overwrite = true;
    EXPECT_NO_THROW(export_to(*m, out, force)); // its own export: replaced

    const auto foreign = tmp.path() / "notes.onnx";
    test::write_file(foreign, "my notes, not a model");
    try {
        export_to(*m, foreign, force);
        ADD_FAILURE() << "a file EmbedLab did not write was replaced";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("notes.onnx"), std::string::npos) << e.what();
    }
    EXPECT_EQ(test::read_text(foreign), "my notes, not a model");

    const auto cancelled = tmp.path() / "cancelled.onnx";
    EXPECT_THROW(export_onnx(*m, cancelled, {}, [](int64_t, int64_t) { return false; }, {}), Cancelled);
    EXPECT_FALSE(fs::exists(cancelled));
    for (const auto& e : fs::directory_iterator(tmp.path()))
        EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos)
            << "left behind: " << e.path();

    OnnxExportOptions opset;
    opset.opset = 13;
    EXPECT_THROW(export_to(*m, tmp.path() / "o13.onnx", opset), InputError);
}

std::string file_bytes(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string float32_bytes(const torch::Tensor& t)
{
    const auto f = t.to(torch::kFloat32).contiguous();
    return {static_cast<const char*>(f.data_ptr()), static_cast<size_t>(f.numel()) * 4};
}

// The tensors' bytes are streamed into the file rather than held in the proto (issue 57
// item 9): the file is still exactly what protobuf writes for the message it parses to,
// and each weight's raw_data (inline) or data-file range (external) is its float32 bytes.
TEST(OnnxExport, StreamedFileIsProtobufsOwnSerialisation)
{
    test::TempDir tmp;
    for (const auto& [name, c] : tiny_configs()) {
        const auto m = tiny_model(c);
        const auto out = tmp.path() / (name + ".onnx");
        export_to(*m, out);
        const auto bytes = file_bytes(out);
        ::onnx::ModelProto proto;
        ASSERT_TRUE(proto.ParseFromString(bytes)) << name;
        EXPECT_EQ(proto.SerializeAsString(), bytes) << name;
        const auto split = tmp.path() / (name + "-external.onnx");
        OnnxExportOptions o;
        o.external_data = true;
        export_to(*m, split, o);
        ::onnx::ModelProto graph;
        ASSERT_TRUE(graph.ParseFromString(file_bytes(split))) << name;
        EXPECT_EQ(graph.SerializeAsString(), file_bytes(split)) << name;
        const auto data = file_bytes(split.string() + ".data");
        int checked = 0;
        for (const auto& t : proto.graph().initializer()) {
            const auto it = m->weights().find(t.name());
            if (it == m->weights().end() || it->second.dim() != 2) // (1 + w) norms are stored summed
                continue;
            EXPECT_EQ(t.raw_data(), float32_bytes(it->second)) << name << ": " << t.name();
            ++checked;
        }
        EXPECT_GE(checked, 2 * c.num_layers) << name;
        for (const auto& t : graph.graph().initializer()) {
            const auto it = m->weights().find(t.name());
            if (it == m->weights().end() || it->second.dim() != 2 ||
                t.data_location() != ::onnx::TensorProto::EXTERNAL)
                continue;
            std::map<std::string, std::string> where;
            for (const auto& e : t.external_data())
                where[e.key()] = e.value();
            EXPECT_EQ(data.substr(std::stoull(where.at("offset")), std::stoull(where.at("length"))),
                      float32_bytes(it->second))
                << name << ": " << t.name();
        }
    }
}

// A weight held at half precision is written as float32 converted a block at a time, as
// the whole tensor converts (blocks of 2^20 values: this one spans three).
TEST(OnnxExport, HalfPrecisionInitializersConvertAsWritten)
{
    torch::manual_seed(5);
    for (const auto type : {torch::kBFloat16, torch::kFloat16}) {
        const auto weight = torch::randn({3, 1000, 1000}).to(type);
        onnx::Graph g;
        const auto name = g.initializer("w", weight, torch::kFloat32);
        EXPECT_EQ(g.initializer("w", weight, torch::kFloat32), name); // stored once
        ASSERT_EQ(g.initializers().size(), 1u);
        const auto& stored = g.initializers()[0];
        EXPECT_EQ(stored.bytes(), uint64_t{3'000'000} * 4);
        EXPECT_EQ(stored.value.data_ptr(), weight.data_ptr()); // referenced, not converted
        std::string written;
        int blocks = 0;
        stored.write_bytes([&](std::string_view b) {
            written.append(b);
            ++blocks;
        });
        EXPECT_EQ(blocks, 3);
        EXPECT_EQ(written, float32_bytes(weight));
        EXPECT_THROW(g.initializer("ids", torch::arange(4), torch::kFloat32), InputError);
    }
}

using embedlab::test::status_kb;

// Exporting holds the model's weights once (issue 57 item 9): the peak resident set grows
// by less than a quarter of the weights' bytes, inline and with external data (it grew by
// all of them when the proto held a copy of every tensor).
TEST(OnnxExport, PeakMemoryIsTheModelNotTwice)
{
    auto c = test::tiny_config(Architecture::Llama);
    c.hidden_size = 512;
    c.num_heads = 8;
    c.num_kv_heads = 4;
    c.intermediate_size = 8192;
    const auto m = tiny_model(c); // 2 layers of 3 x 512 x 8192 MLP: about 110 MB of float32
    int64_t weight_bytes = 0;
    for (const auto& [name, t] : m->weights())
        weight_bytes += t.numel() * 4;
    test::TempDir tmp;
    export_to(*m, tmp.path() / "warm.onnx"); // the ONNX schemas' first load
    for (const bool external : {false, true}) {
        {
            if (!embedlab::test::reset_peak_rss())
                GTEST_SKIP() << "/proc/self/clear_refs cannot reset the peak resident set";
        }
        const long before = status_kb("VmRSS");
        OnnxExportOptions o;
        o.external_data = external;
        export_to(*m, tmp.path() / (external ? "e.onnx" : "i.onnx"), o);
        const long grew = status_kb("VmHWM") - before;
        EXPECT_LT(grew * 1024, weight_bytes / 4)
            << (external ? "external" : "inline") << ": grew " << grew / 1024 << " MB for "
            << weight_bytes / (1 << 20) << " MB of weights";
    }
}

TEST(OnnxExportCli, FormatOnnxAndItsFlags)
{
    test::TempDir tmp;
    const auto model = test::write_tiny_hf_model(tmp.path() / "tiny", Architecture::Llama);
    const auto out = tmp.path() / "tiny.onnx";
    const auto r = test::cli(
        {"export", model.string(), "--format", "onnx", "--with-past", "--out", out.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("format"), "onnx");
    EXPECT_EQ(j.at("bytes").get<uint64_t>(), fs::file_size(out));
    const auto bad = test::cli({"export", model.string(), "--format", "gguf", "--with-past", "--out",
                                (tmp.path() / "x.gguf").string()});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--with-past applies to --format onnx"), std::string::npos) << bad.err;
}

// ---- in ONNX Runtime ----

// Greedy decoding through the graph's present -> past outputs, one token at a time after
// the prompt, gives generate()'s tokens.
std::vector<int32_t> ort_greedy(const LanguageModel& m, const fs::path& onnx,
                                const std::vector<int32_t>& prompt, int steps)
{
    const auto& c = m.config();
    std::vector<std::pair<std::string, torch::Tensor>> past;
    const int64_t Hkv = c.arch == Architecture::GPT2 ? c.num_heads : c.num_kv_heads;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const auto p = "past_key_values." + std::to_string(l);
        past.emplace_back(p + ".key", torch::zeros({1, Hkv, 0, c.head_dim()}));
        past.emplace_back(p + ".value", torch::zeros({1, Hkv, 0, c.value_dim(l)}));
    }
    std::vector<int32_t> tokens;
    auto ids = as_ids(prompt);
    int64_t length = 0;
    for (int s = 0; s < steps; ++s) {
        const int64_t T = ids.size(1);
        auto inputs = past;
        inputs.emplace_back("input_ids", ids);
        inputs.emplace_back("attention_mask", torch::ones({1, length + T}, torch::kLong));
        inputs.emplace_back("position_ids", torch::arange(length, length + T, torch::kLong).unsqueeze(0));
        std::vector<std::string> wanted{"logits"};
        for (const auto& [name, t] : past)
            wanted.push_back("present" + name.substr(std::string("past_key_values").size()));
        const auto run = test::run_onnx(onnx, inputs, wanted);
        const auto next = run.outputs.at("logits")[0][T - 1].argmax().item<int64_t>();
        tokens.push_back(static_cast<int32_t>(next));
        for (size_t i = 0; i < past.size(); ++i)
            past[i].second = run.outputs.at(wanted[i + 1]);
        length += T;
        ids = torch::full({1, 1}, next, torch::kLong);
    }
    return tokens;
}

// Each tiny configuration's export, without and with the KV-cache interface: the logits
// and perplexity of one pass, and greedy decoding through present -> past.
TEST(OnnxRuntime, TinyModelsGiveEmbedLabsLogitsAndGreedyTokens)
{
    EMBEDLAB_REQUIRE_ONNXRUNTIME();
    test::TempDir tmp;
    for (const auto& [name, c] : tiny_configs()) {
        const auto m = tiny_model(c);
        const auto plain = tmp.path() / (name + ".onnx"), with_past = tmp.path() / (name + "-past.onnx");
        export_to(*m, plain);
        expect_runtime_matches(*m, plain, as_ids(test::spread_ids(20, c.vocab_size, 7, 3)), name);
        OnnxExportOptions o;
        o.with_past = true;
        export_to(*m, with_past, o);
        const auto prompt = test::spread_ids(5, c.vocab_size, 7, 3);
        const auto g = generate(*m, nullptr, prompt, {.max_tokens = 6, .stop_at_eos = false});
        std::vector<int32_t> expected;
        for (const auto& t : g.tokens)
            expected.push_back(t.id);
        EXPECT_EQ(ort_greedy(*m, with_past, prompt, 6), expected) << name;
    }
}

// ---- ../shared: every zoo architecture, tinyllama, tinygpt2; every table method ----

using test::heldout_ids;
using test::shared_models;
using test::SharedModel;

class SharedOnnx : public ::testing::TestWithParam<SharedModel> {};

TEST_P(SharedOnnx, DenseExportGivesEmbedLabsPerplexity)
{
    EMBEDLAB_REQUIRE_SHARED();
    EMBEDLAB_REQUIRE_ONNXRUNTIME();
    const auto lm = load_model(shared_dir() / GetParam().dir);
    test::TempDir tmp;
    const auto out = tmp.path() / "m.onnx";
    export_onnx(lm, out, {});
    expect_runtime_matches(*lm.model, out, as_ids(heldout_ids(lm, 64)), GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(Shared, SharedOnnx, ::testing::ValuesIn(shared_models()),
                         [](const auto& info) { return test::shared_model_name(info.param); });

// Factors a directory stores at a ggml type (compress --store) are written as stored and
// dequantised in the graph: the file is smaller than a float32 export of the same factors
// by what the store saves, and ONNX Runtime computes the model EmbedLab loads.
TEST(SharedOnnxStore, FactorsStoredAtAGgmlTypeStayThatType)
{
    EMBEDLAB_REQUIRE_SHARED();
    EMBEDLAB_REQUIRE_ONNXRUNTIME();
    test::TempDir tmp;
    const auto model = (shared_dir() / "models/tinyllama").string();
    for (const char* store : {"f32", "q8_0"}) {
        const auto dir = tmp.path() / store;
        const auto r = test::cli({"compress", model, "--method", "pca", "--rank", "64", "--store", store,
                                  "--out", dir.string(), "--quiet"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    const auto f32 = load_model(tmp.path() / "f32"), q8 = load_model(tmp.path() / "q8_0");
    const auto f32_bytes = export_onnx(f32, tmp.path() / "f32.onnx", {}).bytes;
    const auto out = tmp.path() / "q8_0.onnx";
    const auto q8_bytes = export_onnx(q8, out, {}).bytes;
    // Z [V, 64], P [64, d] and mu [d] at 34 bytes per 32 values instead of 128.
    const auto& c = f32.model->config();
    const double values = static_cast<double>(c.vocab_size * 64 + 64 * c.hidden_size + c.hidden_size);
    const double saved = static_cast<double>(f32_bytes) - static_cast<double>(q8_bytes);
    EXPECT_NEAR(saved, values * (4.0 - 34.0 / 32.0), 0.02 * values * 4.0) << f32_bytes << " vs " << q8_bytes;
    expect_runtime_matches(*q8.model, out, as_ids(heldout_ids(q8, 48)), "tinyllama pca 64 stored q8_0");
}

// Every table method (the registry's, in its order) on tinyllama (untied head) and on
// smollm2-tied (the tied head through the method's factors), plus flat: ONNX Runtime's
// perplexity equals EmbedLab's, and the file is smaller than the dense export by the
// table's saving, within 2% (what the compressed directory stores: accounting.bytes_after).
struct MethodCase {
    std::string model, method;
};
void PrintTo(const MethodCase& c, std::ostream* os)
{
    *os << c.model << " " << c.method;
}

std::vector<MethodCase> method_cases()
{
    std::vector<MethodCase> cases;
    for (const char* model : {"models/tinyllama", "models/zoo/smollm2-tied"})
        for (const auto* m : table_methods())
            cases.push_back({model, m->name()});
    cases.push_back({"models/tinyllama", "flat"});
    return cases;
}

CompressionRequest quick_request(const std::string& model, const std::string& method, int64_t d)
{
    const auto text = (fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt").string();
    CompressionRequest r;
    r.model = (shared_dir() / model).string();
    r.method = method;
    if (method == "flat") {
        r.remaining = 0.5;
        r.calib_text = text;
        r.samples = 8;
        r.seqlen = 32;
        return r;
    }
    table_method(method).fill_example(r, d);
    if (r.steps > 0)
        r.steps = 20; // fourier, aq: a few steps; the export, not the fit, is tested
    if (method_descriptor(method).needs_frequency_text) {
        r.freq_text = text;
        r.keep_ratio = 0.5;
        r.k = 4;
    }
    if (r.rank > 16)
        r.rank = 16;
    return r;
}

class MethodOnnx : public ::testing::TestWithParam<MethodCase> {};

TEST_P(MethodOnnx, ExportGivesEmbedLabsPerplexityAndSavesTheTablesBytes)
{
    EMBEDLAB_REQUIRE_SHARED();
    EMBEDLAB_REQUIRE_ONNXRUNTIME();
    const auto& c = GetParam();
    const auto original = load_model(shared_dir() / c.model);
    const int64_t V = original.model->config().vocab_size, d = original.model->config().embedding_dim();
    const auto run = run_compression(quick_request(c.model, c.method, d));
    const auto& m = run.compressed_model();
    test::TempDir tmp;
    const auto out = tmp.path() / "m.onnx", dense = tmp.path() / "dense.onnx";
    const auto r = export_onnx(m, out, {}, {}, {});
    const auto what = c.model + " " + c.method;
    expect_runtime_matches(m, out, as_ids(heldout_ids(original, 48)), what);
    if (!run.embedding)
        return; // flat: its narrowed projections are what is stored
    const auto dense_bytes = export_onnx(original, dense, {}).bytes;
    const double saving = static_cast<double>(dense_bytes) - static_cast<double>(r.bytes);
    const double expected = 4.0 * static_cast<double>(V * d) - run.embedding->accounting.bytes_after;
    std::printf("%s: %.0f bytes saved, the table's saving %.0f (%+.2f%%)\n", what.c_str(), saving, expected,
                100 * (saving - expected) / expected);
    if (r.notes.size() > 1) // a fallback the report names (quant types ONNX cannot express)
        return;
    // 2% of the saving, and the few kilobytes of the lookup's graph nodes (a setting
    // that saves nothing, tucker ranks 4 on d = 64, still differs by those).
    EXPECT_NEAR(saving, expected, 0.02 * std::abs(expected) + 4096) << what;
}

std::string method_case_name(const ::testing::TestParamInfo<MethodCase>& info)
{
    std::string n = fs::path(info.param.model).filename().string() + "_" + info.param.method;
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
}

INSTANTIATE_TEST_SUITE_P(Methods, MethodOnnx, ::testing::ValuesIn(method_cases()), method_case_name);

// The whole matrix, every table method on every other shared model (tinygpt2: its
// position table stays dense), is the `reference` label: about a minute more.
std::vector<MethodCase> matrix_cases()
{
    std::vector<MethodCase> cases;
    for (const auto& m : shared_models())
        if (m.name != "tinyllama" && m.name != "smollm2-tied")
            for (const auto* method : table_methods())
                cases.push_back({m.dir.string(), method->name()});
    return cases;
}

INSTANTIATE_TEST_SUITE_P(MethodMatrix, MethodOnnx, ::testing::ValuesIn(matrix_cases()), method_case_name);

} // namespace
} // namespace embedlab
