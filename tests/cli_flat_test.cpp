// FLAT-LLM through embedlab-cli: importance, allocate, compress -> eval ->
// reload on the bundled tinygpt2-f16 (fused qkv with biases) and on tinyllama
// (grouped-query attention, from ../shared), sweep, bad input.
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_in_process.hpp"
#include "cli_support.hpp"

namespace {

using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::json_of;
namespace fs = std::filesystem;

// The calibration text (fit) and the evaluation text (3,000 characters: every check here is
// an equality or a bound that holds on any text; 6,000 doubled each evaluation's cost).
struct FlatTexts : embedlab::test::TextSlices {
    FlatTexts() : TextSlices(30000, 3000) {}
};

std::vector<std::string> calib_args(const FlatTexts& t)
{
    return {"--calib-text", t.fit, "--samples", "24", "--seqlen", "64", "--seed", "7", "--quiet"};
}

nlohmann::json compress_flat(const FlatTexts& t, const std::string& model, const std::string& remaining,
                             const std::string& out, std::vector<std::string> extra = {})
{
    std::vector<std::string> args{"compress", model,   "--method", "flat",        "--remaining",
                                  remaining,  "--out", out,        "--eval-text", t.eval,
                                  "--ctx",    "64",    "--json"};
    for (const auto& a : calib_args(t))
        args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    return json_of(cli(args));
}

nlohmann::json eval_dir(const FlatTexts& t, const std::string& dir)
{
    return json_of(cli({"eval", dir, "--text", t.eval, "--ctx", "64", "--json", "--quiet"}));
}

std::string write_file(const embedlab::test::TempDir& dir, const std::string& name, const std::string& text)
{
    std::ofstream(dir / name) << text;
    return (dir / name).string();
}

double sum(const nlohmann::json& a)
{
    double s = 0;
    for (const auto& x : a)
        s += x.get<double>();
    return s;
}

// Remaining 1 keeps the full basis: the perplexity is the original's. At 0.5 the
// directory reloads to exactly the perplexity measured before saving.
void round_trip(const std::string& model, int64_t kv_heads)
{
    FlatTexts t;
    const auto full = compress_flat(t, model, "1", (t.dir / "full").string());
    ASSERT_TRUE(full.is_object());
    const double base = full["evaluation"]["baseline"]["ppl"];
    EXPECT_NEAR(full["evaluation"]["compressed"]["ppl"].get<double>(), base, 1e-4 * base);
    EXPECT_NEAR(eval_dir(t, (t.dir / "full").string())["ppl"].get<double>(), base, 1e-4 * base);

    const auto half = compress_flat(t, model, "0.5", (t.dir / "half").string());
    ASSERT_TRUE(half.is_object());
    EXPECT_EQ(half["method"], "flat");
    EXPECT_EQ(half["parameters"]["allocation"], "iprs");
    const auto dims = half["value_head_dims"];
    ASSERT_EQ(dims.size(), 4u);
    double w_sum = 0;
    for (const auto& layer : half["layers"])
        w_sum += layer["w"].get<double>();
    EXPECT_NEAR(w_sum, 4 * 0.5, 1e-9); // IPRS keeps the budget L (1 - s)
    for (size_t l = 0; l < 4; ++l) {
        const auto& layer = half["layers"][l];
        EXPECT_EQ(layer["rank"], dims[l]);
        EXPECT_EQ(layer["head_spectra"].size(), static_cast<size_t>(kv_heads));
        EXPECT_GE(layer["importance"].get<double>(), 0.0);
        EXPECT_LE(layer["importance"].get<double>(), 0.5);
    }
    EXPECT_LT(half["model_params"]["after"].get<int64_t>(), half["model_params"]["before"].get<int64_t>());
    EXPECT_EQ(half["calibration"]["samples"], 24);
    EXPECT_EQ(half["calibration"]["seed"], 7);
    EXPECT_EQ(half["calibration"]["text"]["sha256"].get<std::string>().size(), 64u);
    const double measured = half["evaluation"]["compressed"]["ppl"];
    // Dropped value directions change the model (on tinyllama the change even helps a little).
    EXPECT_GT(std::abs(measured - base), 1e-4 * base);
    const auto back = eval_dir(t, (t.dir / "half").string());
    EXPECT_NEAR(back["ppl"].get<double>(), measured, 1e-5 * measured);
    EXPECT_EQ(back["value_head_dims"], dims);
    EXPECT_NEAR(back["delta_ln_ppl"].get<double>(), std::log(measured / base), 1e-5);
    // The same seed gives the same allocation and model.
    const auto again = compress_flat(t, model, "0.5", (t.dir / "again").string());
    EXPECT_EQ(again["value_head_dims"], dims);
    EXPECT_EQ(again["evaluation"]["compressed"]["ppl"], half["evaluation"]["compressed"]["ppl"]);
}

} // namespace

