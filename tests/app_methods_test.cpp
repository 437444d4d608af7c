// The workbench's lle, fourier and LoRA-recovery rows (app/analyses_compress.cpp):
// accounting, perplexity, request checks (the engine's: the app has none of its
// own), export and cancel, on the bundled model with 512 evaluated tokens so each
// case takes seconds. Requests are the engine's CompressionRequest, complete: the
// texts the method panel fills in are the bundled sample text here.
#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "analyses.hpp"
#include "cli_support.hpp"
#include "embedlab/accounting.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/model.hpp"
#include "model_summary.hpp"
#include "test_support.hpp"

namespace {

using embedlab::CompressionRequest;
using embedlab::RunSummary;

constexpr int64_t kEvalTokens = 512;
constexpr int64_t kV = 50257, kD = 128; // tinygpt2-f16

std::string model()
{
    return embedlab::app::default_model();
}
std::string text()
{
    return embedlab::app::default_sample_text();
}

// The request as the window runs it: on the bundled model, evaluated on the first
// kEvalTokens ids of the sample text.
CompressionRequest on_model(CompressionRequest request)
{
    request.model = model();
    request.eval_text = text();
    if (request.eval_tokens == 0) // a request's own (a bad one, in the checker's test) is kept
        request.eval_tokens = kEvalTokens;
    return request;
}

RunSummary run(const CompressionRequest& request, const embedlab::ProgressFn& progress = {})
{
    return embedlab::app::compress_and_evaluate(on_model(request), {}, progress);
}

// The perplexity of a model directory on the ids a row was evaluated on.
double perplexity_of(const std::filesystem::path& dir)
{
    auto lm = embedlab::load_model(dir);
    auto ids = lm.tokenizer->encode(embedlab::read_text_file(text()));
    ids.resize(kEvalTokens);
    const embedlab::PerplexityOptions options{.ctx = std::min<int64_t>(128, lm.model->max_context())};
    return embedlab::evaluate_perplexity(*lm.model, ids, options).ppl;
}

void expect_valid_row(const RunSummary& r)
{
    EXPECT_EQ(r.params_before, kV * kD);
    EXPECT_GT(r.params_after, 0);
    EXPECT_LT(r.ratio, 1.0);
    EXPECT_DOUBLE_EQ(r.ratio, static_cast<double>(r.params_after) / static_cast<double>(r.params_before));
    EXPECT_TRUE(std::isfinite(r.ppl) && r.ppl > 1) << r.ppl;
    EXPECT_TRUE(std::isfinite(r.ppl_original) && r.ppl_original > 1);
    EXPECT_NEAR(r.delta_ln_ppl, std::log(r.ppl) - std::log(r.ppl_original), 1e-12);
}

// "keep 0.5, k 8, 25128 rare" -> 25128.
int64_t rare_count(const std::string& parameters)
{
    const auto end = parameters.rfind(" rare");
    const auto start = parameters.rfind(' ', end - 1) + 1;
    return std::stoll(parameters.substr(start, end - start));
}

TEST(AnalysesMethods, LleRowAndItsExport)
{
    const CompressionRequest lle =
        on_model({.method = "lle", .freq_text = text(), .keep_ratio = 0.5, .k = 8});
    const auto r = run(lle);
    expect_valid_row(r);
    EXPECT_EQ(r.method, "lle");
    ASSERT_EQ(r.parameters.rfind("keep 0.5, k 8, ", 0), 0u) << r.parameters;
    // METHODS 2: common rows stay (d values each, and their ids: issue 36), a rare row stores
    // k ids, k weights and a norm.
    const int64_t rare = rare_count(r.parameters);
    EXPECT_GT(rare, kV / 2);
    EXPECT_EQ(r.params_after, (kV - rare) * (kD + 1) + rare * (2 * 8 + 1));
    EXPECT_GT(r.mean_cosine, 0.5);

    embedlab::test::TempDir tmp;
    const auto out = tmp / "lle";
    EXPECT_EQ(embedlab::app::export_compressed(lle, out.string(), false, false, {}), "lle " + r.parameters);
    auto loaded = embedlab::load_model(out, {.need_tokenizer = false});
    EXPECT_EQ(loaded.model->token_embedding().kind(), "lle");
    EXPECT_EQ(loaded.model->token_embedding().parameter_count(), r.params_after);
    EXPECT_NEAR(perplexity_of(out), r.ppl, 1e-6 * r.ppl);
}

// "+ KL vs original": the row carries the divergence the engine measured.
TEST(AnalysesMethods, DivergenceColumnsComeWithTheRow)
{
    const auto plain = run({.method = "pca", .rank = 16});
    EXPECT_TRUE(std::isnan(plain.kl_mean));
    const auto r = run({.method = "pca", .rank = 16, .divergence = true});
    expect_valid_row(r);
    EXPECT_GT(r.kl_mean, 0.0);
    EXPECT_GT(r.top1_agreement, 0.0);
    EXPECT_LT(r.top1_agreement, 1.0);
    EXPECT_DOUBLE_EQ(r.ppl, plain.ppl);
}

TEST(AnalysesMethods, FourierRowCountsTheMlpOnly)
{
    const auto r = run({.method = "fourier", .mlp = "linear", .steps = 20});
    expect_valid_row(r);
    EXPECT_EQ(r.method, "fourier");
    EXPECT_EQ(r.parameters, "linear MLP, 20 steps");
    EXPECT_EQ(r.params_after, kD * kD + kD); // METHODS 4: a d -> d linear layer, T itself is not stored
}

TEST(AnalysesMethods, LoraRecoveryLowersPerplexityAndExportsAsFinetune)
{
    const CompressionRequest pca4 = on_model({.method = "pca", .rank = 4});
    CompressionRequest recovered = pca4;
    recovered.lora_rank = 8;
    recovered.lora_steps = 12;
    recovered.train_text = text();
    const auto plain = run(pca4), lora = run(recovered);
    expect_valid_row(lora);
    EXPECT_EQ(lora.parameters, "rank 4 + LoRA r 8, 12 steps");
    EXPECT_LT(std::log(lora.ppl), std::log(plain.ppl) - 0.1) << plain.ppl << " -> " << lora.ppl;

    embedlab::test::TempDir tmp;
    const auto out = tmp / "pca4-lora";
    EXPECT_EQ(embedlab::app::export_compressed(recovered, out.string(), false, false, {}),
              "pca rank 4 + LoRA r 8, 12 steps");
    EXPECT_TRUE(std::filesystem::exists(out / "adapters.safetensors"));
    auto loaded = embedlab::load_model(out, {.need_tokenizer = false});
    ASSERT_NE(loaded.model->lora(), nullptr);
    // METHODS 0: the unmerged adapters are stored values of the row.
    const int64_t adapters = loaded.model->parameter_breakdown().adapters;
    EXPECT_GT(adapters, 0);
    EXPECT_EQ(lora.params_after,
              embedlab::account_low_rank(embedlab::LowRankKind::PCA, kV, kD, 4).params_after + adapters);
    EXPECT_NEAR(perplexity_of(out), lora.ppl, 1e-6 * lora.ppl);
    // Issue 20 item 3: the recorded reconstruction is the recovered table's, the row's cosine.
    const auto manifest = nlohmann::json::parse(embedlab::test::read_text(out / "embedlab.json"));
    EXPECT_NEAR(manifest["reconstruction"]["mean_cosine"].get<double>(), lora.mean_cosine, 1e-9);
    EXPECT_NE(manifest["fit"]["before_recovery"]["reconstruction"]["mean_cosine"].get<double>(),
              lora.mean_cosine);
    EXPECT_FALSE(manifest.contains("before_finetuning"));
}

TEST(AnalysesMethods, NeverTrainsOnEvaluatedTokens)
{
    // The training text is the evaluation text and every id is evaluated: nothing left to train on.
    CompressionRequest r =
        on_model({.method = "pca", .rank = 4, .lora_rank = 4, .lora_steps = 1, .train_text = text()});
    r.eval_tokens = 0;
    try {
        embedlab::app::compress_and_evaluate(r);
        FAIL() << "trained on evaluated tokens";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("is also the evaluation text"), std::string::npos) << e.what();
    }
}

