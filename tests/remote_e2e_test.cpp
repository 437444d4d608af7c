// End to end through a real sshd on 127.0.0.1 (tests/sshd_fixture.hpp): doctor,
// a remote compress + measure job equal to the local run, no command injection,
// a killed sshd or worker ending the job as failed, the host pool.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <fstream>
#include <set>

#include "cli_support.hpp"
#include "embedlab/job.hpp"
#include "embedlab/model.hpp"
#include "embedlab/remote.hpp"
#include "embedlab/resources.hpp"
#include "sshd_fixture.hpp"

using embedlab::test::cli;
using embedlab::test::shared_server;
using embedlab::test::SshServer;
using embedlab::test::TempDir;
using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

embedlab::RemoteOptions options_for(const SshServer& s, const fs::path& remote_dir)
{
    embedlab::RemoteOptions o;
    o.ssh_config = s.ssh_config;
    o.remote_cli = EMBEDLAB_CLI_PATH;
    o.remote_dir = remote_dir.string();
    return o;
}

std::string local_hostname()
{
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
}

// A short evaluation text from the bundled sample.
fs::path short_text(const TempDir& dir, const std::string& name = "eval.txt")
{
    const auto text = embedlab::test::read_text(embedlab::default_sample_text_path());
    std::ofstream(dir / name) << text.substr(0, 1500);
    return dir / name;
}

Json measure_options()
{
    return {{"tokens", 16}, {"repeat", 2}, {"lookups", 8}, {"power", "off"}};
}

// pca rank 16 of the bundled model into `out`, then measured.
Json pca16_measure_job(const fs::path& out)
{
    return {{"kind", "compress"},  {"model", embedlab::default_model_path().string()},
            {"method", "pca"},     {"rank", 16},
            {"out", out.string()}, {"measure", measure_options()}};
}

} // namespace

TEST(RemoteEndToEnd, DoctorReportsTheHost)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const auto r = cli({"remote", "doctor", s.host(), "--ssh-config", s.ssh_config.string(), "--remote-cli",
                        EMBEDLAB_CLI_PATH, "--json"});
    const auto j = embedlab::test::json_of(r);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["reachable"], true);
    EXPECT_EQ(j["embedlab_cli"], true);
    EXPECT_EQ(j["version_matches"], true);
    EXPECT_EQ(j["identity"]["hostname"], local_hostname());
    EXPECT_GE(j["identity"]["cpu_cores"].get<int>(), 1);
    EXPECT_GT(j["identity"]["memory_bytes"].get<int64_t>(), 0);
    EXPECT_TRUE(j["identity"].contains("power_sampling"));

    const auto human = cli({"remote", "doctor", "loopback", "--ssh-config", s.ssh_config.string(),
                            "--remote-cli", EMBEDLAB_CLI_PATH});
    EXPECT_EQ(human.exit_code, 0) << human.err;
    EXPECT_NE(human.out.find("reachable; embedlab-cli " EMBEDLAB_VERSION " (matches"), std::string::npos)
        << human.out;

    // Nobody listens on the fixture's port + 1 (most likely): a clear failure, exit 1.
    const auto down =
        cli({"remote", "doctor", "127.0.0.1:1", "--ssh-config", s.ssh_config.string(), "--json"});
    EXPECT_EQ(down.exit_code, 1);
    EXPECT_NE(down.out.find("cannot connect"), std::string::npos) << down.out;
}

TEST(RemoteEndToEnd, EveryMethodRunsAsAJobAndMatchesTheLocalRun)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    const auto text = short_text(dir);
    const auto sample = embedlab::default_sample_text_path().string();
    const std::string model = embedlab::default_model_path().string();
    // One job per method family the worker once refused: the experiment API's request JSON.
    const std::vector<Json> jobs = {
        {{"method", "lle"}, {"freq_text", sample}, {"keep_ratio", 0.5}, {"k", 4}},
        {{"method", "fourier"}, {"mlp", "linear"}, {"steps", 20}},
        {{"method", "flat"}, {"remaining", 0.5}, {"calib_text", sample}, {"samples", 8}, {"seqlen", 64}},
        {{"method", "pca"}, {"rank", 8}, {"lora_rank", 4}, {"lora_steps", 3}, {"train_text", sample}},
    };
    for (const auto& fields : jobs) {
        Json job = {{"kind", "compress"}, {"model", model}};
        job.update(fields);
        job["eval_text"] = text.string();
        job["ctx"] = 32;
        const std::string method = fields["method"];
        job["out"] = (dir / ("local-" + method)).string();
        const auto local = nlohmann::json::parse(embedlab::run_job(job).dump());
        job["out"] = (dir / ("remote-" + method)).string();
        std::ofstream(dir / "job.json") << job.dump();
        const auto r = cli({"remote", "run", s.host(), (dir / "job.json").string(), "--ssh-config",
                            s.ssh_config.string(), "--remote-cli", EMBEDLAB_CLI_PATH, "--remote-dir",
                            (dir / "remote-cache").string(), "--quiet"});
        const auto remote = embedlab::test::json_of(r);
        ASSERT_TRUE(remote.is_object()) << method << ": " << r.err;
        const auto& ls = local["summary"];
        const auto& rs = remote["summary"];
        EXPECT_EQ(rs["parameters"], ls["parameters"]) << method;
        EXPECT_EQ(rs["params_after"], ls["params_after"]) << method;
        EXPECT_EQ(rs["eval_tokens"], ls["eval_tokens"]) << method;
        EXPECT_NEAR(rs["ppl"].get<double>(), ls["ppl"].get<double>(), 1e-5 * ls["ppl"].get<double>())
            << method;
        // The fetched directory is a model: it loads, with the manifest's method.
        auto back = embedlab::load_model(dir / ("remote-" + method), {.need_tokenizer = false});
        EXPECT_EQ(remote["manifest"]["evaluation"]["tokens"], local["manifest"]["evaluation"]["tokens"])
            << method;
        EXPECT_TRUE(back.model != nullptr) << method;
    }
}

