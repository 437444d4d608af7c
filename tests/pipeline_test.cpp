// Stacked compression (issue 60, pipeline.hpp): trim as a compress step, a chain as one
// request with one record, its refusals, the worker's JSON path and the results row.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/model.hpp"
#include "embedlab/pipeline.hpp"
#include "embedlab/results.hpp"
#include "embedlab/slurm.hpp"
#include "embedlab/subprocess.hpp"
#include "embedlab/trim_fields.hpp"
#include "test_support.hpp"

namespace pipeline_test {

namespace fs = std::filesystem;
using embedlab::test::cli;
using embedlab::test::CliRun;
using embedlab::test::TempDir;
using OJson = nlohmann::ordered_json;

fs::path chain_model()
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "resources/models/tinygpt2-f16";
}

fs::path chain_encoder()
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders/bert-cls";
}

// The stored bytes of a safetensors file's tensors (its header left out), all of them
// or those whose name starts with `prefix`: read from the file, not from EmbedLab.
int64_t chain_tensor_bytes(const fs::path& file, const std::string& prefix = "")
{
    std::ifstream in(file, std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    std::string header(n, '\0');
    in.read(header.data(), static_cast<std::streamsize>(n));
    int64_t bytes = 0;
    const auto tensors = nlohmann::json::parse(header);
    for (const auto& [name, t] : tensors.items())
        if (name != "__metadata__" && name.rfind(prefix, 0) == 0)
            bytes += t["data_offsets"][1].get<int64_t>() - t["data_offsets"][0].get<int64_t>();
    return bytes;
}

OJson chain_read_json(const fs::path& file)
{
    return OJson::parse(embedlab::test::read_text(file));
}

// One chain run by the CLI, shared by the tests that read it (trim 0.999 → pca 32 → q8_0).
struct ChainRun {
    TempDir dir;
    embedlab::test::TextSlices text{60000, 8000};
    fs::path out = dir / "chain";
    CliRun run;
    ChainRun()
    {
        run = cli({"compress", chain_model().string(), "--method", "trim", "--freq-text", text.fit,
                   "--coverage", "0.999", "--then", "pca", "--rank", "32", "--then-store", "q8_0",
                   "--eval-text", text.eval, "--out", out.string(), "--quiet"});
    }
    OJson block() const { return chain_read_json(out / "embedlab.json")["pipeline"]; }
};

const ChainRun& chain_run()
{
    static const ChainRun run;
    return run;
}

TEST(Pipeline, TrimAsACompressStepGivesTrimsNumbers)
{
    TempDir dir;
    const embedlab::test::TextSlices text(60000, 8000);
    const auto a = cli({"trim", chain_model().string(), "--freq-text", text.fit, "--keep", "3000",
                        "--eval-text", text.eval, "--out", (dir / "trim").string(), "--quiet"});
    const auto b =
        cli({"compress", chain_model().string(), "--method", "trim", "--freq-text", text.fit, "--keep",
             "3000", "--eval-text", text.eval, "--out", (dir / "step").string(), "--quiet"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const OJson t = chain_read_json(dir / "trim/trim.json"), s = chain_read_json(dir / "step/trim.json");
    for (const char* key : {"kept_tokens", "required_tokens", "bytes_after", "parameters_after", "settings"})
        EXPECT_EQ(t[key], s[key]) << key;
    EXPECT_EQ(t["evaluation"]["trimmed"]["bits_per_byte"], s["evaluation"]["trimmed"]["bits_per_byte"]);
    EXPECT_EQ(t["evaluation"]["original"]["ppl"], s["evaluation"]["original"]["ppl"]);
    EXPECT_EQ(chain_tensor_bytes(dir / "trim/model.safetensors"),
              chain_tensor_bytes(dir / "step/model.safetensors"));

    // The run record: the row of the token table cut to the kept rows, bytes as stored.
    const auto summary = embedlab::summary_from_json(chain_read_json(dir / "step/run.json")["summary"]);
    EXPECT_EQ(summary.method, "trim");
    EXPECT_EQ(summary.parameters, "keep 3000");
    EXPECT_EQ(summary.params_before, 50257 * 128);
    const int64_t K = s["kept_tokens"]; // keep N: at most N (the frequency text's ids, their parts)
    EXPECT_LE(K, 3000);
    EXPECT_EQ(summary.params_after, K * 128);
    EXPECT_EQ(summary.bytes_after, static_cast<double>(K) * 128 * 2); // f16
    EXPECT_EQ(summary.model_bytes_before, chain_tensor_bytes(chain_model() / "model.safetensors"));
    EXPECT_EQ(summary.model_bytes_after, chain_tensor_bytes(dir / "step/model.safetensors"));
    EXPECT_EQ(summary.bits_per_byte, s["evaluation"]["trimmed"]["bits_per_byte"].get<double>());
    EXPECT_EQ(summary.bits_per_byte_original, s["evaluation"]["original"]["bits_per_byte"].get<double>());
    // A plain model directory: it loads as one, of the kept tokens.
    EXPECT_EQ(embedlab::load_model(dir / "step").model->config().vocab_size, K);
}

TEST(Pipeline, AChainsRecordCountsTheWholeChainAgainstTheOriginalAsStored)
{
    const ChainRun& c = chain_run();
    ASSERT_EQ(c.run.exit_code, 0) << c.run.err;
    const OJson block = c.block();
    const auto s = embedlab::summary_from_json(block["summary"]);
    EXPECT_EQ(s.method, "chain");
    EXPECT_EQ(s.parameters, "trim 0.999 → pca rank 32 → q8_0");
    EXPECT_EQ(s.model, chain_model().string());
    // The directory names the model the chain started from, not the removed trimmed copy.
    const OJson source = chain_read_json(c.out / "embedlab.json")["source"];
    EXPECT_EQ(source["path"], fs::absolute(chain_model()).lexically_normal().string());
    // ...while its digests are the trimmed files', whose tensors the directory holds.
    EXPECT_EQ(source["trimmed_by"], "pipeline (its trim step; files: the trimmed model's)");
    ASSERT_FALSE(source["files"].empty());
    EXPECT_EQ(source["files"][0]["file"], "model.safetensors");
    EXPECT_NE(source["files"][0]["sha256"], embedlab::sha256_file(chain_model() / "model.safetensors"));
    EXPECT_EQ(source["files"][0]["sha256"].get<std::string>().size(), 64u);
    const int64_t K = block["vocab_size"]["after"];
    EXPECT_EQ(K, block["trim"]["kept_tokens"].get<int64_t>());
    EXPECT_EQ(s.params_before, 50257 * 128);            // the original table
    EXPECT_EQ(s.params_after, K * 32 + 32 * 128 + 128); // Z, P, mu
    EXPECT_EQ(s.bytes_before, 50257.0 * 128 * 2);
    // Reported bytes are the bytes the directory stores: the table's factors, every weight.
    const fs::path weights = c.out / "model.safetensors";
    EXPECT_EQ(s.bytes_after, chain_tensor_bytes(weights, "wte."));
    EXPECT_EQ(s.model_bytes_after, chain_tensor_bytes(weights));
    EXPECT_EQ(s.model_bytes_before, chain_tensor_bytes(chain_model() / "model.safetensors"));
    // Every step's settings.
    const OJson& steps = block["request"]["pipeline"];
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[0]["coverage"], 0.999);
    EXPECT_EQ(steps[1]["method"], "pca");
    EXPECT_EQ(steps[1]["rank"], 32);
    EXPECT_EQ(steps[1]["store"], "q8_0");
    // The original's evaluation is trim's; the final model's is of the directory as written.
    EXPECT_EQ(s.ppl_original, block["trim"]["evaluation"]["original"]["ppl"].get<double>());
    EXPECT_EQ(s.bits_per_byte_original,
              block["trim"]["evaluation"]["original"]["bits_per_byte"].get<double>());
    const auto final_model = embedlab::load_model(c.out);
    EXPECT_EQ(final_model.model->config().vocab_size, K);
    const auto ids = final_model.tokenizer->encode(embedlab::test::read_text(c.text.eval));
    auto r = embedlab::evaluate_perplexity(*final_model.model, ids, {.ctx = 128});
    embedlab::add_bits_per_byte(r, ids, *final_model.tokenizer);
    EXPECT_NEAR(r.ppl, s.ppl, 1e-6 * s.ppl);
    EXPECT_NEAR(r.bits_per_byte, s.bits_per_byte, 1e-9);
    EXPECT_NEAR(s.delta_ln_ppl, std::log(s.ppl) - std::log(s.ppl_original), 1e-12);
    // One record: trim's is inside it, not a second file in the output.
    EXPECT_FALSE(fs::exists(c.out / "trim.json"));
    // Nothing of the intermediate directory is left beside the output.
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(c.out.parent_path()))
        ++entries;
    EXPECT_EQ(entries, 1); // the chain
}

TEST(Pipeline, TheWorkerRunsTheJsonRequestIntoTheSameRecord)
{
    const ChainRun& c = chain_run();
    ASSERT_EQ(c.run.exit_code, 0) << c.run.err;
    TempDir dir;
    const OJson job = {{"kind", "compress"},
                       {"model", chain_model().string()},
                       {"eval_text", c.text.eval},
                       {"out", (dir / "worker").string()},
                       {"pipeline",
                        {{{"method", "trim"}, {"freq_text", c.text.fit}, {"coverage", 0.999}},
                         {{"method", "pca"}, {"rank", 32}, {"store", "q8_0"}}}}};
    embedlab::test::write_file(dir / "job.json", job.dump());
    const auto w = cli({"worker", "--job", (dir / "job.json").string()});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    const std::string last = w.out.substr(w.out.rfind('\n', w.out.size() - 2) + 1);
    const OJson result = OJson::parse(last)["result"];
    OJson cli_summary = c.block()["summary"], worker_summary = result["summary"];
    for (OJson* s : {&cli_summary, &worker_summary})
        s->erase("seconds");
    EXPECT_EQ(worker_summary, cli_summary);
    EXPECT_EQ(result["record"]["pipeline"]["whole_chain"], c.block()["whole_chain"]);
    EXPECT_EQ(chain_read_json(dir / "worker/embedlab.json")["pipeline"]["label"], c.block()["label"]);
    EXPECT_EQ(chain_tensor_bytes(dir / "worker/model.safetensors"),
              chain_tensor_bytes(c.out / "model.safetensors"));
}

TEST(Pipeline, TheRequestJsonRoundTrips)
{
    const OJson j = OJson::parse(R"({"model": "m", "eval_text": "e.txt", "pipeline": [
        {"method": "trim", "freq_text": "f.txt", "keep": 4000},
        {"method": "lle", "freq_text": "f.txt", "keep_ratio": 0.5, "k": 8, "store": "q8_0"}]})");
    const auto p = embedlab::pipeline_from_json(j);
    ASSERT_TRUE(p.trim);
    EXPECT_EQ(*p.trim->keep, 4000);
    EXPECT_EQ(p.request.method, "lle");
    EXPECT_EQ(p.request.k, 8);
    EXPECT_EQ(p.request.store, "q8_0");
    EXPECT_EQ(embedlab::pipeline_json(p), j);
    EXPECT_EQ(embedlab::pipeline_label(p), "trim keep 4000 → " + embedlab::describe_request([&] {
                                               auto r = p.request;
                                               r.store.clear();
                                               return r;
                                           }()) +
                                               " → q8_0");
    // A single trim request is a chain of one step.
    const auto t = embedlab::pipeline_from_json(
        OJson::parse(R"({"model": "m", "method": "trim", "freq_text": "f.txt", "coverage": 0.99})"));
    EXPECT_EQ(
        embedlab::pipeline_json(t),
        OJson::parse(
            R"({"model": "m", "pipeline": [{"method": "trim", "freq_text": "f.txt", "coverage": 0.99}]})"));
    EXPECT_TRUE(embedlab::is_pipeline_json(j));
    EXPECT_FALSE(embedlab::is_pipeline_json(OJson::parse(R"({"model": "m", "method": "pca", "rank": 8})")));
}

