// PETE Fourier embedding (METHODS.md 4): the feature formula, lookup/head
// consistency, parameter counts, the seeded AdamW fit, cancel, bad input, and the
// compressed-model round trip on a tiny tied (gpt2) model.
#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "embedlab/compressed_model.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/fourier_embedding.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

constexpr double kPi = std::numbers::pi;

// Random MLP parameters with the documented layout.
FourierParams random_params(FourierMlp mlp, int64_t V, int64_t d, bool norm, int64_t h = 3)
{
    torch::manual_seed(11);
    FourierParams p;
    p.mlp = mlp;
    p.vocab = V;
    p.dim = d;
    p.norm = norm;
    if (mlp == FourierMlp::Linear) {
        p.w_in = 0.3 * torch::randn({d, d});
        p.b_in = 0.1 * torch::randn({d});
    } else {
        p.hidden = h;
        p.w_in = 0.3 * torch::randn({2 * h, d});
        p.b_in = 0.1 * torch::randn({2 * h});
        p.w_out = 0.3 * torch::randn({d, h});
        p.b_out = 0.1 * torch::randn({d});
    }
    if (norm)
        p.norm_weight = 1 + 0.1 * torch::randn({d});
    return p;
}

// A table the features can explain (a smooth function of the id) plus noise.
torch::Tensor smooth_table(int64_t V, int64_t d)
{
    torch::manual_seed(5);
    const auto t = fourier_features(torch::arange(V, torch::kLong), V, d);
    return torch::matmul(t, 0.5 * torch::randn({d, d})) + 0.3 + 0.05 * torch::randn({V, d});
}

FourierOptions quick(FourierMlp mlp = FourierMlp::Linear)
{
    return {.mlp = mlp, .steps = 150, .lr = 1e-2, .batch = 128, .seed = 42};
}

} // namespace

TEST(FourierFeatures, MatchTheFormulaInterleavedSinCos)
{
    const int64_t V = 11, d = 5; // odd d: the last column is sin of frequency 3
    const auto t = fourier_features(torch::arange(V, torch::kLong), V, d).to(torch::kDouble);
    ASSERT_EQ(t.sizes(), (std::vector<int64_t>{V, d}));
    for (int64_t p = 0; p < V; ++p) {
        const double x = 2.0 * static_cast<double>(p) / static_cast<double>(V - 1) - 1.0;
        for (int64_t i = 0; i < d; ++i) {
            const double f = static_cast<double>(i / 2 + 1) * kPi * x;
            EXPECT_NEAR(t[p][i].item<double>(), i % 2 == 0 ? std::sin(f) : std::cos(f), 1e-7)
                << "p " << p << " i " << i;
        }
    }
    // x(0) = -1 and x(V-1) = 1: sin(k pi x) = 0, cos(k pi x) = (-1)^k at both ends.
    for (int64_t p : {int64_t{0}, V - 1})
        for (int64_t k = 1; k <= 2; ++k) {
            EXPECT_NEAR(t[p][2 * (k - 1)].item<double>(), 0.0, 1e-7);
            EXPECT_NEAR(t[p][2 * (k - 1) + 1].item<double>(), k % 2 ? -1.0 : 1.0, 1e-7);
        }
    // The middle id has x = 0: sin 0 = 0, cos 0 = 1 exactly.
    const auto mid = t[5];
    EXPECT_EQ(mid[0].item<double>(), 0.0);
    EXPECT_EQ(mid[1].item<double>(), 1.0);
    // Any id shape; features for [2, 3] ids are [2, 3, d].
    const auto ids = torch::tensor({{0, 1, 2}, {8, 9, 10}}, torch::kLong);
    const auto shaped = fourier_features(ids, V, d);
    ASSERT_EQ(shaped.sizes(), (std::vector<int64_t>{2, 3, d}));
    EXPECT_TRUE(torch::equal(shaped[1][2], t[10].to(torch::kFloat32)));
}

