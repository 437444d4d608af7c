// The model zoo (../shared/models/zoo): every architecture EmbedLab reads,
// checked against llama.cpp's perplexity and logits (../shared/reference/zoo.json),
// Hugging Face directory against its GGUF, and every refusal of what is not
// understood. Numbers come from zoo.json at run time, never from this file.
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/model.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::shared_dir;

const json& zoo()
{
    static const json z = json::parse(test::read_text(shared_dir() / "reference" / "zoo.json"));
    return z;
}

// The ids zoo.json was computed on: the first 4097 of its source file.
const std::vector<int32_t>& zoo_ids()
{
    static const std::vector<int32_t> ids = [] {
        const auto& spec = zoo().at("ids");
        auto all = read_ids_file(shared_dir() / spec.at("source").get<std::string>());
        const size_t n =
            static_cast<size_t>(spec.at("windows").get<int64_t>() * spec.at("ctx").get<int64_t>() + 1);
        all.resize(std::min(all.size(), n));
        return all;
    }();
    return ids;
}

int64_t zoo_ctx()
{
    return zoo().at("ids").at("ctx").get<int64_t>();
}

LoadedModel load(const fs::path& p)
{
    return load_model(p, {.need_tokenizer = false});
}

double zoo_perplexity(const LanguageModel& m)
{
    return evaluate_perplexity(m, zoo_ids(), {.ctx = zoo_ctx()}).ppl;
}

// A zoo directory's own perplexity, measured once per process: the suite's three
// cases each compare against it. `loaded`: the directory's model, when the caller has it.
double directory_perplexity(const fs::path& dir, const LanguageModel* loaded = nullptr)
{
    static std::map<std::string, double> measured;
    const auto found = measured.find(dir.string());
    if (found != measured.end())
        return found->second;
    const double ppl = loaded ? zoo_perplexity(*loaded) : zoo_perplexity(*load(dir).model);
    measured.emplace(dir.string(), ppl);
    return ppl;
}

// Logits of the first window, as llamacpp-logits samples them.
void expect_logits_match(const LanguageModel& m, const json& reference, double tolerance,
                         const std::string& what)
{
    const auto& ids = zoo_ids();
    const int64_t ctx = reference.at("ctx").get<int64_t>();
    auto input =
        torch::tensor(std::vector<int64_t>(ids.begin(), ids.begin() + ctx), torch::kLong).unsqueeze(0);
    const auto logits = m.logits(input)[0];
    for (const auto& pos : reference.at("positions")) {
        const int64_t p = pos.at("pos").get<int64_t>();
        const auto row = logits[p];
        EXPECT_EQ(row.argmax().item<int64_t>(), pos.at("argmax").get<int64_t>()) << what << " position " << p;
        EXPECT_NEAR(row.logsumexp(0).item<double>(), pos.at("logsumexp").get<double>(), tolerance)
            << what << " position " << p;
        const auto& first = pos.at("first");
        for (size_t k = 0; k < first.size(); ++k)
            EXPECT_NEAR(row[static_cast<int64_t>(k)].item<double>(), first[k].get<double>(), tolerance)
                << what << " position " << p << " logit " << k;
    }
}

class ZooFixture : public ::testing::TestWithParam<std::string> {};

// EmbedLab's float32 forward pass against llama.cpp on the same weights in F32:
// perplexity to 2e-3 relative, logits to 1e-2 absolute (printed). gpt_neox:
// llama.cpp uses the tanh GELU where Hugging Face (and EmbedLab) use erf; on
// this fixture the difference stays far inside the same bounds.
TEST_P(ZooFixture, MatchesLlamaCpp)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto& f = zoo().at("fixtures").at(GetParam());
    const fs::path dir = shared_dir() / f.at("hf_dir").get<std::string>();
    const auto lm = load(dir);
    const auto& reference = f.at("llamacpp_f32_gguf");
    const double expected = reference.at("ppl").at("ppl").get<double>();
    const double ppl = directory_perplexity(dir, lm.model.get());
    std::printf("%-20s EmbedLab %.6g  llama.cpp (f32 GGUF) %.6g  relative %.2e\n", GetParam().c_str(), ppl,
                expected, ppl / expected - 1);
    EXPECT_NEAR(ppl / expected, 1.0, 2e-3);
    expect_logits_match(*lm.model, reference.at("logits"), 1e-2, GetParam());
}