// The message of the InputError `f` throws ("" when it throws none).
template <class F> std::string chain_refusal(F&& f)
{
    try {
        f();
    } catch (const embedlab::InputError& e) {
        return e.what();
    }
    return "";
}

// Trim's declared fields (trim_fields.hpp, what the workbench's page and the CLI's flags
// are built from) are the fields a trim step takes, read into TrimOptions, with the flags
// `trim` and `compress --method trim` take.
TEST(Pipeline, TrimsDeclaredFieldsAreTheFieldsItsStepTakes)
{
    std::vector<std::string> names, flags;
    for (const embedlab::MethodField& f : embedlab::trim_fields()) {
        names.push_back(f.name);
        flags.push_back(embedlab::trim_flag(f));
        EXPECT_FALSE(f.doc.label.empty() || f.doc.help.empty() || f.doc.value_name.empty()) << f.name;
        if (f.doc.ranged && f.default_value.get<double>() != 0) { // a first value inside its range
            EXPECT_TRUE(f.default_value.get<double>() > f.doc.lo && f.default_value.get<double>() <= f.doc.hi)
                << f.name;
        }
    }
    EXPECT_EQ(names, (std::vector<std::string>{"freq_text", "coverage", "keep", "keep_tokens"}));
    EXPECT_EQ(flags, (std::vector<std::string>{"--freq-text", "--coverage", "--keep", "--keep-tokens"}));
    // A step giving each declared field is read into its TrimOptions member.
    OJson step = {{"method", "trim"}};
    for (const embedlab::MethodField& f : embedlab::trim_fields())
        step[f.name] = f.type == embedlab::RequestFieldType::String    ? OJson(f.name + ".txt")
                       : f.type == embedlab::RequestFieldType::Integer ? OJson(900)
                                                                       : OJson(0.5);
    const auto p = embedlab::pipeline_from_json(OJson{{"model", "m"}, {"pipeline", OJson::array({step})}});
    ASSERT_TRUE(p.trim.has_value());
    EXPECT_EQ(p.trim->freq_text, "freq_text.txt");
    EXPECT_EQ(p.trim->coverage, 0.5);
    EXPECT_EQ(p.trim->keep, 900);
    EXPECT_EQ(p.trim->keep_tokens, "keep_tokens.txt");
    embedlab::test::expect_input_error([] { embedlab::trim_field("budget"); },
                                       "trim has no field 'budget' (its fields: freq_text, coverage, keep, "
                                       "keep_tokens)");
}

