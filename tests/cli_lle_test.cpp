// The lle methods through embedlab-cli on the bundled tinygpt2-f16 (tied head):
// compress -> eval -> dense export, the baselines, neighbours, sweep, bad input.
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_in_process.hpp"
#include "cli_support.hpp"

namespace {

using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::CliRun;
using embedlab::test::json_of;
namespace fs = std::filesystem;

// The frequency text (fit) and the evaluation text.
struct Texts : embedlab::test::TextSlices {
    Texts() : TextSlices(20000, 3000) {}
};

// evaluate: with --eval-text (the original's and the compressed model's perplexity); a
// case that asserts only the fit leaves both evaluations out.
nlohmann::json compress(const Texts& t, const std::string& method, const std::string& out,
                        std::vector<std::string> extra = {}, const std::string& model = "",
                        bool evaluate = true)
{
    std::vector<std::string> args{"compress"};
    if (!model.empty())
        args.push_back(model);
    for (const std::string& a :
         {std::string("--method"), method, std::string("--freq-text"), t.fit, std::string("--keep-ratio"),
          std::string("0.5"), std::string("--out"), out, std::string("--json"), std::string("--quiet")})
        args.push_back(a);
    if (evaluate)
        args.insert(args.end(), {"--eval-text", t.eval, "--ctx", "64"});
    args.insert(args.end(), extra.begin(), extra.end());
    return json_of(cli(args));
}

// The directory, and its dense export, evaluate to the perplexity compress recorded.
void expect_reloads_to_the_recorded_perplexity(const Texts& t, const nlohmann::json& m,
                                               const std::string& out)
{
    const double recorded = m["evaluation"]["compressed"]["ppl"];
    const auto back = json_of(cli({"eval", out, "--text", t.eval, "--ctx", "64", "--json", "--quiet"}));
    EXPECT_EQ(back["embedding"], "lle");
    EXPECT_NEAR(back["ppl"].get<double>(), recorded, 1e-6 * recorded);
    const auto dense =
        json_of(cli({"eval", out + "/dense", "--text", t.eval, "--ctx", "64", "--json", "--quiet"}));
    EXPECT_NEAR(dense["ppl"].get<double>(), recorded, 1e-4 * recorded);
}

} // namespace

TEST(CliLle, CompressEvalAndDenseExportRoundTrip)
{
    Texts t;
    const auto out = (t.dir / "lle").string();
    const auto m = compress(t, "lle", out, {"--k", "3", "--dense"});
    ASSERT_TRUE(m.is_object());
    EXPECT_EQ(m["method"], "lle");
    EXPECT_EQ(m["parameters"]["k"], 3);
    EXPECT_EQ(m["frequency_text"]["sha256"].get<std::string>().size(), 64u);
    const int64_t common = m["fit"]["common"], rare = m["fit"]["rare"];
    EXPECT_EQ(common + rare, 50257);
    // Stored values: |V_C| d + |V_R| (2k + 1) (METHODS 2), plus the common ids, one
    // value each (METHODS 0: an index is a stored value; issue 36 item 1).
    EXPECT_EQ(m["accounting"]["params_after"].get<int64_t>(), common * 128 + rare * 7 + common);
    EXPECT_GT(m["evaluation"]["coverage"]["token_coverage"].get<double>(), 0.5);
    EXPECT_LE(m["evaluation"]["coverage"]["token_coverage"].get<double>(), 1.0);
    expect_reloads_to_the_recorded_perplexity(t, m, out);
}

TEST(CliLle, UntiedLlamaRoundTrip)
{
    EMBEDLAB_REQUIRE_SHARED();
    Texts t;
    const auto model = (embedlab::test::shared_dir() / "models/tinyllama").string();
    const auto out = (t.dir / "lle").string();
    const auto m = compress(t, "lle", out, {"--k", "4", "--dense"}, model);
    ASSERT_TRUE(m.is_object());
    EXPECT_EQ(m["fit"]["common"].get<int64_t>() + m["fit"]["rare"].get<int64_t>(), 32000);
    expect_reloads_to_the_recorded_perplexity(t, m, out);
    // The untied head is untouched: only the input lookup changed.
    const auto unk = compress(t, "lle-unk", (t.dir / "unk").string(), {}, model, false);
    EXPECT_GT(m["fit"]["rare_cosine"]["mean"].get<double>(), unk["fit"]["rare_cosine"]["mean"].get<double>());
}