// The window checks a request with embedlab::check_request before queueing it (the
// app has no checker of its own): a bad field of the panel's methods is named, an
// unknown method lists the registry's, and the panel's defaults pass.
TEST(AnalysesMethods, RequestsAreCheckedByTheEngine)
{
    const std::string t = text();
    const std::vector<std::pair<CompressionRequest, std::string>> bad{
        {{.method = "pca", .rank = 0}, "rank"},
        {{.method = "svd", .rank = kD + 1}, "rank"},
        {{.method = "tt", .eps = 1}, "eps"},
        {{.method = "lle", .freq_text = t, .keep_ratio = 0, .k = 8}, "keep_ratio"},
        {{.method = "lle", .freq_text = t, .keep_ratio = 0.5, .k = 0}, "k "},
        {{.method = "lle", .keep_ratio = 0.5, .k = 8}, "freq_text"},
        {{.method = "fourier", .mlp = "relu", .steps = 300}, "mlp"},
        {{.method = "fourier", .steps = 0}, "steps"},
        {{.method = "flat", .remaining = 0, .calib_text = t}, "remaining"},
        {{.method = "flat", .remaining = 1.5, .calib_text = t}, "remaining"},
        {{.method = "flat", .remaining = 0.5, .allocation = "random", .calib_text = t}, "allocation"},
        {{.method = "flat", .remaining = 0.5, .calib_text = t, .samples = 0}, "samples"},
        {{.method = "flat", .remaining = 0.5, .calib_text = t, .seqlen = -1}, "seqlen"},
        {{.method = "pca", .rank = 4, .lora_rank = -1}, "lora_rank"},
        {{.method = "flat", .remaining = 0.5, .calib_text = t, .lora_rank = 4, .train_text = t}, "lora_rank"},
        {{.method = "pca", .rank = 4, .lora_rank = 4, .lora_steps = 0, .train_text = t}, "lora_steps"},
        {{.method = "pca", .rank = 4, .eval_tokens = -1}, "eval_tokens"},
        {{.method = "bogus"}, embedlab::method_names()},
    };
    for (const auto& [request, field] : bad) {
        try {
            embedlab::check_request(on_model(request), kD);
            ADD_FAILURE() << request.method << ": accepted, expected an error naming " << field;
        } catch (const embedlab::InputError& e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        }
    }
    // Every method of the registry is named when the method is not one.
    try {
        embedlab::check_request(on_model({.method = "bogus"}), kD);
    } catch (const embedlab::InputError& e) {
        for (const auto& m : embedlab::method_registry())
            EXPECT_NE(std::string(e.what()).find(m.name), std::string::npos) << m.name << " in " << e.what();
    }
    // The method panel's initial choices of every method pass.
    for (const CompressionRequest& good :
         {CompressionRequest{.method = "pca", .rank = kD}, CompressionRequest{.method = "tt", .eps = 0.3},
          CompressionRequest{.method = "lle", .freq_text = t, .keep_ratio = 0.5, .k = 8},
          CompressionRequest{.method = "fourier",
          .mlp = "linear",
          .steps = 300,
          .lora_rank = 8,
          .lora_steps = 100,
          .train_text = t},
          CompressionRequest{
              .method = "flat", .remaining = 0.5, .calib_text = t, .samples = 32, .seqlen = 128},
          CompressionRequest{.method = "svd", .rank = 1}})
        EXPECT_NO_THROW(embedlab::check_request(on_model(good), kD)) << good.method;
}

