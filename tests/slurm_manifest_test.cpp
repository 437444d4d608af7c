// A Slurm sweep directory is a file tree anyone with access may have edited (issue
// 57 items 6, 7, 10): its manifest's job ids reach squeue and scancel only as
// numbers after "--", a resubmission runs this embedlab-cli with only the options
// `sweep --slurm` accepts, event-file text is printed escaped, and a bad result or
// option is one clear refusal naming the file and the field. No Slurm needed: fake
// sbatch, squeue, scancel and scontrol on PATH record their arguments.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace {

namespace fs = std::filesystem;
using embedlab::test::cli;
using embedlab::test::CliRun;
using embedlab::test::read_text;
using embedlab::test::TempDir;

void write(const fs::path& p, const std::string& text)
{
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

// Exit 2, one line, and a message holding each of `needles`.
void expect_refused_with(const CliRun& r, const std::vector<std::string>& needles)
{
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const auto& needle : needles)
        EXPECT_NE(r.err.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << r.err;
}

class SlurmManifest : public ::testing::Test {
protected:
    void SetUp() override
    {
        // Each tool appends its arguments, one a line, then "--end--"; sbatch answers a
        // job id, squeue what squeue.reply holds (nothing queued without it).
        for (const std::string tool : {"sbatch", "squeue", "scancel"}) {
            const auto log = embedlab::test::quote((dir_ / (tool + ".argv")).string());
            const std::string reply =
                tool == "sbatch" ? "echo 4242\n"
                : tool == "squeue"
                    ? "cat " + embedlab::test::quote((dir_ / "squeue.reply").string()) + " 2>/dev/null\n"
                    : "";
            write(dir_ / "bin" / tool,
                  "#!/bin/sh\nprintf '%s\\n' \"$@\" --end-- >>" + log + "\n" + reply + "exit 0\n");
            fs::permissions(dir_ / "bin" / tool, fs::perms::owner_all);
        }
        write(dir_ / "bin" / "scontrol", "#!/bin/sh\nexit 1\n"); // no MaxArraySize to read
        fs::permissions(dir_ / "bin" / "scontrol", fs::perms::owner_all);
        env_ = {"-u", "SLURM_CONF", "PATH=" + (dir_ / "bin").string() + ":" + std::getenv("PATH")};
        sweep_ = dir_ / "sweep";
    }

    CliRun run(const std::vector<std::string>& args) { return cli(args, env_); }

    // Each call's arguments to `tool`.
    std::vector<std::vector<std::string>> calls(const std::string& tool)
    {
        std::vector<std::vector<std::string>> out(1);
        std::istringstream in(read_text(dir_ / (tool + ".argv")));
        for (std::string line; std::getline(in, line);) {
            if (line == "--end--")
                out.emplace_back();
            else
                out.back().push_back(line);
        }
        out.pop_back();
        return out;
    }

    // A two-task sweep directory as sweep --slurm writes it, submitted once (job 4242).
    void write_sweep(nlohmann::json options = nlohmann::json::object())
    {
        write(sweep_ / "sweep.sh", "#!/bin/sh\n");
        fs::create_directories(sweep_ / "logs");
        for (int i = 0; i < 2; ++i)
            write(sweep_ / ("job-" + std::to_string(i) + ".json"), R"({"kind": "compress"})");
        nlohmann::json manifest = {{"format", "embedlab-slurm-sweep"},
                                   {"version", 1},
                                   {"tasks", 2},
                                   {"info", {{"model", "m"}, {"method", "pca"}, {"points", 2}}},
                                   {"submissions", {{{"job_id", "4242"}, {"tasks", {0, 1}}}}}};
        if (!options.empty())
            manifest["options"] = options;
        write(sweep_ / "manifest.json", manifest.dump(1));
    }
    nlohmann::json manifest() { return nlohmann::json::parse(read_text(sweep_ / "manifest.json")); }
    void set_manifest(const nlohmann::json& m) { write(sweep_ / "manifest.json", m.dump(1)); }

    TempDir dir_;
    std::vector<std::string> env_;
    fs::path sweep_;
};

// Item 6: a job id that is an option never reaches scancel (it was `scancel --user=root`:
// every job of that user); real ids follow "--", for squeue too.
TEST_F(SlurmManifest, JobIdsAreNumbersPassedAfterDoubleDash)
{
    write_sweep();
    auto m = manifest();
    m["submissions"][0]["job_id"] = "--user=root";
    set_manifest(m);
    for (const auto& args : {std::vector<std::string>{"sweep-status", sweep_.string(), "--cancel"},
                             std::vector<std::string>{"sweep-status", sweep_.string()},
                             std::vector<std::string>{"sweep-collect", sweep_.string(), "--no-wait"}})
        expect_refused_with(run(args), {(sweep_ / "manifest.json").string(), "submissions[0].job_id",
                                        "'--user=root'", "not a Slurm job id"});
    EXPECT_TRUE(calls("scancel").empty());
    EXPECT_TRUE(calls("squeue").empty());

    m["submissions"][0]["job_id"] = 4242; // a number, not the string sbatch's reply is kept as
    set_manifest(m);
    expect_refused_with(run({"sweep-status", sweep_.string()}), {"submissions[0].job_id is 4242"});

    m["submissions"][0]["job_id"] = "4242";
    m["submissions"].push_back({{"job_id", "4243_1"}, {"tasks", {1}}});
    set_manifest(m);
    const auto r = run({"sweep-status", sweep_.string(), "--cancel"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(calls("scancel").size(), 1u);
    EXPECT_EQ(calls("scancel")[0], (std::vector<std::string>{"--", "4242", "4243_1"}));
    ASSERT_FALSE(calls("squeue").empty());
    const auto squeue = calls("squeue")[0];
    ASSERT_GE(squeue.size(), 3u);
    EXPECT_EQ(std::vector<std::string>(squeue.end() - 3, squeue.end()),
              (std::vector<std::string>{"--jobs", "--", "4242,4243_1"}));
}

// Item 6: --resubmit-failed ran the manifest's options.cli and passed its sbatch_args
// (--export=...LD_PRELOAD=...) unchecked. Now: this embedlab-cli, and only what
// `sweep --slurm --sbatch-arg` accepts, checked again from the manifest.
TEST_F(SlurmManifest, ResubmissionRunsThisCliWithCheckedOptions)
{
    write(
        dir_ / "t.txt",
        read_text(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt").substr(0, 2000));
    write(dir_ / "other-cli", "#!/bin/sh\n");
    const std::vector<std::string> sweep = {
        "sweep",   "--method",    "pca",          "--ranks", "4,8", "--eval-text", (dir_ / "t.txt").string(),
        "--slurm", "--sweep-dir", sweep_.string()};
    auto with = [&](std::vector<std::string> more) {
        auto args = sweep;
        args.insert(args.end(), more.begin(), more.end());
        return args;
    };
    // The command line refuses what the manifest may not hold either, before writing anything.
    expect_refused_with(
        run(with({"--sbatch-arg", "--export=ALL,LD_PRELOAD=/tmp/x.so", "--no-wait", "--quiet"})),
        {"--sbatch-arg: '--export=ALL,LD_PRELOAD=/tmp/x.so' is not an sbatch option"});
    expect_refused_with(run(with({"--sbatch-arg=--partition=gpu", "--no-wait", "--quiet"})),
                        {"--partition is set by sweep's --partition"});
    EXPECT_TRUE(calls("sbatch").empty());
    EXPECT_FALSE(fs::exists(sweep_));

    const auto submitted = run(with({"--sbatch-arg", "--qos=short", "--slurm-cli",
                                     (dir_ / "other-cli").string(), "--no-wait", "--quiet"}));
    ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
    ASSERT_EQ(calls("sbatch").size(), 1u);
    EXPECT_NE(std::find(calls("sbatch")[0].begin(), calls("sbatch")[0].end(), "--qos=short"),
              calls("sbatch")[0].end());
    EXPECT_EQ(calls("sbatch")[0].end()[-2], (dir_ / "other-cli").string()); // --slurm-cli, as given

    // Both tasks ended without a word (no events, not queued): both are resubmitted.
    const std::vector<std::string> resubmit = {"sweep-collect", sweep_.string(), "--resubmit-failed",
                                               "--no-wait"};
    const auto file = (sweep_ / "manifest.json").string();
    auto m = manifest();
    m["options"]["sbatch_args"] = {"--qos=short", "--export=ALL,LD_PRELOAD=/tmp/x.so"};
    set_manifest(m);
    expect_refused_with(run(resubmit), {file, "options.sbatch_args[1]", "'--export=ALL,LD_PRELOAD=/tmp/x.so'",
                                        "is not an sbatch option"});
    m["options"]["sbatch_args"] = {"--qos=short", "sweep.sh"}; // a word sbatch would take for its script
    set_manifest(m);
    expect_refused_with(run(resubmit), {file, "options.sbatch_args[1]", "'sweep.sh'"});
    m["options"]["sbatch_args"] = {"--qos=short"};
    m["options"]["cpus_per_task"] = "4"; // was json.exception.type_error.302, exit 1
    set_manifest(m);
    expect_refused_with(run(resubmit), {file, "options.cpus_per_task is '4', not a whole number"});
    m["options"]["cpus_per_task"] = 4;
    m["options"]["job_name"] = "x --wrap=id";
    set_manifest(m);
    expect_refused_with(run(resubmit), {file, "options.job_name"});
    EXPECT_EQ(calls("sbatch").size(), 1u) << "a refused resubmission reached sbatch";

    m["options"]["job_name"] = "embedlab-sweep";
    m["options"]["cli"] = (dir_ / "evil").string();
    set_manifest(m);
    const auto again = run(resubmit);
    EXPECT_EQ(again.exit_code, 1) << again.err; // the tasks are still failed: nothing ran
    ASSERT_EQ(calls("sbatch").size(), 2u) << again.err;
    const auto argv = calls("sbatch")[1];
    EXPECT_EQ(argv.end()[-2], fs::canonical(EMBEDLAB_CLI_PATH).string()); // this executable, not evil
    EXPECT_EQ(argv.end()[-1], sweep_.string());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--qos=short"), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--cpus-per-task=4"), argv.end());
    EXPECT_EQ(manifest()["options"]["cli"], fs::canonical(EMBEDLAB_CLI_PATH).string());
}

// Item 7: a node name or message from an event file was printed raw (an OSC title
// and a screen clear); now escaped as every other message quoting a file is.
TEST_F(SlurmManifest, EventFileTextIsPrintedEscaped)
{
    write_sweep();
    const std::string evil = "\x1b]0;pwn\x07\x1b[2J";
    write(sweep_ / "logs/task-0.out",
          nlohmann::json({{"event", "started"}, {"slurm", {{"node", evil + "node"}}}}).dump() + "\n" +
              nlohmann::json({{"event", "error"}, {"error_kind", "internal"}, {"message", evil + "boom"}})
                  .dump() +
              "\n");
    write(sweep_ / "logs/task-0.err", "first\n" + evil + "last\n");
    write(sweep_ / "logs/task-1.out",
          nlohmann::json({{"event", "progress"}, {"stage", evil + "fit"}, {"done", 1}, {"total", 2}}).dump() +
              "\n");
    write(dir_ / "squeue.reply", "4242_1|RUNNING|" + evil + "n2\n"); // task 1 runs there
    const auto status = run({"sweep-status", sweep_.string()});
    const auto collected = run({"sweep-collect", sweep_.string(), "--no-wait"});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    EXPECT_EQ(collected.exit_code, 1) << collected.err; // task 0 failed
    for (const auto* r : {&status, &collected})
        for (const auto* text : {&r->out, &r->err}) {
            EXPECT_EQ(text->find('\x1b'), std::string::npos) << *text;
            EXPECT_EQ(text->find('\x07'), std::string::npos) << *text;
        }
    EXPECT_NE(status.out.find("\\x1B]0;pwn\\x07\\x1B[2Jnode"), std::string::npos) << status.out;
    EXPECT_NE(status.out.find("\\x1B]0;pwn\\x07\\x1B[2Jboom"), std::string::npos) << status.out;
    EXPECT_NE(status.out.find("\\x1B]0;pwn\\x07\\x1B[2Jn2  \\x1B]0;pwn\\x07\\x1B[2Jfit 1/2"),
              std::string::npos)
        << status.out;
    EXPECT_NE(collected.err.find("failed: \\x1B]0;pwn\\x07\\x1B[2Jboom"), std::string::npos) << collected.err;
    EXPECT_NE(collected.err.find("stderr: \\x1B]0;pwn\\x07\\x1B[2Jlast"), std::string::npos) << collected.err;
}

// Item 10: a result event without a record was "internal error ... returned no record",
// exit 1; a record missing what the table prints reached undefined behaviour.
TEST_F(SlurmManifest, AResultWithoutARecordIsNamedByItsFile)
{
    write_sweep();
    const auto events = (sweep_ / "logs/task-0.out").string();
    for (int i = 0; i < 2; ++i)
        write(sweep_ / ("logs/task-" + std::to_string(i) + ".out"),
              R"({"event": "result", "result": {"host": {"hostname": "n1"}}})"
              "\n");
    for (const char* json : {"--quiet", "--json"})
        expect_refused_with(run({"sweep-collect", sweep_.string(), "--no-wait", json}),
                            {events + ": the result event has no record"});

    write(events, R"({"event": "result", "result": {"record": {"spec": {"method": "pca", "rank": 4}}}})"
                  "\n");
    expect_refused_with(run({"sweep-collect", sweep_.string(), "--no-wait"}),
                        {events + ": the result event's record gives no number for the column params"});
    write(events, R"({"event": "result", "result": {"record": {"spec": {"method": "pca"}, "accounting": 3}}})"
                  "\n");
    expect_refused_with(run({"sweep-collect", sweep_.string(), "--no-wait"}),
                        {events + ": the result event's record has a missing or mistyped field"});
}

} // namespace