TEST(CliLle, LleBeatsTheUnkBaselineInRareRowCosine)
{
    Texts t;
    // Only the fits are compared: no evaluation.
    const auto unk = compress(t, "lle-unk", (t.dir / "unk").string(), {}, "", false);
    const auto pca = compress(t, "lle-pca", (t.dir / "pca").string(), {"--k", "8"}, "", false);
    ASSERT_TRUE(unk.is_object() && pca.is_object());
    const double unk_cos = unk["fit"]["rare_cosine"]["mean"];
    for (const char* k : {"1", "2", "3", "4", "5"}) {
        const auto lle =
            compress(t, "lle", (t.dir / (std::string("lle") + k)).string(), {"--k", k}, "", false);
        ASSERT_TRUE(lle.is_object());
        EXPECT_GT(lle["fit"]["rare_cosine"]["mean"].get<double>(), unk_cos) << "k = " << k;
    }
    EXPECT_EQ(pca["fit"]["rare"], unk["fit"]["rare"]); // same split for every method
    EXPECT_EQ(pca["fit"]["rare_cosine"]["histogram"].size(), 20u);
}

TEST(CliLle, NeighboursOfARareTokenByString)
{
    Texts t;
    std::ofstream(t.dir / "word.txt") << " quantum";
    const auto tok = json_of(cli({"tokenize", "--text", (t.dir / "word.txt").string(), "--json"}));
    ASSERT_EQ(tok["ids"].size(), 1u) << tok.dump();
    const auto j = json_of(cli({"neighbours", "--freq-text", t.fit, "--keep-ratio", "0.5", "--k", "4",
                                "--token", " quantum", "--json"}));
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["id"], tok["ids"][0]);
    ASSERT_EQ(j["neighbours"].size(), 4u);
    double sum = 0;
    for (size_t i = 0; i < 4; ++i) {
        sum += j["neighbours"][i]["weight"].get<double>();
        EXPECT_GT(j["neighbours"][i]["count"].get<int64_t>(), 0); // neighbours are common, hence seen
    }
    for (size_t i = 1; i < 4; ++i) // best first
        EXPECT_GE(j["neighbours"][i - 1]["cosine"].get<double>(), j["neighbours"][i]["cosine"].get<double>());
    EXPECT_NEAR(sum, 1.0, 1e-6); // float32 weights, as stored
    EXPECT_GT(j["reconstruction_cosine"].get<double>(), 0.0);
    EXPECT_LE(j["reconstruction_cosine"].get<double>(), 1.0 + 1e-9);
    // A common token is refused with a hint.
    const CliRun common =
        cli_here({"neighbours", "--freq-text", t.fit, "--keep-ratio", "0.5", "--id", "262"});
    EXPECT_EQ(common.exit_code, 2);
    EXPECT_NE(common.err.find("is common"), std::string::npos) << common.err;
}