TEST(FourierFeatures, LargeVocabularyKeepsNeighboursApart)
{
    // GPT-2's V: x is computed in float64, so ids 1 and 2 differ in the top frequency.
    const int64_t V = 50257, d = 128;
    const auto t = fourier_features(torch::tensor({1, 2, 25128, 50256}, torch::kLong), V, d);
    const double x1 = 2.0 / 50256.0 - 1.0;
    EXPECT_NEAR(t[0][126].item<double>(), std::sin(64 * kPi * x1), 1e-6);
    EXPECT_NEAR(t[0][127].item<double>(), std::cos(64 * kPi * x1), 1e-6);
    EXPECT_FALSE(torch::equal(t[0], t[1]));
    EXPECT_EQ(t[2][0].item<float>(), 0.0f); // 25128 = (V-1)/2: x = 0
    EXPECT_EQ(t[2][1].item<float>(), 1.0f);
    EXPECT_NEAR(t[3][127].item<double>(), 1.0, 1e-6); // cos(64 pi)
    EXPECT_THROW(fourier_features(torch::tensor({0}, torch::kLong), 1, 4), InputError);
    // Every column of a few rows against the formula in float64.
    const auto some = torch::tensor({0, 1, 777, 25127, 40000, 50255, 50256}, torch::kLong);
    const auto f = fourier_features(some, V, d);
    for (int64_t r = 0; r < some.numel(); ++r) {
        const double x = 2.0 * static_cast<double>(some[r].item<int64_t>()) / 50256.0 - 1.0;
        for (int64_t i = 0; i < d; ++i) {
            const double a = static_cast<double>(i / 2 + 1) * kPi * x;
            ASSERT_NEAR(f[r][i].item<double>(), i % 2 == 0 ? std::sin(a) : std::cos(a), 2e-7)
                << "row " << r << " column " << i;
        }
    }
}

TEST(FourierEmbedding, ProjectEqualsHiddenTimesTheLookedUpRows)
{
    // V above the 4096-row block: the head is built from two blocks.
    const int64_t V = 5000, d = 8;
    for (auto mlp : {FourierMlp::Linear, FourierMlp::GeGLU})
        for (bool norm : {false, true}) {
            SCOPED_TRACE(std::string(fourier_mlp_name(mlp)) + (norm ? " norm" : ""));
            const FourierTokenEmbedding e(random_params(mlp, V, d, norm));
            const auto all = e.lookup(torch::arange(V, torch::kLong));
            ASSERT_EQ(all.sizes(), (std::vector<int64_t>{V, d}));
            const auto h = torch::randn({2, 3, d});
            const auto logits = e.project(h);
            ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 3, V}));
            EXPECT_TRUE(torch::allclose(logits, torch::matmul(h, all.t()), 1e-4, 1e-4));
            // A lookup of a few ids is the same rows; E = T + MLP(T) (then the norm).
            const auto ids = torch::tensor({4999, 0, 4096, 17}, torch::kLong);
            EXPECT_TRUE(torch::allclose(e.lookup(ids), all.index_select(0, ids), 1e-6, 1e-6));
            const auto t = fourier_features(ids, V, d);
            auto expected = t + e.mlp(t);
            if (norm)
                expected =
                    expected * torch::rsqrt(expected.pow(2).mean(-1, true) + 1e-6) * e.params().norm_weight;
            EXPECT_TRUE(torch::allclose(e.lookup(ids), expected, 1e-5, 1e-5));
            EXPECT_THROW(e.lookup(torch::tensor({V}, torch::kLong)), InputError);
        }
}

TEST(FourierEmbedding, GegluLayoutIsGateThenValue)
{
    const int64_t V = 20, d = 4, h = 2;
    auto p = random_params(FourierMlp::GeGLU, V, d, false, h);
    const FourierTokenEmbedding e(p);
    const auto t = fourier_features(torch::arange(V, torch::kLong), V, d);
    const auto gv = torch::matmul(t, p.w_in.t()) + p.b_in;
    const auto gate = gv.narrow(1, 0, h), value = gv.narrow(1, h, h);
    const auto expected =
        torch::matmul(0.5 * gate * (1 + torch::erf(gate / std::sqrt(2.0))) * value, p.w_out.t()) + p.b_out;
    EXPECT_TRUE(torch::allclose(e.mlp(t), expected, 1e-5, 1e-5));
}

TEST(FourierEmbedding, ParameterCountsAreTheMlpAndNormOnly)
{
    const int64_t V = 300, d = 16;
    const auto table = smooth_table(V, d);
    auto count = [&](FourierMlp mlp, double ratio, bool norm) {
        auto o = quick(mlp);
        o.steps = 1;
        o.hidden_ratio = ratio;
        o.norm = norm;
        return FourierTokenEmbedding(fit_fourier_embedding(table, o).params).parameter_count();
    };
    EXPECT_EQ(count(FourierMlp::Linear, 0.25, false), 16 * 16 + 16);
    EXPECT_EQ(count(FourierMlp::Linear, 0.25, true), 16 * 16 + 16 + 16);
    // geglu, h = 4: W_in 8x16 + 8, W_out 16x4 + 16.
    EXPECT_EQ(count(FourierMlp::GeGLU, 0.25, false), 8 * 16 + 8 + 16 * 4 + 16);
    EXPECT_EQ(count(FourierMlp::GeGLU, 1.0, true), 32 * 16 + 32 + 16 * 16 + 16 + 16);
    EXPECT_EQ(fourier_hidden_size(128, 0.25), 32);
    EXPECT_EQ(fourier_hidden_size(10, 0.01), 1);
    EXPECT_EQ(fourier_hidden_size(768, 4.0), 3072);
}

