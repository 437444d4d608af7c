// The workbench's FLAT-LLM rows and exports (app/analyses_flat.cpp), the per-head
// value spectra of importance_allocations, and rows run on a remote host through
// a real sshd on 127.0.0.1 (app/analyses_remote.cpp, tests/sshd_fixture.hpp).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "analyses.hpp"
#include "analyses_internal.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/flat_llm.hpp"
#include "embedlab/model.hpp"
#include "embedlab/remote.hpp"
#include "embedlab/resources.hpp"
#include "sshd_fixture.hpp"
#include "test_paths.hpp"

namespace app = embedlab::app;
namespace fs = std::filesystem;
using embedlab::test::shared_server;
using embedlab::test::SshServer;
using embedlab::test::TempDir;

namespace {

std::string default_model()
{
    return embedlab::default_model_path().string();
}

// Few evaluated ids and small calibrations keep the suite quick. The texts are
// the bundled sample text, as the method panel fills it in.
embedlab::CompressionRequest flat_request(double remaining, const std::string& allocation)
{
    embedlab::CompressionRequest r;
    r.model = default_model();
    r.method = "flat";
    r.remaining = remaining;
    r.allocation = allocation;
    r.calib_text = app::default_sample_text();
    r.samples = 16;
    r.seqlen = 64;
    r.eval_text = app::default_sample_text();
    r.eval_tokens = 1024;
    return r;
}

// The ids a row with `eval_tokens` evaluates, and its context.
struct EvalIds {
    std::vector<int32_t> ids;
    embedlab::PerplexityOptions options;
};
EvalIds eval_ids(const embedlab::LoadedModel& lm, int64_t eval_tokens)
{
    auto ids = lm.tokenizer->encode(embedlab::read_text_file(app::default_sample_text()));
    ids.resize(static_cast<size_t>(eval_tokens));
    return {ids, {.ctx = std::min<int64_t>(128, lm.model->max_context())}};
}

double relative(double a, double b)
{
    return std::abs(a - b) / std::abs(b);
}

} // namespace

TEST(AnalysesFlat, RowCompressesTheValueAndOutputProjectionsByTheRatio)
{
    const auto request = flat_request(0.5, "iprs");
    const auto r = app::compress_and_evaluate(request);
    EXPECT_EQ(r.method, "flat");
    EXPECT_EQ(r.parameters.rfind("remaining 0.5, iprs, ranks ", 0), 0u) << r.parameters;
    EXPECT_NEAR(r.ratio, 0.5, 0.05);
    EXPECT_DOUBLE_EQ(r.ratio, static_cast<double>(r.params_after) / static_cast<double>(r.params_before));
    EXPECT_TRUE(std::isfinite(r.ppl));
    EXPECT_GT(r.delta_ln_ppl, 0);
    EXPECT_NEAR(r.delta_ln_ppl, std::log(r.ppl) - std::log(r.ppl_original), 1e-12);
    EXPECT_TRUE(std::isnan(r.mean_cosine)); // the embedding is not touched
    EXPECT_EQ(r.host, app::detail::host_name());

    // The engine's own run: the same calibration gives the same model and numbers.
    auto lm = embedlab::load_model(default_model());
    const auto calib_ids = lm.tokenizer->encode(embedlab::read_text_file(app::default_sample_text()));
    const auto cal = embedlab::calibrate(*lm.model, calib_ids, {.samples = 16, .seqlen = 64});
    const auto flat = embedlab::flat_compress(*lm.model, cal, {.remaining = 0.5});
    const auto params = embedlab::flat_params_json(flat);
    // Only the value and output projections change: the attention counts differ by exactly the row's.
    EXPECT_EQ(params["attention_before"].get<int64_t>() - params["attention_after"].get<int64_t>(),
              r.params_before - r.params_after);
    const auto& c = lm.model->config();
    // gpt2: W_v [d, d] and its bias, W_o [d, d] per layer.
    EXPECT_EQ(r.params_before, c.num_layers * (2 * c.hidden_size * c.hidden_size + c.hidden_size));
    std::string ranks;
    for (const auto& layer : flat.layers)
        ranks += (ranks.empty() ? "" : ",") + std::to_string(layer.rank);
    EXPECT_EQ(r.parameters, "remaining 0.5, iprs, ranks " + ranks);
    const auto e = eval_ids(lm, request.eval_tokens);
    EXPECT_LT(relative(r.ppl, embedlab::evaluate_perplexity(*flat.model, e.ids, e.options).ppl), 1e-9);
    EXPECT_LT(relative(r.ppl_original, embedlab::evaluate_perplexity(*lm.model, e.ids, e.options).ppl), 1e-9);
}