TEST(RemoteEndToEnd, CompressAndMeasureMatchTheLocalRun)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    const auto text = short_text(dir);
    Json job = {{"kind", "compress"},
                {"model", embedlab::default_model_path().string()},
                {"method", "pca"},
                {"rank", 16},
                {"eval_text", text.string()},
                {"ctx", 32},
                {"measure", measure_options()}};
    job["out"] = (dir / "local").string();
    // Compared as the CLI's plain JSON (same key order rules on both sides).
    const auto local = nlohmann::json::parse(embedlab::run_job(job).dump());
    job["out"] = (dir / "remote").string();
    std::ofstream(dir / "job.json") << job.dump();
    const auto r =
        cli({"remote", "run", s.host(), (dir / "job.json").string(), "--ssh-config", s.ssh_config.string(),
             "--remote-cli", EMBEDLAB_CLI_PATH, "--remote-dir", (dir / "remote-cache").string(), "--quiet"});
    const auto remote = embedlab::test::json_of(r);
    ASSERT_TRUE(remote.is_object()) << r.err;

    const auto& lm = local["manifest"];
    const auto& rm = remote["manifest"];
    EXPECT_EQ(rm["accounting"], lm["accounting"]);
    // Same code and machine; floating-point sums differ in the last digits between
    // processes (thread scheduling of libtorch/OpenBLAS reductions), about 1e-7 here.
    const auto close = [](const nlohmann::json& a, const nlohmann::json& b) {
        return std::abs(a.get<double>() - b.get<double>()) <= 1e-6 * std::abs(b.get<double>());
    };
    EXPECT_EQ(rm["reconstruction"]["worst_row"], lm["reconstruction"]["worst_row"]);
    for (const char* key : {"relative_frobenius", "mean_cosine", "worst_cosine"})
        EXPECT_TRUE(close(rm["reconstruction"][key], lm["reconstruction"][key])) << key;
    EXPECT_TRUE(close(rm["evaluation"]["baseline"]["ppl"], lm["evaluation"]["baseline"]["ppl"]));
    EXPECT_TRUE(close(rm["evaluation"]["compressed"]["ppl"], lm["evaluation"]["compressed"]["ppl"]));
    EXPECT_EQ(rm["evaluation"]["tokens"], lm["evaluation"]["tokens"]);
    EXPECT_EQ(remote["measure"]["energy_model"], local["measure"]["energy_model"]);
    EXPECT_EQ(remote["measure"]["embedding_parameters"], local["measure"]["embedding_parameters"]);
    EXPECT_EQ(remote["measure"]["tokens"], 16);
    EXPECT_GT(remote["measure"]["lookup"]["ms_per_token_mean"].get<double>(), 0);
    EXPECT_GT(remote["measure"]["end_to_end"]["seconds_mean"].get<double>(), 0);
    EXPECT_GT(remote["measure"]["peak_rss_bytes"].get<int64_t>(), 0);
    EXPECT_EQ(remote["measure"]["energy_measured"]["available"], false);
    // The host's identity, and the output fetched back intact (loading checks the
    // sha256 its embedlab.json records).
    EXPECT_EQ(remote["host"]["hostname"], local_hostname());
    EXPECT_EQ(remote["remote"]["host"], s.host());
    EXPECT_EQ(remote["out"], (dir / "remote").string());
    EXPECT_EQ(embedlab::load_model(dir / "remote").model->token_embedding().kind(), "pca");
    // Inputs are content-addressed: the model and the text, once each.
    EXPECT_EQ(std::distance(fs::directory_iterator(dir / "remote-cache" / "blobs"), fs::directory_iterator()),
              2);
}