TEST(Pipeline, BadChainsAreRefusedNamingTheStepsField)
{
    const auto parse = [](const char* text) {
        return chain_refusal([&] { embedlab::pipeline_from_json(OJson::parse(text)); });
    };
    EXPECT_EQ(parse(R"({"model": "m", "pipeline": [{"method": "pca", "rank": 8}, {"method": "trim",
              "freq_text": "f", "keep": 9}]})"),
              "pipeline[1].method: trim must be the first step (it changes the vocabulary every later step "
              "works on)");
    EXPECT_EQ(parse(R"({"model": "m", "pipeline": [{"method": "trim", "freq_text": "f", "keep": 9},
              {"method": "pcaa"}]})")
                  .rfind("pipeline[1].method: unknown method \"pcaa\" (trim, pca", 0),
              0u);
    EXPECT_EQ(
        parse(R"({"model": "m", "pipeline": [{"method": "trim", "freq_text": "f", "keep": 9},
              {"method": "pca", "rank": 8}, {"method": "quant", "type": "q8_0"}]})")
            .rfind("pipeline[2].method: quant after pca does not apply: a chain is trim, then one method", 0),
        0u);
    EXPECT_EQ(
        parse(R"({"model": "m", "pipeline": [{"method": "trim", "freq_text": "f", "keep": 9, "k": 3}]})"),
        "pipeline[0]: \"k\" is not a field of trim (freq_text, keep or coverage, keep_tokens)");
    EXPECT_EQ(
        parse(R"({"model": "m", "pipeline": [{"method": "trim", "freq_text": "f", "coverage": "all"}]})"),
        "pipeline[0].coverage: must be a number in (0, 1]");
    EXPECT_EQ(parse(R"({"model": "m", "pipeline": [{"method": "trim", "freq_text": "f", "keep": 9},
              {"method": "pca", "rank": 8, "rnak": 3}]})"),
              "pipeline[1].rnak is not a field of a compress request");
    EXPECT_EQ(parse(R"({"model": "m", "method": "pca", "pipeline": [{"method": "pca", "rank": 8}]})"),
              "pipeline: a request with a pipeline names its methods in the steps; remove the top-level "
              "\"method\"");
}