TEST(CliLle, SweepOverKeepRatiosAndK)
{
    Texts t;
    // The shorter slice as both texts: four evaluations of it, not of the 20,000 characters.
    const auto run = cli({"sweep", "--method", "lle", "--freq-text", t.eval, "--keep-ratios", "0.5,1.0",
                          "--ks", "1,3", "--eval-text", t.eval, "--ctx", "64", "--json", "--quiet"});
    // The same text for frequencies and evaluation is allowed, and said (issue 23 item 7).
    EXPECT_NE(run.err.find("warning: --freq-text is also the --eval-text"), std::string::npos) << run.err;
    const auto j = json_of(run);
    ASSERT_EQ(j["rows"].size(), 4u);
    const auto& rows = j["rows"];
    EXPECT_LT(rows[0]["token_coverage"].get<double>(), rows[2]["token_coverage"].get<double>());
    // Every token of the frequency text is common at keep ratio 1.
    EXPECT_DOUBLE_EQ(rows[2]["token_coverage"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(rows[3]["line_coverage"].get<double>(), 1.0);
    for (const auto& r : rows)
        EXPECT_TRUE(std::isfinite(r["ppl"].get<double>()));
}

// --coverage-task/--coverage-data: V_C's coverage of a dataset per example, recorded
// in embedlab.json; the token trade-off delta_ln_ppl / eta_emb rides on the evaluation.
TEST(CliLle, CoverageOfADatasetPerExample)
{
    Texts t;
    std::ofstream(t.dir / "sst2.tsv") << "sentence\tlabel\nThe girl was happy.\t1\n"
                                         "A zyzzyva quixotically xeroxed.\t0\nShe said.\t1\n";
    std::ofstream(t.dir / "mc.jsonl")
        << R"({"context": "The girl", "choices": ["was happy.", "zyzzyva"], "label": 0})"
        << "\n";
    const auto m =
        compress(t, "lle", (t.dir / "lle").string(),
                 {"--k", "3", "--coverage-task", "sst2", "--coverage-data", (t.dir / "sst2.tsv").string()});
    ASSERT_TRUE(m.is_object());
    const auto& e = m["example_coverage"];
    EXPECT_EQ(e["task"], "sst2");
    EXPECT_EQ(e["examples"], 3);
    // The common sentences are made of V_C tokens, the rare words are not.
    EXPECT_NEAR(e["example_coverage"].get<double>(), 2.0 / 3.0, 1e-12);
    // The rare sentence's words split into many pieces outside V_C.
    EXPECT_GT(e["token_coverage"].get<double>(), 0.3);
    EXPECT_LT(e["token_coverage"].get<double>(), 0.9);
    EXPECT_GT(e["tokens"].get<int64_t>(), 8);
    const double eta = m["accounting"]["eta_emb"], delta = m["evaluation"]["delta_ln_ppl"];
    EXPECT_NEAR(m["evaluation"]["delta_ln_ppl_per_eta_emb"].get<double>(), delta / eta, 1e-12);
    const auto mc =
        compress(t, "lle", (t.dir / "lle-mc").string(),
                 {"--k", "3", "--coverage-task", "mc", "--coverage-data", (t.dir / "mc.jsonl").string()});
    ASSERT_TRUE(mc.is_object());
    EXPECT_EQ(mc["example_coverage"]["examples"], 1);
    EXPECT_EQ(mc["example_coverage"]["example_coverage"], 0.0); // its choices hold the rare word
}

TEST(CliLle, BadInputIsRefused)
{
    Texts t;
    std::ofstream(t.dir / "empty.txt").close();
    const auto out = (t.dir / "out").string();
    struct Case {
        std::vector<std::string> args;
        std::string needle;
    };
    const std::vector<Case> cases = {
        {{"compress", "--method", "lle", "--freq-text", t.fit, "--keep-ratio", "0", "--k", "3", "--out", out},
         "keep"},
        {{"compress", "--method", "lle", "--freq-text", t.fit, "--keep-ratio", "0.5", "--out", out}, "--k"},
        {{"compress", "--method", "lle", "--freq-text", t.fit, "--k", "0", "--out", out}, "--k"},
        {{"compress", "--method", "lle", "--k", "3", "--out", out}, "--freq-text"},
        {{"compress", "--method", "lle", "--freq-text", (t.dir / "empty.txt").string(), "--k", "3", "--out",
          out},
         "empty"},
        {{"compress", "--method", "lle", "--freq-text", t.fit, "--k", "3", "--positions", "--out", out},
         "--positions"},
        {{"compress", "--method", "lle", "--freq-text", t.fit, "--k", "3", "--coverage-task", "sst2", "--out",
          out},
         "coverage_data"},
        {{"compress", "--method", "lle", "--freq-text", t.fit, "--k", "3", "--coverage-task", "boolq",
          "--coverage-data", t.fit, "--out", out},
         "must be one of sst2, mc, stsb, cola"},
        {{"compress", "--method", "lle", "--freq-text", t.fit, "--k", "3", "--coverage-task", "sst2",
          "--coverage-data", t.fit, "--out", out},
         "no 'sentence' or 'text' column"},
        {{"compress", "--method", "pca", "--rank", "8", "--coverage-task", "sst2", "--coverage-data", t.fit,
          "--out", out},
         "work with the lle methods"},
    };
    for (const auto& c : cases) {
        const CliRun r = cli_here(c.args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << "stderr: " << r.err << "wanted: " << c.needle;
        EXPECT_FALSE(fs::exists(out));
    }
}