TEST(CliFlat, Gpt2FusedQkvRoundTrip)
{
    round_trip(std::string(EMBEDLAB_SOURCE_DIR) + "/resources/models/tinygpt2-f16", 4);
}

TEST(CliFlat, LlamaGroupedQueryRoundTripWithMlp)
{
    if (!embedlab::test::have_shared())
        GTEST_SKIP() << "needs ../shared/models/tinyllama";
    const auto model = (embedlab::test::shared_dir() / "models/tinyllama").string();
    round_trip(model, 2);
    // Nystrom MLP at remaining 1 keeps every channel and is exact too.
    FlatTexts t;
    const auto m = compress_flat(t, model, "1", (t.dir / "mlp").string(), {"--mlp"});
    ASSERT_TRUE(m.is_object());
    EXPECT_EQ(m["mlp_widths"], nlohmann::json({352, 352, 352, 352}));
    const double base = m["evaluation"]["baseline"]["ppl"];
    EXPECT_NEAR(m["evaluation"]["compressed"]["ppl"].get<double>(), base, 1e-4 * base);
    const auto half = compress_flat(t, model, "0.5", (t.dir / "mlp-half").string(), {"--mlp"});
    ASSERT_TRUE(half.is_object());
    EXPECT_LT(half["model_params"]["mlp_after"].get<int64_t>(),
              half["model_params"]["mlp_before"].get<int64_t>());
    const auto back = eval_dir(t, (t.dir / "mlp-half").string());
    EXPECT_EQ(back["mlp_widths"], half["mlp_widths"]);
    EXPECT_NEAR(back["ppl"].get<double>(), half["evaluation"]["compressed"]["ppl"].get<double>(), 1e-3);
}

// --target-ratio: the share of the decoder's projection weights to keep (the
// paper's compute_rank.py), MLPs compressed too unless --no-mlp; the record says
// the target and what was achieved.
TEST(CliFlat, WholeDecoderTargetRatio)
{
    FlatTexts t;
    const std::string model = std::string(EMBEDLAB_SOURCE_DIR) + "/resources/models/tinygpt2-f16";
    // Refusals run in this process (cli_here), as everywhere: a process start costs more.
    auto run = [&](const std::string& out, std::vector<std::string> extra, bool refusal = false) {
        std::vector<std::string> args{"compress", model, "--method", "flat", "--out", (t.dir / out).string(),
                                      "--json"};
        for (const auto& a : calib_args(t))
            args.push_back(a);
        args.insert(args.end(), extra.begin(), extra.end());
        return refusal ? cli_here(args) : cli(args);
    };
    const auto j = json_of(run("target", {"--target-ratio", "0.7"}));
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["parameters"]["target_ratio"], 0.7);
    EXPECT_EQ(j["parameters"]["mlp"], true);
    const auto& p = j["model_params"];
    EXPECT_LT(p["mlp_after"].get<int64_t>(), p["mlp_before"].get<int64_t>());
    // Ranks are floored per layer (head_dim 32, 512 MLP channels): within 0.03 of the target.
    EXPECT_NEAR(p["decoder_ratio"].get<double>(), 0.7, 0.03);
    EXPECT_EQ(p["decoder_ratio"].get<double>(),
              p["decoder_after"].get<double>() / p["decoder_before"].get<double>());

    // Without the MLPs only V and O shrink: 0.9 is reachable, 0.7 is not.
    const auto v = json_of(run("no-mlp", {"--target-ratio", "0.9", "--no-mlp"}));
    ASSERT_TRUE(v.is_object());
    EXPECT_EQ(v["model_params"]["mlp_after"], v["model_params"]["mlp_before"]);
    EXPECT_NEAR(v["model_params"]["decoder_ratio"].get<double>(), 0.9, 0.03);
    const auto far = run("far", {"--target-ratio", "0.7", "--no-mlp"}, true);
    EXPECT_EQ(far.exit_code, 2);
    EXPECT_NE(far.err.find("reachable targets lie in"), std::string::npos) << far.err;
    EXPECT_FALSE(fs::exists(t.dir / "far"));
    const auto both = run("both", {"--target-ratio", "0.7", "--remaining", "0.5"}, true);
    EXPECT_EQ(both.exit_code, 2);
    EXPECT_NE(both.err.find("one of --remaining R"), std::string::npos) << both.err;
}

