// compress -> eval -> export -> eval round trips through embedlab-cli, on the
// bundled tinygpt2-f16 (tied head) and, with ../shared, tinyllama (untied).
#include <algorithm>
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

// About 700 tokens of the bundled sample text: enough windows, a few seconds per eval.
fs::path short_text(const embedlab::test::TempDir& dir)
{
    const auto text =
        embedlab::test::read_text(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt");
    std::ofstream(dir / "short.txt") << text.substr(0, 3000);
    return dir / "short.txt";
}

// The rows of `sweep METHOD_ARGS` on the short text (--ctx 64, JSON).
nlohmann::json short_sweep_rows(const std::vector<std::string>& method_args)
{
    embedlab::test::TempDir dir;
    std::vector<std::string> args{"sweep"};
    args.insert(args.end(), method_args.begin(), method_args.end());
    args.insert(args.end(), {"--eval-text", short_text(dir).string(), "--ctx", "64", "--json", "--quiet"});
    return json_of(cli(args))["rows"];
}

// An SST-2 task file of three sentences (--task-limit 2 scores the first two).
const char* kTaskTsv = "sentence\tlabel\nthe acting is superb\t1\nunflinchingly bleak and desperate\t0\n"
                       "a charming journey\t1\n";

// One pca sweep of the bundled model on the short text, read by three cases (each ran its
// own: three processes' starts, baseline evaluations and the rank-16 and rank-128 fits):
// ranks 4, 16, 32 and 128 (= d, lossless), with --divergence and --task sst2 (the
// first two sentences of kTaskTsv). Its text and task file are the cases' own inputs.
struct SharedPcaSweep {
    embedlab::test::TempDir dir;
    std::string text = short_text(dir).string(), tsv = (dir / "dev.tsv").string();
    nlohmann::json rows; // in the order of the ranks
    SharedPcaSweep()
    {
        std::ofstream(tsv) << kTaskTsv;
        rows = json_of(cli({"sweep", "--method", "pca", "--ranks", "4,16,32,128", "--eval-text", text,
                            "--ctx", "64", "--divergence", "--task", "sst2", "--task-data", tsv,
                            "--task-limit", "2", "--json", "--quiet"}))["rows"];
    }
    // The row of `rank`; null (and a failure) if the sweep has none.
    nlohmann::json row(int64_t rank) const
    {
        for (const auto& r : rows)
            if (r.value("rank", int64_t{-1}) == rank)
                return r;
        ADD_FAILURE() << "no rank " << rank << " row in " << rows.dump();
        return nullptr;
    }
};

const SharedPcaSweep& shared_pca_sweep()
{
    static const SharedPcaSweep sweep;
    return sweep;
}

void round_trip(const std::string& model, const std::vector<std::string>& method_args,
                const std::string& method)
{
    SCOPED_TRACE(model + " " + method);
    embedlab::test::TempDir dir;
    const auto text = short_text(dir).string();
    const auto out = (dir / "compressed").string();
    std::vector<std::string> args{"compress"};
    if (!model.empty())
        args.push_back(model);
    args.insert(args.end(), method_args.begin(), method_args.end());
    for (const char* a :
         {"--out", out.c_str(), "--eval-text", text.c_str(), "--ctx", "64", "--dense", "--json", "--quiet"})
        args.emplace_back(a);
    const auto manifest = json_of(cli(args));
    ASSERT_TRUE(manifest.is_object());
    EXPECT_EQ(manifest["method"], method);
    EXPECT_EQ(manifest["format_version"], 1);
    EXPECT_EQ(manifest["dense_export"], "dense");
    EXPECT_EQ(manifest["source"]["files"][0]["sha256"].get<std::string>().size(), 64u);
    EXPECT_LT(manifest["accounting"]["params_after"].get<int64_t>(),
              manifest["accounting"]["params_before"].get<int64_t>());
    EXPECT_GT(manifest["reconstruction"]["mean_cosine"].get<double>(), 0.0);
    // Issue 20: an untied head is not compressed, so a token pays its lookup only.
    const auto& a = manifest["accounting"];
    EXPECT_EQ(a["flops_per_token"], a["tied_head"].get<bool>() ? a["flops_head"] : a["flops_lookup"]);
    if (std::find(method_args.begin(), method_args.end(), "--device") != method_args.end()) {
        EXPECT_EQ(a["energy_model"]["device"]["name"], "raspberry-pi-5");
        EXPECT_LT(a["energy"]["omega_low"].get<double>(), a["energy"]["omega_high"].get<double>());
    }
    EXPECT_LT(manifest["reconstruction"]["relative_frobenius"].get<double>(), 1.0);
    const double recorded = manifest["evaluation"]["compressed"]["ppl"].get<double>();
    const double baseline = manifest["evaluation"]["baseline"]["ppl"].get<double>();
    EXPECT_NEAR(manifest["evaluation"]["delta_ln_ppl"].get<double>(), std::log(recorded / baseline), 1e-9);
    // The file on disk is the manifest that was printed.
    EXPECT_EQ(nlohmann::json::parse(embedlab::test::read_text(dir / "compressed/embedlab.json")), manifest);

    // Reloaded: the factorised model reproduces the recorded perplexity.
    const auto factorised = json_of(cli({"eval", out, "--text", text, "--ctx", "64", "--json", "--quiet"}));
    EXPECT_EQ(factorised["embedding"], method);
    EXPECT_NEAR(factorised["ppl"].get<double>(), recorded, 1e-6 * recorded);
    EXPECT_NEAR(factorised["baseline_ppl"].get<double>(), baseline, 1e-12 * baseline);
    // The dense export, a plain Hugging Face directory, agrees to 1e-4 relative.
    const auto dense =
        json_of(cli({"eval", out + "/dense", "--text", text, "--ctx", "64", "--json", "--quiet"}));
    EXPECT_EQ(dense["embedding"], "dense");
    EXPECT_NEAR(dense["ppl"].get<double>(), recorded, 1e-4 * recorded);
    EXPECT_NE(dense["ppl"].get<double>(), baseline);
}

} // namespace