TEST(AnalysesMethods, CancelDuringRecoveryThrowsCancelledAndWritesNothing)
{
    const CompressionRequest recovered =
        on_model({.method = "pca", .rank = 4, .lora_rank = 4, .lora_steps = 12, .train_text = text()});
    // Past the fit, inside the training stage.
    int64_t last = 0;
    const auto stop_in_training = [&](int64_t done, int64_t total) {
        last = done;
        return done * 2 < total;
    };
    EXPECT_THROW(run(recovered, stop_in_training), embedlab::Cancelled);
    EXPECT_GE(last, 500);
    embedlab::test::TempDir tmp;
    const auto out = tmp / "cancelled";
    EXPECT_THROW(embedlab::app::export_compressed(recovered, out.string(), false, false, stop_in_training),
                 embedlab::Cancelled);
    EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

} // namespace

namespace {

// embedlab.json without what differs between two writes of the same model: the
// times (created, *seconds*, tokens_per_second).
nlohmann::json without_times(nlohmann::json j)
{
    if (j.is_object()) {
        nlohmann::json out = nlohmann::json::object();
        for (auto& [key, value] : j.items())
            if (key != "created" && key.find("seconds") == std::string::npos && key != "tokens_per_second")
                out[key] = without_times(value);
        return out;
    }
    if (j.is_array())
        for (auto& x : j)
            x = without_times(x);
    return j;
}

} // namespace