TEST(AnalysesFlat, UniformAndIprsAllocationsDiffer)
{
    const auto iprs = app::compress_and_evaluate(flat_request(0.5, "iprs"));
    const auto uniform = app::compress_and_evaluate(flat_request(0.5, "uniform"));
    EXPECT_EQ(uniform.parameters.rfind("remaining 0.5, uniform, ranks 16,16,16,16", 0), 0u)
        << uniform.parameters;
    EXPECT_NE(iprs.parameters, uniform.parameters);
    EXPECT_NE(iprs.ppl, uniform.ppl);
    EXPECT_EQ(iprs.ppl_original, uniform.ppl_original); // one cached baseline

    auto bad = flat_request(0.5, "greedy");
    EXPECT_THROW(app::compress_and_evaluate(bad), embedlab::InputError);
    bad = flat_request(0.0, "iprs");
    EXPECT_THROW(app::compress_and_evaluate(bad), embedlab::InputError);
}

TEST(AnalysesFlat, TooShortCalibrationTextIsNamed)
{
    const TempDir dir;
    std::ofstream(dir / "short.txt") << "Once upon a time there was a cat.";
    auto request = flat_request(0.5, "iprs");
    request.calib_text = (dir / "short.txt").string();
    try {
        app::compress_and_evaluate(request);
        FAIL() << "a calibration text shorter than one window was accepted";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find(request.calib_text), std::string::npos) << e.what();
    }
}

TEST(AnalysesFlat, RowCancelsAfterTheCalibration)
{
    int64_t furthest = 0;
    const auto stop_after_calibration = [&](int64_t done, int64_t total) {
        furthest = std::max(furthest, done * 1000 / total);
        return done * 1000 / total < 400;
    };
    EXPECT_THROW(app::compress_and_evaluate(flat_request(0.7, "iprs"), {}, stop_after_calibration),
                 embedlab::Cancelled);
    EXPECT_GE(furthest, 400);
    EXPECT_LT(furthest, 1000);
    auto lora = flat_request(0.5, "iprs");
    lora.lora_rank = 8;
    lora.train_text = app::default_sample_text();
    EXPECT_THROW(app::compress_and_evaluate(lora), embedlab::InputError);
}

TEST(AnalysesFlat, ExportLoadsBackWithTheRowsPerplexity)
{
    const TempDir dir;
    const auto request = flat_request(0.5, "iprs");
    const auto row = app::compress_and_evaluate(request);
    const auto out = (dir / "flat").string();

    // A cancel, even at the last moment, leaves nothing.
    int64_t calls = 0;
    const auto stop_at_end = [&](int64_t done, int64_t total) { return ++calls, done < total; };
    EXPECT_THROW(app::export_compressed(request, out, false, false, stop_at_end), embedlab::Cancelled);
    EXPECT_GT(calls, 2);
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator{}), 0);

    EXPECT_THROW(app::export_compressed(request, out, true, false, {}), embedlab::InputError);
    const auto written = app::export_compressed(request, out, false, false, {});
    EXPECT_EQ(written, "flat " + row.parameters);
    EXPECT_TRUE(fs::is_regular_file(fs::path(out) / "embedlab.json"));
    EXPECT_THROW(app::export_compressed(request, out, false, false, {}), embedlab::InputError);

    const auto lm = embedlab::load_model(out);
    EXPECT_FALSE(lm.model->config().value_head_dims.empty());
    const auto e = eval_ids(lm, request.eval_tokens);
    EXPECT_LT(relative(embedlab::evaluate_perplexity(*lm.model, e.ids, e.options).ppl, row.ppl), 1e-6);

    // Replacing an exported model is allowed when confirmed.
    EXPECT_NO_THROW(app::export_compressed(request, out, false, true, {}));
}