TEST(CliCompress, TiedGpt2RoundTripsForPcaSvdAndTt)
{
    round_trip("", {"--method", "pca", "--rank", "16", "--positions"}, "pca");
    round_trip("", {"--method", "svd", "--rank", "16"}, "svd");
    round_trip("", {"--method", "tt", "--shape", "4,4,8", "--ranks", "1,4,4,1", "--device", "raspberry-pi-5"},
               "tt");
}

TEST(CliCompress, UntiedLlamaRoundTripsForPcaSvdAndTt)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto model = (embedlab::test::shared_dir() / "models/tinyllama").string();
    round_trip(model, {"--method", "pca", "--rank", "16"}, "pca");
    round_trip(model, {"--method", "svd", "--rank", "16"}, "svd");
    round_trip(model, {"--method", "tt", "--shape", "8,16", "--eps", "0.5"}, "tt");
}

TEST(CliCompress, RankSweepApproachesTheOriginalPerplexity)
{
    const auto& sweep = shared_pca_sweep(); // ranks 4, 16, 32, 128
    ASSERT_EQ(sweep.rows.size(), 4u) << sweep.rows.dump();
    const auto rows = nlohmann::json::array({sweep.row(4), sweep.row(32), sweep.row(128)});
    for (const auto& row : rows)
        ASSERT_TRUE(row.is_object());
    EXPECT_GT(rows[0]["ppl"].get<double>(), rows[1]["ppl"].get<double>());
    EXPECT_GT(rows[1]["ppl"].get<double>(), rows[2]["ppl"].get<double>());
    EXPECT_LT(rows[0]["explained_variance"].get<double>(), rows[1]["explained_variance"].get<double>());
    // Rank d = 128 is lossless: the original perplexity up to float rounding.
    EXPECT_NEAR(rows[2]["delta_ln_ppl"].get<double>(), 0.0, 1e-4);
    EXPECT_NEAR(rows[2]["explained_variance"].get<double>(), 1.0, 1e-9);
    EXPECT_EQ(rows[1]["params"], 50257 * 32 + 32 * 128 + 128);
}