// The workbench's export and `embedlab-cli compress --out` go through one engine
// call (experiment.hpp): the same request writes the same manifest.
TEST(AnalysesMethods, ExportWritesTheManifestCompressWrites)
{
    embedlab::test::TempDir dir;
    // Evaluation runs five times per method here: a 6 kB head of the text keeps
    // the comparison exact and the test short.
    const auto full = embedlab::test::read_text(text());
    const auto eval_text = (dir / "eval.txt").string();
    std::ofstream(eval_text, std::ios::binary) << full.substr(0, full.find('\n', 6000) + 1);
    struct Case {
        CompressionRequest gui;
        std::vector<std::string> cli;
    };
    const std::vector<Case> cases{
        {{.method = "pca", .rank = 16}, {"--method", "pca", "--rank", "16"}},
        {{.method = "lle", .freq_text = text(), .keep_ratio = 0.5, .k = 4},
         {"--method", "lle", "--freq-text", text(), "--keep-ratio", "0.5", "--k", "4"}},
        {{.method = "flat", .remaining = 0.5, .calib_text = text(), .samples = 8, .seqlen = 64},
         {"--method", "flat", "--remaining", "0.5", "--calib-text", text(), "--samples", "8", "--seqlen",
          "64"}},
    };
    for (const auto& c : cases) {
        CompressionRequest gui = c.gui;
        gui.model = model();
        gui.eval_tokens = 0; // compress --eval-text evaluates the whole text
        gui.eval_text = eval_text;
        const auto row = embedlab::app::compress_and_evaluate(gui);
        const auto gui_dir = dir / ("gui-" + gui.method);
        embedlab::app::export_compressed(gui, gui_dir.string(), false, false, {});
        const auto cli_dir = dir / ("cli-" + gui.method);
        std::vector<std::string> args{"compress", model()};
        args.insert(args.end(), c.cli.begin(), c.cli.end());
        for (const std::string& a : {std::string("--eval-text"), eval_text, std::string("--out"),
                                     cli_dir.string(), std::string("--quiet")})
            args.push_back(a);
        const auto r = embedlab::test::cli(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const auto from_gui = nlohmann::json::parse(embedlab::test::read_text(gui_dir / "embedlab.json"));
        const auto from_cli = nlohmann::json::parse(embedlab::test::read_text(cli_dir / "embedlab.json"));
        EXPECT_EQ(without_times(from_gui).dump(1), without_times(from_cli).dump(1)) << gui.method;
        EXPECT_DOUBLE_EQ(from_gui["evaluation"]["compressed"]["ppl"].get<double>(), row.ppl) << gui.method;
    }
}