TEST(FourierFit, TrainingReducesTheLossAndReplaysExactly)
{
    const int64_t V = 512, d = 16;
    const auto table = smooth_table(V, d);
    for (auto mlp : {FourierMlp::Linear, FourierMlp::GeGLU}) {
        SCOPED_TRACE(fourier_mlp_name(mlp));
        const auto a = fit_fourier_embedding(table, quick(mlp));
        ASSERT_EQ(a.loss_curve.size(), 150u);
        EXPECT_EQ(a.loss_curve.front().step, 1);
        EXPECT_EQ(a.loss_curve.back().step, 150);
        EXPECT_LT(a.final_loss, 0.5 * a.initial_loss);
        EXPECT_LT(a.loss_curve.back().loss, a.loss_curve.front().loss);
        EXPECT_EQ(a.final_loss, a.final_mse);
        // Same seed: identical parameters; another seed: different ones.
        const auto b = fit_fourier_embedding(table, quick(mlp));
        EXPECT_TRUE(torch::equal(a.params.w_in, b.params.w_in));
        EXPECT_TRUE(torch::equal(a.params.b_in, b.params.b_in));
        if (mlp == FourierMlp::GeGLU) {
            EXPECT_TRUE(torch::equal(a.params.w_out, b.params.w_out));
        }
        auto other = quick(mlp);
        other.seed = 43;
        EXPECT_FALSE(torch::equal(a.params.w_in, fit_fourier_embedding(table, other).params.w_in));
        // The stored parameters carry no autograd state.
        EXPECT_FALSE(a.params.w_in.requires_grad());
    }
}

TEST(FourierFit, CosineLossWithNormAndUnderInferenceMode)
{
    const int64_t V = 400, d = 12;
    c10::InferenceMode guard; // the engine's usual state; the fit must still train
    const auto table = smooth_table(V, d);
    ASSERT_TRUE(table.is_inference());
    auto o = quick(FourierMlp::GeGLU);
    o.loss = "cosine";
    o.norm = true;
    const auto fit = fit_fourier_embedding(table, o);
    EXPECT_LT(fit.final_loss, fit.initial_loss);
    EXPECT_GE(fit.final_loss, 0.0);
    EXPECT_LE(fit.final_loss, 2.0);
    ASSERT_TRUE(fit.params.norm_weight.defined());
    EXPECT_FALSE(torch::equal(fit.params.norm_weight, torch::ones({d}))); // the norm trained too
}

TEST(FourierFit, ProgressCanCancel)
{
    const auto table = smooth_table(100, 8);
    int64_t calls = 0;
    EXPECT_THROW(fit_fourier_embedding(table, quick(),
                                       [&](int64_t done, int64_t total) {
                                           EXPECT_EQ(total, 150);
                                           EXPECT_EQ(done, ++calls);
                                           return done < 3;
                                       }),
                 Cancelled);
    EXPECT_EQ(calls, 3);
}