// The shipped GGUF conversion reads to the same model as its directory.
TEST_P(ZooFixture, GgufGivesTheSameNumbers)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto& f = zoo().at("fixtures").at(GetParam());
    if (!f.contains("gguf") || !fs::exists(shared_dir() / f.at("gguf").get<std::string>()))
        GTEST_SKIP() << GetParam() << ": its GGUF is not shipped (README of models/zoo)";
    const fs::path hf_dir = shared_dir() / f.at("hf_dir").get<std::string>();
    const auto hf = load(hf_dir);
    const auto gguf = load(shared_dir() / f.at("gguf").get<std::string>());
    EXPECT_EQ(gguf.model->config().type_name(), hf.model->config().type_name());
    const auto ids =
        torch::tensor(std::vector<int64_t>(zoo_ids().begin(), zoo_ids().begin() + 64), torch::kLong)
            .unsqueeze(0);
    const double diff = (hf.model->logits(ids) - gguf.model->logits(ids)).abs().max().item<double>();
    EXPECT_LT(diff, 1e-3) << GetParam();
    EXPECT_NEAR(zoo_perplexity(*gguf.model) / directory_perplexity(hf_dir, hf.model.get()), 1.0, 1e-4);
}

// The methods run on every architecture; at full rank they change nothing,
// which checks FLAT-LLM's absorption of biased value heads (qwen2, gpt_neox),
// ungated MLPs and sandwich norms, and the tied or untied heads.
TEST_P(ZooFixture, FullRankMethodsKeepThePerplexity)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto& f = zoo().at("fixtures").at(GetParam());
    const std::string dir = (shared_dir() / f.at("hf_dir").get<std::string>()).string();
    const double original = directory_perplexity(dir);

    CompressionRequest flat;
    flat.model = dir;
    flat.method = "flat";
    flat.remaining = 1.0; // every value dim kept: the absorption is exact
    flat.calib_text = (fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt").string();
    flat.samples = 8;
    flat.seqlen = 32;
    const auto flat_run = run_compression(flat);
    EXPECT_NEAR(zoo_perplexity(flat_run.compressed_model()) / original, 1.0, 1e-4) << GetParam() << " flat";
    // The Nystrom MLP path (biases, ungated MLPs) runs; its ridge is not the identity.
    // Its covariance needs more calibration tokens than kept channels (qwen2: 336 of 512).
    flat.remaining = 0.5;
    flat.compress_mlp = true;
    flat.samples = 24;
    const auto narrowed = run_compression(flat);
    const double narrowed_ppl = zoo_perplexity(narrowed.compressed_model());
    EXPECT_TRUE(std::isfinite(narrowed_ppl)) << GetParam();
    EXPECT_LT(narrowed.compressed_model().parameter_breakdown().total(),
              flat_run.compressed_model().parameter_breakdown().total());

    CompressionRequest pca;
    pca.model = dir;
    pca.method = "svd";
    pca.rank = load(dir).model->config().hidden_size;
    const auto pca_run = run_compression(pca);
    const double svd_ppl = zoo_perplexity(pca_run.compressed_model());
    EXPECT_NEAR(svd_ppl / original, 1.0, 1e-4) << GetParam() << " svd";
    // Written under the architecture's own names (phi3, gpt_neox fuse again) and read back.
    test::TempDir tmp;
    export_run(pca_run, tmp.path() / "svd");
    EXPECT_NEAR(zoo_perplexity(*load(tmp.path() / "svd").model) / svd_ppl, 1.0, 1e-6) << GetParam();
    export_run(narrowed, tmp.path() / "flat");
    EXPECT_NEAR(zoo_perplexity(*load(tmp.path() / "flat").model) / narrowed_ppl, 1.0, 1e-6) << GetParam();
}

std::vector<std::string> fixture_names()
{
    return {"smollm2-tied", "llama32-ropescaled", "qwen2", "qwen3", "gemma2", "phi3", "gptneox"};
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooFixture, ::testing::ValuesIn(fixture_names()), test::ParamName());