TEST(Pipeline, ARefusedChainWritesNothing)
{
    TempDir dir;
    const embedlab::test::TextSlices text(20000, 4000);
    const auto refused = [&](const embedlab::PipelineRequest& p) {
        const auto message = chain_refusal([&] { embedlab::run_pipeline(p, dir / "out"); });
        EXPECT_FALSE(fs::exists(dir / "out")) << message;
        return message;
    };
    embedlab::PipelineRequest p;
    p.trim = embedlab::TrimOptions{.freq_text = text.fit, .coverage = 0.99};
    p.request.model = chain_encoder().string();
    p.request.method = "flat"; // flat after trim on an encoder
    p.request.remaining = 0.5;
    EXPECT_EQ(refused(p).rfind("pipeline[1].method: flat does not apply to " + chain_encoder().string() +
                                   ": not implemented for encoders",
                               0),
              0u);
    p.request.method = "pca";
    p.request.remaining = 0;
    p.request.rank = 8;
    p.request.eval_text = text.eval;
    EXPECT_EQ(
        refused(p),
        "pipeline: eval_text does not apply to a trimmed chain: an encoder has no next-token perplexity "
        "(trim alone records the share of the text's tokens that changed)");
    p.request = {};
    p.request.model = chain_model().string();
    p.request.method = "pca";
    p.request.rank = 500; // beyond d = 128
    EXPECT_NE(refused(p).find("pipeline[1]: "), std::string::npos);
    p.request.rank = 16;
    p.request.eval_text = text.eval;
    p.request.divergence = true;
    EXPECT_EQ(refused(p).rfind("pipeline: divergence does not apply to a trimmed chain", 0), 0u);
    p.request.divergence = false;
    p.trim->coverage = 1.5;
    EXPECT_EQ(refused(p).rfind("trim: coverage 1.5 is outside (0, 1]", 0), 0u);
    p.trim->coverage.reset();
    p.trim->keep = 10; // below the 256 byte tokens and the specials
    EXPECT_EQ(refused(p).rfind("trim: keep 10 is below the ", 0), 0u);
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 0);
}