TEST(FourierFit, BadOptionsAreInputErrors)
{
    const auto table = smooth_table(100, 8);
    auto expect_error = [&](FourierOptions o, const std::string& words) {
        try {
            fit_fourier_embedding(table, o);
            ADD_FAILURE() << "no error for " << words;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    auto o = quick();
    o.steps = 0;
    expect_error(o, "steps");
    o = quick();
    o.lr = 0;
    expect_error(o, "learning rate");
    o.lr = -1e-3;
    expect_error(o, "learning rate");
    o.lr = std::nan("");
    expect_error(o, "learning rate");
    o = quick(FourierMlp::GeGLU);
    o.hidden_ratio = 0;
    expect_error(o, "hidden ratio");
    o = quick();
    o.loss = "l1";
    expect_error(o, "loss");
    o = quick();
    o.batch = 0;
    expect_error(o, "batch");
    auto bad = table.clone();
    bad[7][3] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THROW(fit_fourier_embedding(bad, quick()), InputError);
    EXPECT_THROW(fit_fourier_embedding(torch::zeros({1, 8}), quick()), InputError);
    EXPECT_THROW(parse_fourier_mlp("relu"), InputError);
    // A constructor given a wrong shape names the tensor.
    auto p = random_params(FourierMlp::GeGLU, 10, 4, false);
    p.w_out = torch::zeros({4, 5});
    try {
        FourierTokenEmbedding e(p);
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("w_out"), std::string::npos) << e.what();
    }
}

TEST(FourierCompress, RecordsTheCurveAndRoundTripsThroughADirectory)
{
    test::TempDir tmp;
    const ModelConfig c = test::tiny_config(Architecture::GPT2); // tied head
    const fs::path src_dir = tmp / "src";
    fs::create_directories(src_dir);
    write_file_atomic(src_dir / "config.json", nlohmann::json{{"model_type", "gpt2"},
                                                              {"vocab_size", c.vocab_size},
                                                              {"n_embd", c.hidden_size},
                                                              {"n_layer", c.num_layers},
                                                              {"n_head", c.num_heads},
                                                              {"n_positions", c.max_positions},
                                                              {"n_inner", c.intermediate_size}}
                                                   .dump());
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (auto& [name, t] : test::random_weights(c))
        tensors.emplace_back(name, t);
    write_safetensors(src_dir / "model.safetensors", tensors, {{"format", "pt"}});
    LoadOptions lo;
    lo.need_tokenizer = false;
    auto src = load_model(src_dir, lo);

    for (const bool geglu : {false, true}) {
        SCOPED_TRACE(geglu ? "geglu" : "linear");
        const CompressionSpec spec{.method = "fourier",
                                   .mlp = geglu ? "geglu" : "linear",
                                   .hidden_ratio = 0.5,
                                   .norm = geglu,
                                   .steps = 300,
                                   .lr = 1e-2,
                                   .batch = 16,
                                   .seed = 9};
        const auto comp = compress_table(src.model->weights().at("wte.weight"), spec,
                                         src.model->parameter_breakdown().total());
        const int64_t d = c.hidden_size, h = geglu ? 8 : 0;
        const int64_t params = geglu ? 2 * h * d + 2 * h + d * h + d + d : d * d + d;
        EXPECT_EQ(comp.embedding->kind(), "fourier");
        EXPECT_EQ(comp.embedding->parameter_count(), params);
        EXPECT_EQ(comp.accounting.params_after, params);
        EXPECT_EQ(comp.fit["parameters"], params);
        EXPECT_EQ(comp.fit["loss_curve"]["steps"].size(), 200u); // subsampled from 300
        EXPECT_EQ(comp.fit["loss_curve"]["steps"].front(), 1);
        EXPECT_EQ(comp.fit["loss_curve"]["steps"].back(), 300);
        EXPECT_LT(comp.fit["final_loss"].get<double>(), comp.fit["initial_loss"].get<double>());
        EXPECT_GT(comp.accounting.flops_per_token, 0);
        const auto sj = spec_json(comp.spec);
        EXPECT_EQ(sj["mlp"], spec.mlp);
        EXPECT_EQ(sj["seed"], 9);
        EXPECT_EQ(sj["steps"], 300);

        const fs::path out = tmp / (geglu ? "geglu" : "linear");
        const auto manifest = save_compressed_model(src, comp, out);
        EXPECT_EQ(manifest["seed"], 9);
        const std::string p = "wte.fourier.";
        EXPECT_TRUE(manifest["factor_tensors"].contains(p + "w_in"));
        EXPECT_EQ(manifest["factor_tensors"].contains(p + "w_out"), geglu);
        EXPECT_EQ(manifest["factor_tensors"].contains(p + "norm"), geglu);
        auto back = load_model(out, lo);
        EXPECT_EQ(back.model->token_embedding().kind(), "fourier");
        EXPECT_EQ(back.model->parameter_breakdown().token_embedding, params);
        LanguageModel in_memory(src.model->config(), src.model->weights(), "in-memory");
        in_memory.set_token_embedding(comp.embedding);
        const auto ids = torch::tensor({{1, 7, 3, 49, 0, 22}}, torch::kLong);
        EXPECT_TRUE(torch::equal(back.model->logits(ids), in_memory.logits(ids)));

        // A manifest whose hidden ratio disagrees with the tensors names the tensor.
        if (geglu) {
            fs::copy(out, tmp / "tampered", fs::copy_options::recursive);
            auto m = nlohmann::json::parse(test::read_text(tmp / "tampered" / "embedlab.json"));
            m["parameters"]["hidden_ratio"] = 0.25;
            write_file_atomic(tmp / "tampered" / "embedlab.json", m.dump());
            try {
                load_model(tmp / "tampered", lo);
                ADD_FAILURE() << "tampered manifest loaded";
            } catch (const InputError& e) {
                EXPECT_NE(std::string(e.what()).find("wte.fourier.w_in"), std::string::npos) << e.what();
            }
        }
    }
}