TEST(CliFlat, ImportanceFeedsAllocate)
{
    FlatTexts t;
    std::vector<std::string> args{"importance", "--json"};
    for (const auto& a : calib_args(t))
        args.push_back(a);
    const auto imp = json_of(cli(args));
    ASSERT_TRUE(imp.is_object());
    ASSERT_EQ(imp["scores"].size(), 4u);
    EXPECT_EQ(imp["d_head"], 32);
    EXPECT_NEAR(sum(imp["normalised"]), 1.0, 1e-12);
    EXPECT_EQ(imp["value_spectra"][0].size(), 4u);
    EXPECT_EQ(imp["calibration"]["tokens"], 24 * 64);
    const auto file = write_file(t.dir, "importance.json", imp.dump());
    const auto alloc = json_of(cli({"allocate", "--scores", file, "--ratios", "0.3,0.5,0.7,0.9", "--json"}));
    ASSERT_EQ(alloc["allocations"].size(), 4u);
    EXPECT_EQ(alloc["d_head"], 32); // from the importance file
    for (const auto& a : alloc["allocations"]) {
        EXPECT_NEAR(sum(a["w"]), 4 * a["remaining"].get<double>(), 1e-9);
        for (size_t l = 0; l < 4; ++l)
            EXPECT_EQ(
                a["ranks"][l].get<int64_t>(),
                std::max<int64_t>(1, static_cast<int64_t>(std::floor(a["w"][l].get<double>() * 32 + 1e-9))));
    }
}

TEST(CliFlat, AllocateOnGivenScores)
{
    embedlab::test::TempDir dir;
    const auto file = write_file(dir, "s.json", R"({"scores": [1, 1, 1, 5]})");
    const auto j =
        json_of(cli({"allocate", "--scores", file, "--ratios", "0.5", "--d-head", "64", "--json"}));
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["allocations"][0]["ranks"], nlohmann::json({21, 21, 21, 64}));
    EXPECT_DOUBLE_EQ(j["allocations"][0]["w"][3].get<double>(), 1.0);
    const auto u = json_of(cli({"allocate", "--scores", file, "--ratios", "0.5", "--d-head", "64",
                                "--allocation", "uniform", "--json"}));
    EXPECT_EQ(u["allocations"][0]["ranks"], nlohmann::json({32, 32, 32, 32}));
    const auto text = cli({"allocate", "--scores", file, "--ratios", "0.5,0.9", "--d-head", "64"});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("layer 3"), std::string::npos) << text.out;

    auto error_of = [&](std::vector<std::string> args) {
        const auto r = cli_here(args);
        EXPECT_EQ(r.exit_code, 2) << r.out;
        return r.err;
    };
    EXPECT_NE(
        error_of({"allocate", "--scores", file, "--ratios", "0", "--d-head", "64"}).find("outside (0, 1]"),
        std::string::npos);
    EXPECT_NE(error_of({"allocate", "--scores", file, "--ratios", "0.5"}).find("--d-head"),
              std::string::npos);
    const auto bad = write_file(dir, "bad.json", R"({"scores": [1, -1]})");
    EXPECT_NE(error_of({"allocate", "--scores", bad, "--ratios", "0.5", "--d-head", "8"}).find("bad.json"),
              std::string::npos);
    const auto broken = write_file(dir, "broken.json", R"({"scores": [1, )");
    EXPECT_NE(
        error_of({"allocate", "--scores", broken, "--ratios", "0.5", "--d-head", "8"}).find("broken.json"),
        std::string::npos);
}