// sweep takes each method's own lists, from its registry row (issue 37): quant's --types
// gives one row per type, named as run; another method's list is refused, naming what
// the method takes.
TEST(CliCompress, SweepTakesEachMethodsOwnListsAndRefusesAnothersByName)
{
    const auto rows = short_sweep_rows({"--method", "quant", "--types", "q8_0,q4_0"});
    embedlab::test::TempDir dir;
    const auto text = short_text(dir).string();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0]["setting"], "type q8_0");
    EXPECT_EQ(rows[1]["type"], "q4_0");
    EXPECT_GT(rows[0]["bytes_after"].get<double>(), rows[1]["bytes_after"].get<double>());
    for (const auto& [args, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"--method", "pca", "--ranks", "4", "--types", "q8_0"},
              "--types does not apply to --method pca"},
             {{"--method", "tucker", "--shape", "8,16", "--ranks", "4", "--eps", "0.5"},
              "--eps does not apply to --method tucker"},
             {{"--method", "fourier"}, "fourier has no sweep"}}) {
        std::vector<std::string> argv{"sweep"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--eval-text", text});
        const CliRun r = cli_here(argv);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err << "wanted: " << needle;
    }
}

TEST(CliCompress, BadArgumentsFailBeforeAnyWorkAndWriteNothing)
{
    embedlab::test::TempDir dir;
    fs::create_directory(dir / "taken");
    const auto out = (dir / "out").string();
    struct Case {
        std::vector<std::string> args;
        std::string needle;
    };
    const std::vector<Case> cases = {
        {{"compress", "--method", "pca", "--rank", "0", "--out", out}, "--rank"},
        {{"compress", "--method", "pca", "--rank", "129", "--out", out}, "--rank"},
        {{"compress", "--method", "pca", "--out", out}, "--rank"},
        {{"compress", "--method", "tt", "--shape", "5,5", "--ranks", "1,2,1", "--out", out}, "product 25"},
        {{"compress", "--method", "tt", "--shape", "4,32", "--ranks", "1,9,1", "--out", out}, "r_1 = 9"},
        {{"compress", "--method", "tt", "--shape", "4,32", "--eps", "1.5", "--out", out}, "--eps"},
        {{"compress", "--method", "tt", "--shape", "4,32", "--out", out}, "--eps"},
        {{"compress", "--method", "zip", "--rank", "3", "--out", out}, "unknown --method"},
        {{"compress", "--method", "pca", "--rank", "3"}, "--out"},
        {{"compress", "--method", "pca", "--rank", "3", "--out", (dir / "taken").string()}, "already exists"},
        {{"sweep", "--method", "pca", "--ranks", "4"}, "--eval-text"},
        {{"compress", "--method", "pca", "--rank", "3", "--device", "pi", "--out", out}, "raspberry-pi-5"},
        // Every method's fields are compress's flags (issue 37); one pca does not take is
        // refused by the request's check, not ignored as before.
        {{"compress", "--method", "pca", "--rank", "3", "--k", "2", "--out", out},
         "k does not apply to method pca"},
    };
    for (const auto& c : cases) {
        const CliRun r = cli_here(c.args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << "stderr: " << r.err << "wanted: " << c.needle;
        EXPECT_FALSE(fs::exists(out)) << c.needle;
    }
    // Nothing but the pre-existing directory is left behind.
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path()))
        ++entries;
    EXPECT_EQ(entries, 1u);
}

// --force replaces only a directory EmbedLab wrote (or an empty one): never an
// unrelated directory, a file, or the input model itself (issue 24, item 7).
TEST(CliCompress, ForceNeverReplacesWhatEmbedLabDidNotWrite)
{
    embedlab::test::TempDir dir;
    fs::create_directory(dir / "mine");
    std::ofstream(dir / "mine" / "thesis.tex") << "years of work";
    std::ofstream(dir / "notes.txt") << "a file";
    fs::copy(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/models/tinygpt2-f16", dir / "model",
             fs::copy_options::recursive);
    const std::string model = (dir / "model").string();
    const std::vector<std::pair<std::string, std::string>> refused{
        {(dir / "mine").string(), "not written by EmbedLab"},
        {(dir / "notes.txt").string(), "not a directory"},
        {model, "is the input"}, // the input model: never an output
    };
    for (const auto& [out, needle] : refused) {
        const auto r =
            cli_here({"compress", model, "--method", "pca", "--rank", "4", "--out", out, "--force"});
        EXPECT_EQ(r.exit_code, 2) << out << ": " << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    }
    EXPECT_EQ(embedlab::test::read_text(dir / "mine" / "thesis.tex"), "years of work");
    EXPECT_EQ(embedlab::test::read_text(dir / "notes.txt"), "a file");
    EXPECT_TRUE(fs::exists(dir / "model" / "model.safetensors"));
    // What compress wrote, it may replace; an empty directory too.
    const auto out = (dir / "pca").string();
    ASSERT_EQ(cli({"compress", model, "--method", "pca", "--rank", "4", "--out", out}).exit_code, 0);
    EXPECT_EQ(cli({"compress", model, "--method", "pca", "--rank", "8", "--out", out, "--force"}).exit_code,
              0);
    fs::create_directory(dir / "empty");
    EXPECT_EQ(cli({"compress", model, "--method", "pca", "--rank", "8", "--out", (dir / "empty").string(),
                   "--force"})
                  .exit_code,
              0);
}

