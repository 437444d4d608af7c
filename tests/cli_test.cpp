// embedlab-cli as users script it: JSON fields, exit codes, one-line errors.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "cli_in_process.hpp"
#include "cli_support.hpp"

namespace {

using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::CliRun;

size_t line_count(const std::string& s)
{
    size_t n = 0;
    for (char c : s)
        n += c == '\n';
    return n;
}

TEST(Cli, InspectTheBundledDefaultModel)
{
    const CliRun r = cli({"inspect", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["format"], "huggingface");
    EXPECT_EQ(j["architecture"], "gpt2");
    EXPECT_EQ(j["vocab_size"], 50257);
    EXPECT_EQ(j["hidden_size"], 128);
    EXPECT_EQ(j["layers"], 4);
    EXPECT_EQ(j["heads"], 4);
    EXPECT_EQ(j["kv_heads"], 4);
    EXPECT_EQ(j["tied_embeddings"], true);
    EXPECT_EQ(j["dtype"], "F16");
    EXPECT_EQ(j["parameters"]["counts"]["token_embedding"], 50257 * 128);
    EXPECT_EQ(j["parameters"]["counts"]["output_head"], 0);
    EXPECT_GT(j["parameters"]["share_percent"]["token_embedding"].get<double>(), 85.0);
    EXPECT_EQ(j["sha256"].get<std::string>().size(), 64u);
    EXPECT_EQ(j["tokenizer"]["kind"], "gpt2-bpe");
}

TEST(Cli, EvalJsonHasTheContractFields)
{
    embedlab::test::TempDir dir;
    std::ofstream(dir / "t.txt") << "Once upon a time, there was a little robot who wanted to play. "
                                    "It looked at the sun and smiled.";
    const CliRun r = cli({"eval", "--text", (dir / "t.txt").string(), "--ctx", "8", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    for (const char* field :
         {"tokens", "nll_per_token", "ppl", "ctx", "stride", "seconds", "tokens_per_second"})
        EXPECT_TRUE(j.contains(field)) << field;
    EXPECT_EQ(j["ctx"], 8);
    EXPECT_EQ(j["stride"], 8);
    EXPECT_NEAR(j["ppl"].get<double>(), std::exp(j["nll_per_token"].get<double>()),
                1e-6 * j["ppl"].get<double>());
    // Bits per byte (issue 60): over the bytes after the first token ("Once", 4 bytes).
    const std::string text = embedlab::test::read_text(dir / "t.txt");
    EXPECT_EQ(j["scored_bytes"], int64_t(text.size()) - 4);
    EXPECT_NEAR(j["bits_per_byte"].get<double>(),
                j["nll_per_token"].get<double>() * j["tokens"].get<double>() / std::log(2.0) /
                    double(text.size() - 4),
                1e-9);
}

TEST(Cli, TokenizeAndEvalOfIdsAgree)
{
    embedlab::test::TempDir dir;
    std::ofstream(dir / "t.txt") << "The little dog ran to the park and found a red ball.";
    const CliRun tok = cli({"tokenize", "--text", (dir / "t.txt").string(), "--json"});
    ASSERT_EQ(tok.exit_code, 0) << tok.err;
    std::ofstream(dir / "ids.json") << tok.out;
    const CliRun a = cli({"eval", "--text", (dir / "t.txt").string(), "--json"});
    const CliRun b = cli({"eval", "--ids", (dir / "ids.json").string(), "--json"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["ppl"], nlohmann::json::parse(b.out)["ppl"]);
}

// eval --reference: KL and top-1 against the original; the bundled model (default
// MODEL) against an SVD of itself, and against itself (exactly 0 and 1).
TEST(Cli, EvalAgainstAReferenceReportsDivergence)
{
    embedlab::test::TempDir dir;
    std::ofstream(dir / "t.txt") << "Once upon a time, there was a little robot who wanted to play. "
                                    "It looked at the sun and smiled, and the sun smiled back at it.";
    const std::string model = std::string(EMBEDLAB_SOURCE_DIR) + "/resources/models/tinygpt2-f16";
    ASSERT_EQ(
        cli({"compress", model, "--method", "svd", "--rank", "8", "--out", (dir / "svd").string(), "--quiet"})
            .exit_code,
        0);
    const CliRun r = cli({"eval", (dir / "svd").string(), "--text", (dir / "t.txt").string(), "--ctx", "16",
                          "--reference", model, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["kl_mean"].get<double>(), 0.0);
    EXPECT_GT(j["top1_agreement"].get<double>(), 0.0);
    EXPECT_LE(j["top1_agreement"].get<double>(), 1.0);
    EXPECT_NEAR(j["delta_ln_ppl"].get<double>(),
                std::log(j["ppl"].get<double>()) - std::log(j["reference_ppl"].get<double>()), 1e-5);
    EXPECT_EQ(j["window_kl_mean"].size(), j["windows"].get<size_t>());
    const CliRun self = cli(
        {"eval", model, "--text", (dir / "t.txt").string(), "--ctx", "16", "--reference", model, "--json"});
    ASSERT_EQ(self.exit_code, 0) << self.err;
    EXPECT_EQ(nlohmann::json::parse(self.out)["kl_mean"].get<double>(), 0.0);
    EXPECT_EQ(nlohmann::json::parse(self.out)["top1_agreement"].get<double>(), 1.0);
    const CliRun other = cli_here({"eval", model, "--text", (dir / "t.txt").string(), "--reference",
                                   std::string(EMBEDLAB_SOURCE_DIR) + "/resources/models/stories260K.gguf"});
    EXPECT_EQ(other.exit_code, 2);
    EXPECT_NE(other.err.find("tokenize"), std::string::npos) << other.err;
}

// Bad input: exit code 2 and one line on stderr naming the file and the problem.
// libgomp reads OMP_WAIT_POLICY once, as the program loads; the CLI restarts
// itself with PASSIVE so idle OpenMP threads do not spin on OpenBLAS's cores.
// GOMP_SPINCOUNT (OMP_DISPLAY_ENV=VERBOSE) is what libgomp actually uses: 0 when
// passive, 300000 by default (its display shows PASSIVE for the default too).
TEST(Cli, RestartsWithAPassiveOpenmpWaitPolicyUnlessTheUserChoseOne)
{
    const std::vector<std::string> account = {"account", "--method", "pca",    "--vocab", "100",
                                              "--dim",   "8",        "--rank", "2"};
    const auto last_spin_count = [](const std::string& err) {
        const std::string key = "GOMP_SPINCOUNT = '";
        const auto at = err.rfind(key);
        return at == std::string::npos
                   ? std::string("absent")
                   : err.substr(at + key.size(), err.find('\'', at + key.size()) - at - key.size());
    };
    const auto passive = cli(account, {"-u", "OMP_WAIT_POLICY", "OMP_DISPLAY_ENV=VERBOSE"});
    ASSERT_EQ(passive.exit_code, 0) << passive.err;
    EXPECT_EQ(last_spin_count(passive.err), "0") << passive.err;

    const auto active = cli(account, {"OMP_WAIT_POLICY=ACTIVE", "OMP_DISPLAY_ENV=VERBOSE"});
    ASSERT_EQ(active.exit_code, 0) << active.err;
    EXPECT_NE(last_spin_count(active.err), "0") << active.err;
    EXPECT_NE(active.err.find("OMP_WAIT_POLICY = 'ACTIVE'"), std::string::npos) << active.err;
}

TEST(Cli, BadInputExitsWithTwoAndOneClearLine)
{
    embedlab::test::TempDir dir;
    std::ofstream(dir / "empty.txt").close();
    std::ofstream(dir / "notes.md") << "hello there, world";
    std::ofstream(dir / "one.txt") << "hello";
    std::filesystem::create_directory(dir / "nomodel");
    std::filesystem::create_directory(dir / "loop");
    std::filesystem::create_symlink("config.json", dir / "loop" / "config.json"); // points at itself
    struct Case {
        std::vector<std::string> args;
        std::string needle;
    };
    const std::vector<Case> cases = {
        {{"eval", "--text", (dir / "empty.txt").string()}, "empty.txt: the text is empty"},
        {{"eval", "--text", (dir / "missing.txt").string()}, "missing.txt"},
        // One token: named by its file (issue 24 item 15).
        {{"eval", "--text", (dir / "one.txt").string()}, "one.txt: has 1 token(s)"},
        {{"eval", "--text", (dir / "notes.md").string(), "--ctx", "0"}, "--ctx"},
        {{"eval", "--text", (dir / "notes.md").string(), "--ctx", "4000"}, "context"},
        // RoPE models too (issue 24, item 11: this was a 50 GB allocation and a backtrace).
        {{"eval", std::string(EMBEDLAB_SOURCE_DIR) + "/resources/models/stories260K.gguf", "--text",
          (dir / "notes.md").string(), "--ctx", "100000"},
         "2048-token context the model was trained for"},
        {{"eval", "--text", (dir / "notes.md").string(), "--ctx", "abc"}, "--ctx expects an integer"},
        {{"eval"}, "--text"},
        {{"eval", "--text", "x", "--bogus"}, "unknown option --bogus"},
        {{"inspect", (dir / "nomodel").string()}, "nomodel"},
        {{"inspect", (dir / "notes.md").string()}, "notes.md"},
        {{"frobnicate"}, "unknown command"},
        // Issue 24, item 15: these were "internal error", exit 1.
        {{"inspect", (dir / "loop").string()}, "config.json"},
        {{"compress", "--method", "svd", "--rank", "8", "--out", ""}, "output directory name is empty"},
    };
    for (const auto& c : cases) {
        const CliRun r = cli_here(c.args);
        EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << r.err;
        EXPECT_EQ(line_count(r.err), 1u) << r.err;
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << "stderr: " << r.err << "wanted: " << c.needle;
        EXPECT_TRUE(r.out.empty()) << r.out;
    }
}

TEST(Cli, AccountPrintsTableTwoWithoutAModel)
{
    const CliRun r = cli({"account", "--method", "pca", "--vocab", "50257", "--dim", "768", "--rank",
                          "64,128,256,512", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["results"].size(), 4u);
    const double params[] = {3.27, 6.53, 13.06, 26.13}, flops[] = {6.53, 13.06, 26.13, 52.25};
    for (int i = 0; i < 4; ++i) {
        EXPECT_NEAR(j["results"][i]["params_after"].get<double>() / 1e6, params[i], 0.005);
        EXPECT_NEAR(j["results"][i]["flops_per_token"].get<double>() / 1e6, flops[i], 0.005);
        EXPECT_NEAR(j["results"][i]["params_before"].get<double>() / 1e6, 38.60, 0.005);
    }
    // Untied (tinyllama, k = 64): the lookup, 2 d k + d, not the head's 4.1M.
    const CliRun untied = cli({"account", "--method", "pca", "--vocab", "32000", "--dim", "128", "--rank",
                               "64", "--untied", "--json"});
    ASSERT_EQ(untied.exit_code, 0) << untied.err;
    const auto u = nlohmann::json::parse(untied.out);
    EXPECT_EQ(u["flops_per_token"], 16512);
    EXPECT_EQ(u["tied_head"], false);
    EXPECT_GT(u["flops_head"].get<int64_t>(), 4'000'000);
    const CliRun tt = cli({"account", "--method", "tt", "--vocab", "50257", "--shape", "8,8,12", "--ranks",
                           "1,4,4,1", "--json"});
    ASSERT_EQ(tt.exit_code, 0) << tt.err;
    EXPECT_EQ(nlohmann::json::parse(tt.out)["params_per_token"], 208);
    const CliRun bad =
        cli_here({"account", "--method", "tt", "--vocab", "50257", "--dim", "768", "--shape", "8,8,10"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("product 640"), std::string::npos) << bad.err;

    // Any method that can be counted without its table: quant in bytes against the stored
    // type (q4_0: 18 bytes a block of 32 values); lle's size is what its fit finds.
    const CliRun quant = cli({"account", "--method", "quant", "--type", "q4_0", "--vocab", "32000", "--dim",
                              "128", "--stored-type", "f32", "--json"});
    ASSERT_EQ(quant.exit_code, 0) << quant.err;
    const auto q = nlohmann::json::parse(quant.out);
    EXPECT_EQ(q["storage"]["bytes_after"], 32000 * 4 * 18);
    EXPECT_EQ(q["storage"]["bytes_before"], 32000 * 128 * 4);
    const CliRun lle =
        cli_here({"account", "--method", "lle", "--vocab", "32000", "--dim", "128", "--k", "5"});
    EXPECT_EQ(lle.exit_code, 2);
    EXPECT_NE(lle.err.find("counted only after a fit"), std::string::npos) << lle.err;
    const CliRun not_its = cli_here({"account", "--method", "tucker", "--vocab", "100", "--shape", "8,16",
                                     "--ranks", "4,8", "--nu", "3"});
    EXPECT_EQ(not_its.exit_code, 2);
    EXPECT_NE(not_its.err.find("account: --nu does not apply to method tucker"), std::string::npos)
        << not_its.err;
}

TEST(Cli, StoriesReferenceIdsThroughGguf)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto shared = embedlab::test::shared_dir();
    const CliRun r = cli({"eval", (shared / "models/stories260K/stories260K.gguf").string(), "--ids",
                          (shared / "reference/tokens-stories260K-tinystories-6000.json").string(), "--ctx",
                          "256", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["tokens"], 3013);
    EXPECT_NEAR(j["ppl"].get<double>(), 6.385497172545627, 6.385497172545627 * 1e-4);
}

} // namespace

// bench machine (issue 63 item 2): the limits the benches read their figures against,
// each a positive measurement with the threads it used. A benchmark, not a timed test:
// no figure is held to a speed.
TEST(Cli, BenchMachineMeasuresTheLimits)
{
    const CliRun r = cli({"bench", "machine", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto m = nlohmann::json::parse(r.out)["machine"];
    for (const char* field : {"read_gbps", "triad_gbps", "gemm_gflops"})
        EXPECT_GT(m[field].get<double>(), 0) << field;
    EXPECT_GE(m["threads"].get<int>(), 1);
    EXPECT_EQ(m["array_bytes"], int64_t{128} << 20);
}

// Issue 58: with EMBEDLAB_CLI_LOG set, each run appends its CPU seconds, exit status and
// command (scripts/test.sh counts the tests' CLI processes from it).
TEST(Cli, EachRunAppendsItsCostToTheProcessLog)
{
    embedlab::test::TempDir dir;
    const auto log = dir / "processes.log";
    const std::string run = "EMBEDLAB_CLI_LOG=" + embedlab::test::quote(log.string()) + " " +
                            embedlab::test::quote(EMBEDLAB_CLI_PATH);
    ASSERT_EQ(std::system((run + " version >/dev/null").c_str()), 0);
    ASSERT_NE(std::system((run + " frobnicate >/dev/null 2>&1").c_str()), 0);
    std::istringstream lines(embedlab::test::read_text(log));
    std::vector<std::tuple<double, int, std::string>> runs;
    double cpu = 0;
    int status = 0;
    for (std::string command; lines >> cpu >> status >> command;)
        runs.emplace_back(cpu, status, command);
    ASSERT_EQ(runs.size(), 2u) << embedlab::test::read_text(log);
    EXPECT_GT(std::get<0>(runs[0]), 0.0);
    EXPECT_EQ(std::get<1>(runs[0]), 0);
    EXPECT_EQ(std::get<2>(runs[0]), "version");
    EXPECT_EQ(std::get<1>(runs[1]), 2);
    EXPECT_EQ(std::get<2>(runs[1]), "frobnicate");
}