TEST(Pipeline, AnInterruptedChainLeavesNothingHalfWritten)
{
    TempDir dir;
    const embedlab::test::TextSlices text(20000, 4000);
    embedlab::PipelineRequest p;
    p.trim = embedlab::TrimOptions{.freq_text = text.fit, .coverage = 0.99};
    p.request.model = chain_model().string();
    p.request.method = "pca";
    p.request.rank = 16;
    p.request.eval_text = text.eval;
    for (const std::string stop : {"trim", "compress", "eval compressed"}) {
        bool stopped = false;
        EXPECT_THROW(embedlab::run_pipeline(p, dir / "out", {},
                                            [&](const embedlab::ExperimentProgress& e) {
                                                stopped = stopped || e.stage.rfind(stop, 0) == 0;
                                                return !stopped;
                                            }),
                     embedlab::Cancelled)
            << stop;
        EXPECT_TRUE(stopped) << stop;
        EXPECT_FALSE(fs::exists(dir / "out")) << stop;
        EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 0) << stop;
    }
}

TEST(Pipeline, TheCliRefusesFlagsThatDoNotApplyBeforeAnyWork)
{
    TempDir dir;
    const embedlab::test::TextSlices text(20000, 4000);
    const std::string model = chain_model().string(), out = (dir / "out").string();
    embedlab::test::expect_refused(cli({"compress", model, "--method", "trim", "--freq-text", text.fit,
                                        "--keep", "3000", "--then-store", "q8_0", "--out", out}),
                                   "compress: --then-store needs a method after trim to store");
    embedlab::test::expect_refused(cli({"compress", model, "--method", "trim", "--freq-text", text.fit,
                                        "--keep", "3000", "--rank", "8", "--out", out}),
                                   "compress: --rank does not apply to --method trim alone");
    embedlab::test::expect_refused(
        cli({"compress", model, "--method", "pca", "--rank", "8", "--then", "quant", "--out", out}),
        "compress: --then follows --method trim");
    embedlab::test::expect_refused(cli({"compress", model, "--method", "trim", "--freq-text", text.fit,
                                        "--coverage", "2", "--then", "pca", "--rank", "8", "--out", out}),
                                   "trim: coverage 2 is outside (0, 1]");
    embedlab::test::expect_refused(cli({"compress", model, "--method", "trim", "--freq-text", text.fit,
                                        "--keep", "3000", "--then", "pca", "--rank", "500", "--out", out}),
                                   "compress: --rank 500 is outside 1..128");
    embedlab::test::expect_refused(cli({"compress", model, "--method", "trim", "--freq-text", text.fit,
                                        "--keep", "3000", "--then", "pcx", "--out", out}),
                                   "compress: unknown --then 'pcx'");
    EXPECT_FALSE(fs::exists(dir / "out"));
}