TEST(AnalysesFlat, HeadSpectraAreDescendingPerLayerAndHead)
{
    const auto r = app::importance_allocations(default_model(), app::default_sample_text(), 16, 64,
                                               embedlab::ProgressFn{});
    const auto lm = embedlab::load_model(default_model(), {.need_tokenizer = false});
    const auto& c = lm.model->config();
    EXPECT_EQ(r.kv_heads, c.num_kv_heads);
    ASSERT_EQ(static_cast<int64_t>(r.head_spectra.size()), c.num_layers * c.num_kv_heads);
    for (const auto& spectrum : r.head_spectra) {
        ASSERT_EQ(static_cast<int64_t>(spectrum.size()), r.d_head);
        EXPECT_TRUE(std::is_sorted(spectrum.rbegin(), spectrum.rend()));
        EXPECT_GE(spectrum.back(), 0.0);
        EXPECT_GT(spectrum.front(), 0.0);
    }
    // Not one spectrum copied everywhere.
    EXPECT_NE(r.head_spectra.front(), r.head_spectra.back());
}

namespace {

app::detail::RemoteWorker worker_in(const TempDir& dir)
{
    return {.cli = EMBEDLAB_CLI_PATH, .dir = (dir / "remote").string()};
}

// The request of each method the remote rows run (the method's fields only, as
// the method panel gives them), and the sshd as its target.
embedlab::CompressionRequest remote_request(const std::string& method)
{
    const std::string text = app::default_sample_text();
    embedlab::CompressionRequest r{.model = default_model(), .method = method};
    if (method == "pca" || method == "svd") {
        r.rank = 16;
    } else if (method == "tt") {
        r.eps = 0.3;
    } else if (method == "lle") {
        r.freq_text = text;
        r.keep_ratio = 0.5;
        r.k = 4;
    } else if (method == "fourier") {
        r.steps = 20; // a short fit
    } else if (method == "flat") {
        r.remaining = 0.5;
        r.calib_text = text;
        r.samples = 8; // a short calibration
        r.seqlen = 64;
    }
    r.eval_text = text;
    r.eval_tokens = 1024;
    return r;
}
app::RunTarget remote_target(const SshServer& s)
{
    return {.host = s.host(), .ssh_config = s.ssh_config.string()};
}

// The remote runs' scratch directories go to $TMPDIR: a private one per test,
// empty at first, so tests running beside this one (ctest -j) cannot change the count.
class PrivateTmpdir {
public:
    PrivateTmpdir()
    {
        if (const char* old = std::getenv("TMPDIR"))
            old_ = old;
        ::setenv("TMPDIR", dir_.path().c_str(), 1);
    }
    ~PrivateTmpdir()
    {
        if (old_)
            ::setenv("TMPDIR", old_->c_str(), 1);
        else
            ::unsetenv("TMPDIR");
    }
    // Scratch directories the remote runs left here (they must remove them all).
    int64_t scratch_dirs() const
    {
        int64_t n = 0;
        for (const auto& e : fs::directory_iterator(dir_.path()))
            n += e.path().filename().string().rfind("embedlab-remote-", 0) == 0;
        return n;
    }

private:
    TempDir dir_; // made under the real $TMPDIR, before it changes
    std::optional<std::string> old_;
};

} // namespace