TEST(RemoteEndToEnd, QuotesAndSemicolonsReachNoShell)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    const auto marker = dir / "injected";
    // File names hold no '/': the injected command would touch a relative name in
    // the shell's directory (the remote home, or the job directory).
    const std::string relative_marker = "embedlab-injected-" + std::to_string(::getpid());
    const std::string evil = "; touch " + relative_marker + "; echo '$(touch " + relative_marker + ")' \"q\"";
    const auto model = dir / ("model " + evil);
    fs::create_directory_symlink(embedlab::default_model_path(), model);
    const auto text = short_text(dir, "text" + evil + ".txt");
    const Json job = {{"kind", "eval"}, {"model", model.string()}, {"text", text.string()}, {"ctx", 32}};
    const auto local = embedlab::run_job(job);

    const auto options = options_for(s, dir / ("cache $(touch " + marker.string() + ") 'x';y"));
    embedlab::SshSession session(embedlab::parse_host(s.host()), options);
    std::vector<std::string> logs;
    const auto collect = [&](const Json& e) {
        if (e["event"] == "log")
            logs.push_back(e["message"].get<std::string>());
    };
    const auto remote = embedlab::run_remote_job(session, job, collect);
    EXPECT_NEAR(remote["ppl"].get<double>(), local["ppl"].get<double>(), 1e-6 * local["ppl"].get<double>());
    EXPECT_EQ(remote["tokens"], local["tokens"]);
    logs.clear();
    embedlab::run_remote_job(session, job, collect); // second time: nothing copied
    EXPECT_EQ(std::count_if(
                  logs.begin(), logs.end(),
                  [](const std::string& m) { return m.find("already on the host") != std::string::npos; }),
              2);
    EXPECT_THROW(embedlab::SshSession(embedlab::parse_host("127.0.0.1;touch " + marker.string()), options),
                 embedlab::RemoteError);
    EXPECT_FALSE(fs::exists(marker));
    for (const fs::path& where :
         {fs::current_path(), fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/"), dir.path()})
        EXPECT_FALSE(fs::exists(where / relative_marker)) << where;
}

TEST(RemoteEndToEnd, KilledSshdFailsTheJobAndLeavesNoOutput)
{
    SshServer own; // killed below, so not the shared one
    REQUIRE_SSHD(own);
    const TempDir dir;
    const Json job = pca16_measure_job(dir / "out");
    embedlab::SshSession session(embedlab::parse_host(own.host()), options_for(own, dir / "cache"));
    try {
        embedlab::run_remote_job(session, job, [&](const Json& e) {
            if (e["event"] == "started")
                own.kill_all();
        });
        ADD_FAILURE() << "the job succeeded although sshd was killed";
    } catch (const embedlab::RemoteError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(own.host()), std::string::npos) << m;
        EXPECT_NE(m.find("without a result"), std::string::npos) << m;
    }
    EXPECT_FALSE(fs::exists(dir / "out"));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1); // cache/ only
}

TEST(RemoteEndToEnd, KilledWorkerFailsTheJob)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    const Json job = pca16_measure_job(dir / "out");
    embedlab::SshSession session(embedlab::parse_host(s.host()), options_for(s, dir / "cache"));
    EXPECT_THROW(embedlab::run_remote_job(session, job,
                                          [&](const Json& e) {
                                              if (e["event"] == "started")
                                                  ::kill(e["pid"].get<pid_t>(), SIGKILL);
                                          }),
                 embedlab::RemoteError);
    EXPECT_FALSE(fs::exists(dir / "out"));
    // The session still works for the next job.
    const Json measure = {{"kind", "measure"}, {"model", embedlab::default_model_path().string()},
                          {"tokens", 8},       {"repeat", 1},
                          {"lookups", 4},      {"power", "off"}};
    EXPECT_EQ(embedlab::run_remote_job(session, measure)["measure"]["tokens"], 8);
}

TEST(RemoteEndToEnd, PoolSpreadsJobsOverReachableHosts)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    std::vector<Json> jobs;
    for (int tokens : {4, 8, 12})
        jobs.push_back({{"kind", "measure"},
                        {"model", embedlab::default_model_path().string()},
                        {"tokens", tokens},
                        {"repeat", 1},
                        {"lookups", 4},
                        {"power", "off"}});
    const auto hosts = embedlab::parse_host_list(s.host() + ",loopback,127.0.0.1:1");
    const auto outcomes = embedlab::run_job_pool(jobs, hosts, options_for(s, dir / "cache"));
    ASSERT_EQ(outcomes.size(), 3u);
    for (size_t i = 0; i < outcomes.size(); ++i) {
        EXPECT_TRUE(outcomes[i].ok) << outcomes[i].error;
        EXPECT_NE(outcomes[i].host, "127.0.0.1:1");
        EXPECT_EQ(outcomes[i].result["measure"]["tokens"], jobs[i]["tokens"]);
    }
}