// bench tt with --eps: per-token ranks (the default) store fewer values per token
// than --uniform-ranks on the same seeded table, with the same cores' sizes.
TEST(CliBench, TensorTrainPerTokenRanksStoreLessThanUniform)
{
    const std::vector<std::string> base{"bench", "tt",  "--vocab",  "3000", "--dim",  "64",
                                        "--eps", "0.5", "--repeat", "1",    "--json", "--quiet"};
    const auto own = json_of(cli(base));
    auto uniform_args = base;
    uniform_args.push_back("--uniform-ranks");
    const auto uniform = json_of(cli(uniform_args));
    ASSERT_TRUE(own.is_object() && uniform.is_object());
    EXPECT_EQ(own["rank_mode"], "per_token");
    EXPECT_EQ(uniform["rank_mode"], "uniform");
    EXPECT_EQ(own["ranks"], uniform["ranks"]);
    EXPECT_LT(own["params_per_token"].get<double>(), uniform["params_per_token"].get<double>());
    int64_t padded = 0;
    const auto shape = uniform["shape"], ranks = uniform["ranks"];
    for (size_t k = 0; k < shape.size(); ++k)
        padded += ranks[k].get<int64_t>() * shape[k].get<int64_t>() * ranks[k + 1].get<int64_t>();
    EXPECT_EQ(uniform["params_per_token"].get<double>(), static_cast<double>(padded));
    // A row within its own eps bound either way; uniform ranks fit the table at least as well.
    EXPECT_LE(uniform["relative_frobenius"].get<double>(), own["relative_frobenius"].get<double>() + 1e-9);
    EXPECT_LE(own["relative_frobenius"].get<double>(), 0.5 + 1e-6);
    const auto refused =
        cli_here({"bench", "tt", "--vocab", "3000", "--dim", "64", "--uniform-ranks", "--quiet"});
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.err.find("--uniform-ranks goes with --eps"), std::string::npos) << refused.err;
}

// bench lookup times any table method's lookup through its own fit: the method's flags,
// else its example setting; the setting and parameter count are the method's own.
TEST(CliBench, LookupTakesAnyTableMethodByItsFlags)
{
    const std::vector<std::string> base{"bench",    "lookup", "--vocab", "300", "--dim",  "64",
                                        "--repeat", "2",      "--batch", "64",  "--json", "--quiet"};
    auto with = [&](std::vector<std::string> more, bool in_process = false) {
        auto args = base;
        args.insert(args.end(), more.begin(), more.end());
        return in_process ? cli_here(args) : cli(args);
    };
    const auto quant = json_of(with({"--method", "quant", "--type", "q4_0"}));
    EXPECT_EQ(quant["setting"], "type q4_0");
    EXPECT_EQ(quant["parameters"], 300 * 64);
    EXPECT_GT(quant["relative_frobenius"].get<double>(), 0);
    const auto pca = json_of(with({"--method", "pca", "--rank", "8"}));
    EXPECT_EQ(pca["parameters"], 300 * 8 + 8 * 64 + 64);
    const auto tt = json_of(with({})); // tt's example: the balanced shape, ranks 1,4,..,4,1
    EXPECT_EQ(tt["spec"]["shape"], nlohmann::json({4, 4, 4}));
    EXPECT_EQ(tt["spec"]["ranks"], nlohmann::json({1, 4, 4, 1}));
    struct Refusal {
        std::vector<std::string> args;
        std::string message;
    };
    for (const auto& r : std::vector<Refusal>{
             {{"--method", "lle", "--k", "3"}, "needs token frequencies"},
             {{"--method", "dense", "--rank", "3"}, "--method dense takes no method flags"},
             {{"--method", "tt", "--rank", "3"}, "bench lookup: --rank does not apply to method tt"},
             {{"--method", "quant", "--type", "q4_k"}, "the width d = 64 is not a multiple of 256"}}) {
        const auto refused = with(r.args, true);
        EXPECT_EQ(refused.exit_code, 2) << r.message;
        EXPECT_NE(refused.err.find(r.message), std::string::npos) << refused.err;
    }
}