TEST(AnalysesRemote, RowsEqualTheLocalRows)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    const PrivateTmpdir tmp;
    // Every method: the host runs the same request (its ids sent as ids).
    for (const std::string method : {"pca", "tt", "lle", "fourier", "flat"}) {
        const auto request = remote_request(method);
        // Through the public call, as the window makes it: the worker from the target.
        auto target = remote_target(s);
        target.remote_cli = worker_in(dir).cli;
        target.remote_dir = worker_in(dir).dir;
        const auto remote = app::compress_and_evaluate(request, target);
        const auto local = app::compress_and_evaluate(request);
        EXPECT_EQ(remote.host, s.host());
        EXPECT_EQ(remote.method, method);
        EXPECT_EQ(remote.parameters, local.parameters); // the first 1024 ids, no "whole text" note
        EXPECT_EQ(remote.params_before, local.params_before);
        EXPECT_EQ(remote.params_after, local.params_after);
        EXPECT_EQ(remote.ratio, local.ratio);
        // Same code, machine and ids; floating-point sums differ in the last digits
        // between processes (libtorch/OpenBLAS reductions over threads), about 4e-8
        // here, as in remote_e2e_test. Different ids would differ by about 1e-3.
        EXPECT_LT(relative(remote.ppl, local.ppl), 1e-6) << method;
        EXPECT_LT(relative(remote.ppl_original, local.ppl_original), 1e-6) << method;
        EXPECT_NEAR(remote.delta_ln_ppl, local.delta_ln_ppl, 1e-6) << method;
        if (method == "flat")
            EXPECT_TRUE(std::isnan(remote.mean_cosine) && std::isnan(local.mean_cosine));
        else
            EXPECT_LT(relative(remote.mean_cosine, local.mean_cosine), 1e-6) << method;
    }
    // Each row's baseline is its own job's: another ctx on the same model and text gives
    // its own original perplexity (a cache keyed by host, model and text gave the first's).
    auto target = remote_target(s);
    target.remote_cli = worker_in(dir).cli;
    target.remote_dir = worker_in(dir).dir;
    auto request = remote_request("pca");
    const auto first = app::compress_and_evaluate(request, target);
    request.ctx = request.stride = 32;
    const auto shorter = app::compress_and_evaluate(request, target);
    EXPECT_LT(relative(shorter.ppl_original, app::compress_and_evaluate(request).ppl_original), 1e-6);
    EXPECT_GT(relative(shorter.ppl_original, first.ppl_original), 1e-4);
    EXPECT_EQ(tmp.scratch_dirs(), 0);
    // Nothing compressed is left on the host: the jobs' directories are removed.
    EXPECT_FALSE(fs::exists(dir / "remote" / "jobs") && !fs::is_empty(dir / "remote" / "jobs"));
}

TEST(AnalysesRemote, UnreachableHostAndBadRankAreNamed)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    auto request = remote_request("pca");
    auto target = remote_target(s);
    target.host = "127.0.0.1:1"; // nobody listens there
    try {
        app::detail::remote_compress_and_evaluate(request, target, {}, worker_in(dir));
        FAIL() << "an unreachable host gave a row";
    } catch (const embedlab::RemoteError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("127.0.0.1:1: ", 0), 0u) << e.what();
    }
    request = remote_request("pca");
    request.rank = 100000;
    EXPECT_THROW(app::detail::remote_compress_and_evaluate(request, remote_target(s), {}, worker_in(dir)),
                 embedlab::InputError);
}

TEST(AnalysesRemote, CancelThrowsAndLeavesNoOutput)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    const PrivateTmpdir tmp;
    auto request = remote_request("pca");
    request.eval_tokens = 0; // the whole text: the host is still evaluating when the cancel comes
    // Cancel once the host reports the fit done and the evaluation under way.
    std::atomic<int64_t> furthest = 0;
    std::vector<int64_t> seen; // the progress the window's bar would show
    const auto cancel_in_eval = [&](int64_t done, int64_t) {
        furthest = std::max<int64_t>(furthest, done);
        if (seen.empty() || seen.back() != done)
            seen.push_back(done);
        return done < 300;
    };
    EXPECT_THROW(
        app::detail::remote_compress_and_evaluate(request, remote_target(s), cancel_in_eval, worker_in(dir)),
        embedlab::Cancelled);
    EXPECT_GE(furthest.load(), 300); // the worker did run
    EXPECT_GT(seen.size(), 3u) << "the host's progress reaches the bar as it happens";
    EXPECT_LT(furthest.load(), 1000) << ::testing::PrintToString(seen);
    EXPECT_EQ(tmp.scratch_dirs(), 0);
    // The worker wrote no model: no job directory holds an "out".
    if (fs::exists(dir / "remote" / "jobs")) {
        for (const auto& job : fs::directory_iterator(dir / "remote" / "jobs"))
            EXPECT_FALSE(fs::exists(job.path() / "out")) << job.path();
    }
}