TEST(Pipeline, ThenStoreOnOneMethodIsItsStore)
{
    TempDir dir;
    const std::string model = chain_model().string();
    const auto a = cli({"compress", model, "--method", "pca", "--rank", "16", "--then-store", "q8_0", "--out",
                        (dir / "a").string(), "--quiet"});
    const auto b = cli({"compress", model, "--method", "pca", "--rank", "16", "--store", "q8_0", "--out",
                        (dir / "b").string(), "--quiet"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(chain_read_json(dir / "a/embedlab.json")["stored_types"],
              chain_read_json(dir / "b/embedlab.json")["stored_types"]);
    EXPECT_EQ(chain_tensor_bytes(dir / "a/model.safetensors", "wte."),
              chain_tensor_bytes(dir / "b/model.safetensors", "wte."));
    embedlab::test::expect_refused(
        cli({"compress", model, "--method", "pca", "--rank", "16", "--then-store", "q8_0", "--store", "f16",
             "--out", (dir / "c").string()}),
        "compress: --store and --then-store name the same step's stored type; give one");
}

TEST(Pipeline, AChainsRowIsLabelledByItsStepsBesideTheBaselines)
{
    const ChainRun& c = chain_run();
    ASSERT_EQ(c.run.exit_code, 0) << c.run.err;
    auto chain = embedlab::summary_from_json(c.block()["summary"]);
    auto quant = chain;
    quant.method = "quant";
    quant.parameters = "q4_0";
    quant.ratio = 1;
    quant.delta_ln_ppl = 1e-3;
    const auto rows = embedlab::results_from_csv(embedlab::results_csv({quant, chain}));
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[1].method + " " + rows[1].parameters, "chain trim 0.999 → pca rank 32 → q8_0");
    EXPECT_EQ(rows[1].model_bytes_after, chain.model_bytes_after);
    const auto groups = embedlab::pareto_fronts(rows);
    ASSERT_EQ(groups.size(), 1u); // the chain is compared with the baselines of its model
    EXPECT_EQ(groups[0].rows, (std::vector<int>{0, 1}));
}

TEST(Pipeline, ASlurmSweepMakesTheStepsFilesAbsolute)
{
    TempDir dir;
    const OJson job = OJson::parse(R"({"kind": "compress", "model": "m", "eval_text": "e.txt", "pipeline": [
        {"method": "trim", "freq_text": "f.txt", "keep_tokens": "k.txt", "keep": 4000},
        {"method": "lle", "freq_text": "g.txt", "keep_ratio": 0.5, "k": 8}]})");
    EXPECT_EQ(embedlab::pipeline_input_pointers(job),
              (std::vector<std::string>{"/pipeline/0/freq_text", "/pipeline/0/keep_tokens",
                                        "/pipeline/1/freq_text"}));
    embedlab::write_slurm_sweep(dir / "sweep", {job}, {{"model", "m"}});
    const OJson written = chain_read_json(dir / "sweep/job-0.json");
    const auto absolute = [](const char* p) { return fs::absolute(p).lexically_normal().string(); };
    EXPECT_EQ(written["eval_text"], absolute("e.txt"));
    EXPECT_EQ(written["pipeline"][0]["freq_text"], absolute("f.txt"));
    EXPECT_EQ(written["pipeline"][0]["keep_tokens"], absolute("k.txt"));
    EXPECT_EQ(written["pipeline"][1]["freq_text"], absolute("g.txt"));
    EXPECT_EQ(written["pipeline"][0]["keep"], 4000);
}