TEST(CliFlat, SweepPrintsBothAllocations)
{
    FlatTexts t;
    // Each row is an experiment request (issue 37), so --divergence adds its columns as on
    // every other sweep.
    std::vector<std::string> args{"sweep", "--method", "flat", "--remainings", "1,0.5",       "--eval-text",
                                  t.eval,  "--ctx",    "64",   "--json",       "--divergence"};
    for (const auto& a : calib_args(t))
        args.push_back(a);
    const auto j = json_of(cli(args));
    ASSERT_EQ(j["rows"].size(), 4u);
    for (const auto& row : j["rows"]) {
        ASSERT_TRUE(row.contains("kl_mean")) << row;
        EXPECT_GE(row["kl_mean"].get<double>(), 0.0);
    }
    EXPECT_NEAR(j["rows"][0]["kl_mean"].get<double>(), 0.0, 1e-6); // remaining 1 keeps the model
    EXPECT_EQ(j["rows"][0]["allocation"], "iprs");
    EXPECT_EQ(j["rows"][1]["allocation"], "uniform");
    EXPECT_EQ(j["rows"][3]["ranks"], nlohmann::json({16, 16, 16, 16}));
    const double base = j["baseline_ppl"];
    EXPECT_NEAR(j["rows"][0]["ppl"].get<double>(), base, 1e-4 * base);
    EXPECT_NEAR(j["rows"][2]["ratio"].get<double>(),
                static_cast<double>(j["rows"][2]["params"].get<int64_t>()) / j["params_before"].get<double>(),
                1e-12);
}

// Issue 36 item 3: sweep offers the decoder target as compress does (the MLPs too,
// by the registry's default), and each row's ratio of the part compressed counts them.
TEST(CliFlat, SweepByTargetRatioCountsTheMlpsItCompresses)
{
    FlatTexts t;
    std::vector<std::string> args{"sweep", "--method", "flat", "--target-ratios", "0.8",  "--eval-text",
                                  t.eval,  "--ctx",    "64",   "--allocation",    "iprs", "--json"};
    for (const auto& a : calib_args(t))
        args.push_back(a);
    const auto j = json_of(cli(args));
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["part"], "attention_values_and_mlp");
    ASSERT_EQ(j["rows"].size(), 1u);
    const auto& row = j["rows"][0];
    EXPECT_EQ(row["target_ratio"], 0.8);
    EXPECT_NEAR(row["decoder_ratio"].get<double>(), 0.8, 0.03);
    EXPECT_FALSE(row["mlp_widths"].is_null());
    EXPECT_DOUBLE_EQ(row["part_ratio"].get<double>(),
                     row["part_params_after"].get<double>() / row["part_params_before"].get<double>());
    EXPECT_LT(row["part_ratio"].get<double>(), 0.8); // Q and K, never narrowed, are not in the part
    args.push_back("--no-mlp");
    args[4] = "0.95";
    const auto v = json_of(cli(args));
    ASSERT_TRUE(v.is_object());
    EXPECT_EQ(v["part"], "attention_values");
    EXPECT_FALSE(v["rows"][0].contains("mlp_widths")); // const json: [] on a missing key is UB
}

TEST(CliFlat, BadInputIsNamed)
{
    FlatTexts t;
    embedlab::test::TempDir out;
    auto error_of = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"compress", "--method",           "flat",
                                      "--out",    (out / "x").string(), "--quiet"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = cli_here(args);
        EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
        EXPECT_FALSE(fs::exists(out / "x"));
        return r.err;
    };
    EXPECT_NE(error_of({"--remaining", "0", "--calib-text", t.fit}).find("outside (0, 1]"),
              std::string::npos);
    EXPECT_NE(error_of({"--remaining", "1.5", "--calib-text", t.fit}).find("outside (0, 1]"),
              std::string::npos);
    EXPECT_NE(error_of({"--remaining", "0.5"}).find("--calib-text"), std::string::npos);
    EXPECT_NE(error_of({"--calib-text", t.fit}).find("--remaining"), std::string::npos);
    const auto many = error_of({"--remaining", "0.5", "--calib-text", t.fit, "--samples", "100000"});
    EXPECT_NE(many.find(t.fit), std::string::npos) << many;
    EXPECT_NE(many.find("distinct windows"), std::string::npos) << many;
    const auto ctx = error_of({"--remaining", "0.5", "--calib-text", t.fit, "--seqlen", "257"});
    EXPECT_NE(ctx.find("--seqlen"), std::string::npos) << ctx;
    EXPECT_NE(
        error_of({"--remaining", "0.5", "--calib-text", t.fit, "--dense"}).find("--dense does not apply"),
        std::string::npos);
    EXPECT_NE(
        error_of({"--remaining", "0.5", "--calib-text", t.fit, "--allocation", "greedy"}).find("greedy"),
        std::string::npos);
    const auto empty = write_file(t.dir, "empty.txt", "");
    EXPECT_NE(error_of({"--remaining", "0.5", "--calib-text", empty}).find("empty.txt"), std::string::npos);
}