// --divergence: KL and top-1 against the original, in the record and on the sweep's rows.
TEST(CliCompress, DivergenceFromTheOriginalIsRecorded)
{
    embedlab::test::TempDir dir;
    const auto& shared = shared_pca_sweep();
    const auto& text = shared.text;
    const auto j = json_of(cli({"compress", "--method", "pca", "--rank", "16", "--eval-text", text, "--ctx",
                                "64", "--divergence", "--out", (dir / "pca").string(), "--json", "--quiet"}));
    ASSERT_TRUE(j.is_object());
    const auto& d = j["evaluation"]["divergence"];
    EXPECT_GT(d["kl_mean"].get<double>(), 0.0);
    EXPECT_GT(d["top1_agreement"].get<double>(), 0.0);
    EXPECT_EQ(d["tokens"], j["evaluation"]["tokens"]);
    // The sweep's rank-16 row is the same fit on the same text; rank 128 is lossless.
    ASSERT_EQ(shared.rows.size(), 4u) << shared.rows.dump();
    const auto rows = nlohmann::json::array({shared.row(16), shared.row(128)});
    for (const auto& row : rows)
        ASSERT_TRUE(row.is_object());
    EXPECT_NEAR(rows[0]["kl_mean"].get<double>(), d["kl_mean"].get<double>(), 1e-12);
    EXPECT_LT(rows[1]["kl_mean"].get<double>(), 1e-6); // rank 128 = d: lossless
    EXPECT_EQ(rows[1]["top1_agreement"], 1.0);
    const auto refused = cli_here({"compress", "--method", "pca", "--rank", "16", "--divergence", "--out",
                                   (dir / "no-eval").string(), "--quiet"});
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.err.find("divergence needs an evaluation"), std::string::npos) << refused.err;
    EXPECT_FALSE(fs::exists(dir / "no-eval"));
}

// Issue 19 item 5: compress and sweep --task score a zero-shot task after the
// evaluation, beside the original's accuracy; a task without its file is refused.
TEST(CliCompress, TaskAccuracyIsRecorded)
{
    embedlab::test::TempDir dir;
    const auto& shared = shared_pca_sweep(); // its task file: kTaskTsv
    const auto& tsv = shared.tsv;
    // Without a perplexity evaluation, the task alone.
    const auto j =
        json_of(cli({"compress", "--method", "pca", "--rank", "16", "--task", "sst2", "--task-data", tsv,
                     "--task-limit", "2", "--out", (dir / "pca").string(), "--json", "--quiet"}));
    ASSERT_TRUE(j.is_object());
    EXPECT_FALSE(j["evaluation"].contains("compressed")) << "no perplexity asked for";
    const auto& t = j["evaluation"]["task"];
    EXPECT_EQ(t["name"], "sst2");
    EXPECT_EQ(t["n"], 2);
    EXPECT_GE(t["accuracy"].get<double>(), 0.0);
    EXPECT_TRUE(t["original"]["accuracy"].is_number());
    // sweep --task (the shared sweep's rank-16 row): the same accuracy on the same sentences.
    const auto row = shared.row(16);
    ASSERT_TRUE(row.is_object());
    EXPECT_EQ(row["task_accuracy"], t["accuracy"]);
    EXPECT_EQ(row["task_n"], 2);
    const auto refused = cli_here({"compress", "--method", "pca", "--rank", "16", "--task", "sst2", "--out",
                                   (dir / "no-data").string(), "--quiet"});
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.err.find("task_data is required"), std::string::npos) << refused.err;
    EXPECT_FALSE(fs::exists(dir / "no-data"));
}
