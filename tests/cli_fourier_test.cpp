// The fourier method through embedlab-cli on the bundled tinygpt2-f16 (tied head):
// compress -> eval -> fourier-map, the text output, and bad flags.
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_in_process.hpp"
#include "cli_support.hpp"

namespace {

using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::CliRun;
using embedlab::test::json_of; // shared in cli_support.hpp
namespace fs = std::filesystem;

// About 350 tokens of the bundled sample text: a few seconds per evaluation.
std::string short_text_path(const embedlab::test::TempDir& dir)
{
    const auto text =
        embedlab::test::read_text(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt");
    std::ofstream(dir / "short.txt") << text.substr(0, 1500);
    return (dir / "short.txt").string();
}

// Exit code 2 and a message naming `flag`.
void expect_bad(const std::vector<std::string>& args, const std::string& flag)
{
    const auto r = cli_here(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
}

} // namespace

TEST(CliFourier, CompressEvalAndMapRoundTrip)
{
    embedlab::test::TempDir dir;
    const auto text = short_text_path(dir);
    const auto out = (dir / "fourier").string();
    const auto m = json_of(cli({"compress", "--method", "fourier", "--mlp",       "geglu", "--hidden-ratio",
                                "0.25",     "--steps",  "12",      "--fit-batch", "1024",  "--seed",
                                "3",        "--out",    out,       "--eval-text", text,    "--ctx",
                                "64",       "--json",   "--quiet"}));
    ASSERT_TRUE(m.is_object());
    EXPECT_EQ(m["method"], "fourier");
    EXPECT_EQ(m["parameters"]["mlp"], "geglu");
    EXPECT_EQ(m["parameters"]["steps"], 12);
    EXPECT_EQ(m["parameters"]["batch"], 1024);
    EXPECT_EQ(m["parameters"]["seed"], 3);
    EXPECT_EQ(m["seed"], 3);
    // d = 128, h = 32: W_in 64x128 + 64, W_out 128x32 + 128.
    const int64_t params = 64 * 128 + 64 + 128 * 32 + 128;
    EXPECT_EQ(m["fit"]["parameters"], params);
    EXPECT_EQ(m["accounting"]["params_after"], params);
    EXPECT_EQ(m["factor_tensors"]["wte.fourier.w_in"], (std::vector<int64_t>{64, 128}));
    EXPECT_EQ(m["fit"]["loss_curve"]["steps"].size(), 12u);
    EXPECT_EQ(m["fit"]["loss_curve"]["loss"].size(), 12u);
    EXPECT_LT(m["fit"]["final_loss"].get<double>(), m["fit"]["initial_loss"].get<double>());
    EXPECT_EQ(m["fit"]["tied_head"]["rows_rebuilt_per_call"], 50257);
    const double recorded = m["evaluation"]["compressed"]["ppl"];
    EXPECT_GT(recorded, m["evaluation"]["baseline"]["ppl"].get<double>()); // lossy, as expected

    const auto back = json_of(cli({"eval", out, "--text", text, "--ctx", "64", "--json", "--quiet"}));
    EXPECT_EQ(back["embedding"], "fourier");
    EXPECT_NEAR(back["ppl"].get<double>(), recorded, 1e-6 * recorded);

    // The token map of the compressed directory: T, MLP(T), E and the source's rows.
    const auto map = json_of(cli({"fourier-map", out, "--ids", "100:110", "--json"}));
    ASSERT_TRUE(map.is_object());
    EXPECT_EQ(map["features"].size(), 10u);
    EXPECT_EQ(map["features"][0].size(), 128u);
    EXPECT_EQ(map["mlp"].size(), 10u);
    EXPECT_EQ(map["embedding"].size(), 10u);
    EXPECT_EQ(map["original"].size(), 10u);
    EXPECT_EQ(map["tokens"].size(), 10u);
    for (const char* k : {"features", "mlp", "embedding", "original"})
        EXPECT_EQ(map["neighbour_cosine"][k].size(), 9u) << k;
    EXPECT_EQ(map["cosine_to_original"].size(), 10u);
    EXPECT_NEAR(map["x"][0].get<double>(), 2.0 * 100 / 50256 - 1, 1e-12);
    // Neighbouring features are almost parallel: x moves by 2/(V-1).
    EXPECT_GT(map["mean_neighbour_cosine"]["features"].get<double>(), 0.99);
}

TEST(CliFourier, TextOutputAndTheMapOfThePlainModel)
{
    embedlab::test::TempDir dir;
    const auto r = cli({"compress", "--method", "fourier", "--mlp", "linear", "--norm", "--loss", "cosine",
                        "--steps", "5", "--lr", "0.01", "--out", (dir / "lin").string(), "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("cosine loss"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::to_string(128 * 128 + 128 + 128) + " stored parameters"), std::string::npos)
        << r.out;

    const auto map = json_of(cli({"fourier-map", "--ids", "0:4", "--json"}));
    ASSERT_TRUE(map.is_object());
    EXPECT_EQ(map["features"].size(), 4u);
    EXPECT_EQ(map["original"].size(), 4u);
    EXPECT_FALSE(map.contains("embedding")); // no fitted model given
    EXPECT_EQ(map["features"][0][1], -1.0);  // cos(pi x(0)) = cos(-pi)
    // --dir adds the fitted rows to the plain model's map.
    const auto both =
        json_of(cli({"fourier-map", "--dir", (dir / "lin").string(), "--ids", "0:4", "--json"}));
    EXPECT_EQ(both["embedding"].size(), 4u);
    const auto text = cli({"fourier-map", "--ids", "10:20"});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("mean cosine of neighbouring ids"), std::string::npos) << text.out;
}

TEST(CliFourier, BadFlagsNameTheFlag)
{
    embedlab::test::TempDir dir;
    const auto out = (dir / "x").string();
    auto compress = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"compress", "--method", "fourier", "--out", out, "--quiet"};
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    };
    expect_bad(compress({"--steps", "10"}), "--mlp");
    expect_bad(compress({"--mlp", "relu", "--steps", "10"}), "--mlp");
    expect_bad(compress({"--mlp", "linear"}), "--steps");
    expect_bad(compress({"--mlp", "linear", "--steps", "0"}), "--steps");
    expect_bad(compress({"--mlp", "linear", "--steps", "10", "--lr", "-1"}), "--lr"); // 0: the default
    expect_bad(compress({"--mlp", "linear", "--steps", "10", "--loss", "l1"}), "--loss");
    expect_bad(compress({"--mlp", "linear", "--steps", "10", "--hidden-ratio", "0.5"}), "--hidden-ratio");
    expect_bad(compress({"--mlp", "linear", "--steps", "10", "--seed", "x"}), "--seed");
    expect_bad({"compress", "--method", "pca", "--rank", "4", "--mlp", "linear", "--out", out}, "--mlp");
    EXPECT_FALSE(fs::exists(out)); // nothing written on bad input
    expect_bad({"fourier-map", "--ids", "5:3"}, "--ids");
    expect_bad({"fourier-map", "--ids", "0:5000"}, "--ids");
    expect_bad({"fourier-map"}, "--ids");
}