// A copy of a zoo directory whose config.json is edited by `edit`.
fs::path edited_copy(const std::string& fixture, const test::TempDir& tmp,
                     const std::function<void(json&)>& edit)
{
    const fs::path dir = tmp.path() / fixture;
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(shared_dir() / "models" / "zoo" / fixture))
        fs::copy(e.path(), dir / e.path().filename());
    json config = json::parse(test::read_text(dir / "config.json"));
    edit(config);
    fs::remove(dir / "config.json");
    std::ofstream(dir / "config.json") << config.dump(2);
    return dir;
}

std::string load_error(const fs::path& dir)
{
    return test::input_error_of([&] { load(dir); }, "(loaded without an error)");
}

TEST(ZooRefusals, UnknownRopeScalingTypeIsNamed)
{
    EMBEDLAB_REQUIRE_SHARED();
    test::TempDir tmp;
    const auto dir =
        edited_copy("llama32-ropescaled", tmp, [](json& c) { c["rope_scaling"]["rope_type"] = "yarn"; });
    EXPECT_NE(load_error(dir).find("rope_scaling type 'yarn' is not implemented"), std::string::npos)
        << load_error(dir);
}

TEST(ZooRefusals, SlidingWindowOnLlamaIsRefused)
{
    EMBEDLAB_REQUIRE_SHARED();
    test::TempDir tmp;
    const auto dir = edited_copy("smollm2-tied", tmp, [](json& c) { c["sliding_window"] = 16; });
    EXPECT_NE(load_error(dir).find("field 'sliding_window' is 16"), std::string::npos) << load_error(dir);
}

TEST(ZooRefusals, QwenSlidingWindowIsRefused)
{
    EMBEDLAB_REQUIRE_SHARED();
    test::TempDir tmp;
    const auto dir = edited_copy("qwen2", tmp, [](json& c) { c["use_sliding_window"] = true; });
    EXPECT_NE(load_error(dir).find("field 'use_sliding_window' is true"), std::string::npos)
        << load_error(dir);
}

TEST(ZooRefusals, UnknownActivationIsNamed)
{
    EMBEDLAB_REQUIRE_SHARED();
    test::TempDir tmp;
    const auto dir = edited_copy("smollm2-tied", tmp, [](json& c) { c["hidden_act"] = "mish"; });
    EXPECT_NE(load_error(dir).find("field 'hidden_act' is 'mish'"), std::string::npos) << load_error(dir);
}

TEST(ZooRefusals, UnknownModelTypeListsTheSupportedOnes)
{
    EMBEDLAB_REQUIRE_SHARED();
    test::TempDir tmp;
    const auto dir = edited_copy("smollm2-tied", tmp, [](json& c) { c["model_type"] = "mamba"; });
    const auto message = load_error(dir);
    EXPECT_NE(message.find("unsupported model_type 'mamba'"), std::string::npos) << message;
    EXPECT_NE(message.find("qwen2"), std::string::npos) << message;
}

// Qwen2's q/k/v biases read as a llama (which has none) would be dropped
// silently; EmbedLab names the first one instead.
TEST(ZooRefusals, UnusedTensorIsNamed)
{
    EMBEDLAB_REQUIRE_SHARED();
    test::TempDir tmp;
    const auto dir = edited_copy("qwen2", tmp, [](json& c) {
        c["model_type"] = "llama";
        c.erase("sliding_window"); // a llama with a window is refused first
    });
    const auto message = load_error(dir);
    EXPECT_NE(message.find("tensor 'model.layers.0.self_attn.k_proj.bias' is not used by llama"),
              std::string::npos)
        << message;
}