// Two table methods in one chain are refused, saying why: the first's output is a
// compressed directory, which compress refuses as a model (checked here too), and the
// second would store only its own factors.
TEST(Pipeline, TwoTableMethodsAreRefusedSayingWhyTheyDoNotStack)
{
    const std::string why =
        "a chain is trim, then one method: lle's output is a compressed table (its factors or codes), not a "
        "model a method takes (compress refuses an EmbedLab compressed model), and pca fitted to lle's "
        "reconstruction would store only its own factors, so the two would not stack; ";
    EXPECT_EQ(chain_refusal([] {
                  embedlab::pipeline_from_json(OJson::parse(R"({"model": "m", "pipeline": [
                      {"method": "trim", "freq_text": "f", "keep": 9},
                      {"method": "lle", "freq_text": "f", "keep_ratio": 0.5, "k": 8},
                      {"method": "pca", "rank": 8}]})"));
              }),
              "pipeline[2].method: pca after lle does not apply: " + why +
                  "the method's \"store\" field sets the stored type of lle's factors instead");
    TempDir dir;
    const embedlab::test::TextSlices text(20000, 4000);
    const std::string model = chain_model().string(), out = (dir / "out").string();
    embedlab::test::expect_refused(
        cli({"compress", model, "--method", "trim", "--freq-text", text.fit, "--keep", "3000", "--then",
             "lle", "--keep-ratio", "0.5", "--then", "pca", "--rank", "8", "--out", out}),
        "compress: --then pca after --then lle does not apply: " + why +
            "--then-store TYPE sets the stored type of lle's factors instead");
    EXPECT_FALSE(fs::exists(dir / "out"));
    // The claim the message makes: a compressed directory is no model compress takes.
    embedlab::test::expect_refused(
        cli({"compress", chain_run().out.string(), "--method", "pca", "--rank", "8", "--out", out}),
        "is already an EmbedLab compressed model; compress the original model");
}

// A chain killed with SIGKILL leaves its working directory `.chain.chain-PID` beside the
// output (no destructor runs). While its process lives, nothing removes it; once it is
// dead, the next run for the same output removes it and says so. Directories without
// EmbedLab's marker, or whose marker names another process, are left alone.
TEST(Pipeline, AKilledChainsWorkingDirectoryIsRemovedByTheNextRun)
{
    TempDir dir;
    const embedlab::test::TextSlices text(60000, 8000);
    const fs::path out = dir / "chain";
    const std::vector<std::string> chain{"compress",    chain_model().string(),
                                         "--method",    "trim",
                                         "--freq-text", text.fit,
                                         "--coverage",  "0.999",
                                         "--then",      "pca",
                                         "--rank",      "32",
                                         "--eval-text", text.eval,
                                         "--out",       out.string(),
                                         "--quiet"};
    std::vector<std::string> argv{EMBEDLAB_CLI_PATH};
    argv.insert(argv.end(), chain.begin(), chain.end());
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ASSERT_GE(null_fd, 0);
    embedlab::Subprocess killed(argv, {.stdin_fd = -2, .stdout_fd = null_fd, .stderr_fd = null_fd});
    ::close(null_fd);
    const fs::path working = dir / (".chain.chain-" + std::to_string(killed.pid()));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (!fs::exists(working / ".embedlab-chain") && killed.running() &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(fs::exists(working / ".embedlab-chain")) << "the chain made no working directory";
    EXPECT_TRUE(embedlab::remove_stale_chain_directories(out).empty()) << "its process still runs";
    ASSERT_EQ(::kill(killed.pid(), SIGKILL), 0);
    EXPECT_EQ(killed.wait(std::chrono::seconds(30)), 128 + SIGKILL);
    ASSERT_TRUE(fs::is_directory(working)) << "SIGKILL leaves the working directory";
    EXPECT_FALSE(fs::exists(out));

    // Named like ours but not ours: no marker; a marker naming another process.
    fs::create_directories(dir / ".chain.chain-999999999");
    fs::create_directories(dir / ".chain.chain-999999998");
    fs::copy_file(working / ".embedlab-chain", dir / ".chain.chain-999999998/.embedlab-chain");
    const auto run = cli(chain);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.err.find("compress: removed " + working.string() +
                           ", the working directory of a chain that was killed (process " +
                           std::to_string(killed.pid()) + " no longer runs)"),
              std::string::npos)
        << run.err;
    EXPECT_FALSE(fs::exists(working));
    EXPECT_TRUE(fs::exists(out / "embedlab.json"));
    EXPECT_TRUE(fs::exists(dir / ".chain.chain-999999999"));
    EXPECT_TRUE(fs::exists(dir / ".chain.chain-999999998/.embedlab-chain"));
    EXPECT_TRUE(embedlab::remove_stale_chain_directories(out).empty());
}

} // namespace pipeline_test