// Issue 24 items 12 and 17: inputs are checked before anything is sent, a model
// directory sends only what a loader reads, links out of it are refused, and a
// failed job takes its uploads away again.
TEST(RemoteEndToEnd, InputsAreCheckedAndOnlyModelFilesAreSent)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    const auto text = short_text(dir);
    embedlab::SshSession session(embedlab::parse_host(s.host()), options_for(s, dir / "cache"));
    auto error_of = [&](const Json& job) {
        try {
            embedlab::run_remote_job(session, job);
        } catch (const embedlab::InputError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    // Not a model: refused before any copy.
    fs::create_directories(dir / "etc-like" / "sub");
    std::ofstream(dir / "etc-like" / "shadow") << "secret";
    const auto not_model =
        error_of({{"kind", "eval"}, {"model", (dir / "etc-like").string()}, {"text", text.string()}});
    EXPECT_NE(not_model.find("is not a model directory"), std::string::npos) << not_model;
    const auto text_dir = error_of({{"kind", "eval"},
                                    {"model", embedlab::default_model_path().string()},
                                    {"text", (dir / "etc-like").string()}});
    EXPECT_NE(text_dir.find("takes a text file"), std::string::npos) << text_dir;
    EXPECT_FALSE(fs::exists(dir / "cache" / "blobs"));

    // A model directory with extra files: only the loader's files are sent.
    const auto model = dir / "model";
    fs::create_directory(model);
    for (const auto& e : fs::directory_iterator(embedlab::default_model_path()))
        if (e.is_regular_file())
            fs::copy_file(e.path(), model / e.path().filename());
    std::ofstream(model / "notes-private.txt") << "not for the host";
    fs::create_directory_symlink(dir / "etc-like", model / "linked-dir");
    const Json job = {{"kind", "eval"}, {"model", model.string()}, {"text", text.string()}, {"ctx", 32}};
    const auto remote = embedlab::run_remote_job(session, job);
    EXPECT_GT(remote["ppl"].get<double>(), 1);
    std::set<std::string> sent;
    for (const auto& e : fs::recursive_directory_iterator(dir / "cache" / "blobs"))
        sent.insert(e.path().filename().string());
    EXPECT_TRUE(sent.count("config.json"));
    EXPECT_TRUE(sent.count("model.safetensors"));
    EXPECT_FALSE(sent.count("notes-private.txt"));
    EXPECT_FALSE(sent.count("shadow"));

    // A loader file that links out of the directory is refused.
    const auto linked = dir / "linked";
    fs::create_directory(linked);
    for (const auto& e : fs::directory_iterator(model))
        if (e.is_regular_file() && e.path().filename() != "config.json")
            fs::copy_file(e.path(), linked / e.path().filename());
    fs::create_symlink(model / "config.json", linked / "config.json");
    const auto outside = error_of({{"kind", "eval"}, {"model", linked.string()}, {"text", text.string()}});
    EXPECT_NE(outside.find("outside"), std::string::npos) << outside;

    // A failed job (an empty text) removes what it copied; a fresh cache shows it.
    std::ofstream(dir / "empty.txt") << "";
    embedlab::SshSession fresh(embedlab::parse_host(s.host()), options_for(s, dir / "cache2"));
    EXPECT_ANY_THROW(embedlab::run_remote_job(
        fresh, {{"kind", "eval"}, {"model", model.string()}, {"text", (dir / "empty.txt").string()}}));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir / "cache2" / "blobs"), fs::directory_iterator()), 0);
}

// A host that puts a link into the job's output: the fetch is refused, nothing written.
TEST(RemoteEndToEnd, LinksInTheFetchedOutputAreRefused)
{
    auto& s = shared_server();
    REQUIRE_SSHD(s);
    const TempDir dir;
    const auto fake = dir / "fake-cli";
    std::ofstream(fake) << "#!/bin/sh\nmkdir -p out && echo data > out/file && ln -s /etc/passwd out/passwd\n"
                           "echo '{\"event\": \"result\", \"result\": {\"kind\": \"compress\"}}'\n";
    fs::permissions(fake, fs::perms::owner_all);
    auto options = options_for(s, dir / "cache");
    options.remote_cli = fake.string();
    embedlab::SshSession session(embedlab::parse_host(s.host()), options);
    try {
        embedlab::run_remote_job(session, pca16_measure_job(dir / "out"));
        ADD_FAILURE() << "a link in the output was fetched";
    } catch (const embedlab::RemoteError& e) {
        EXPECT_NE(std::string(e.what()).find("a link, 'passwd'"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir / "out"));
}