// Numbers that would compute NaN or garbage are refused by name (issue 24,
// item 14), not evaluated to "perplexity -nan".
TEST(ZooRefusals, OutOfRangeNumbersAreNamed)
{
    EMBEDLAB_REQUIRE_SHARED();
    const std::vector<std::pair<std::string, json>> cases{{"rms_norm_eps", -1},
                                                          {"rms_norm_eps", 0},
                                                          {"rope_theta", 0},
                                                          {"rope_theta", -10000},
                                                          {"query_pre_attn_scalar", -16},
                                                          {"attn_logit_softcapping", -1}};
    for (const auto& [key, value] : cases) {
        test::TempDir tmp;
        const auto dir = edited_copy("gemma2", tmp, [&](json& c) { c[key] = value; });
        const auto message = load_error(dir);
        EXPECT_NE(message.find("field '" + key + "' must be a positive number"), std::string::npos)
            << key << " = " << value << ": " << message;
    }
}

// Gemma 3's text model: which layers slide (sliding_window_pattern, default 6,
// or layer_types), the local RoPE base, q/k norms; the multimodal form is named.
TEST(ZooConfigs, Gemma3SlidingLayersAndRopeBases)
{
    EMBEDLAB_REQUIRE_SHARED();
    json j = json::parse(test::read_text(shared_dir() / "models" / "zoo" / "gemma2" / "config.json"));
    j["model_type"] = "gemma3_text";
    j["num_hidden_layers"] = 8;
    j["rope_theta"] = 1000000.0;
    auto c = parse_hf_config(j.dump(), "config.json");
    EXPECT_EQ(c.sliding_layers, (std::vector<bool>{true, true, true, true, true, false, true, true}));
    EXPECT_DOUBLE_EQ(c.rope_local_theta, 10000.0); // rope_local_base_freq's default
    EXPECT_TRUE(c.qk_norm && c.sandwich_norms);
    j["sliding_window_pattern"] = 3;
    EXPECT_EQ(parse_hf_config(j.dump(), "config.json").sliding_layers,
              (std::vector<bool>{true, true, false, true, true, false, true, true}));
    j["layer_types"] = json::array();
    for (int l = 0; l < 8; ++l)
        j["layer_types"].push_back(l == 0 ? "full_attention" : "sliding_attention");
    EXPECT_EQ(parse_hf_config(j.dump(), "config.json").sliding_layers,
              (std::vector<bool>{false, true, true, true, true, true, true, true}));
    auto message = [&](json k) {
        try {
            parse_hf_config(k.dump(), "config.json");
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        return std::string("(parsed)");
    };
    json multimodal = j;
    multimodal["model_type"] = "gemma3";
    EXPECT_NE(message(multimodal).find("model_type 'gemma3_text'"), std::string::npos) << message(multimodal);
    json no_window = j;
    no_window.erase("sliding_window");
    EXPECT_NE(message(no_window).find("without 'sliding_window'"), std::string::npos) << message(no_window);
    json v5 = j;
    v5["rope_parameters"] = json::object();
    EXPECT_NE(message(v5).find("'rope_parameters'"), std::string::npos) << message(v5);
}

// Architecture facts and the value heads FLAT-LLM narrows are what inspect and
// the workbench show; spot-check the switches each config turns on.
TEST(ZooConfigs, SwitchesFollowTheConfig)
{
    EMBEDLAB_REQUIRE_SHARED();
    const fs::path zoo_dir = shared_dir() / "models" / "zoo";
    const auto qwen3 = load(zoo_dir / "qwen3").model->config();
    EXPECT_TRUE(qwen3.qk_norm);
    EXPECT_EQ(qwen3.head_dim(), 32);
    const auto gemma2 = load(zoo_dir / "gemma2").model->config();
    EXPECT_TRUE(gemma2.sandwich_norms);
    EXPECT_EQ(gemma2.sliding_layers, (std::vector<bool>{true, false}));
    const auto neox = load(zoo_dir / "gptneox").model->config();
    EXPECT_TRUE(neox.parallel_residual);
    EXPECT_EQ(neox.rotary_dims(), 4);
    const auto scaled = load(zoo_dir / "llama32-ropescaled").model->config();
    ASSERT_EQ(scaled.rope_freq_divisors.size(), 8u);
    EXPECT_DOUBLE_EQ(scaled.rope_freq_divisors.front(), 1.0); // high frequencies keep their speed
    EXPECT_DOUBLE_EQ(scaled.rope_freq_divisors.back(), 32.0); // low frequencies slow by the factor
}

} // namespace
} // namespace embedlab
