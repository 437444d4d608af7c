// Remote execution: host strings, quoting, subprocesses, power parsing, the
// worker, and end-to-end runs through a real sshd on 127.0.0.1 (skipped when
// sshd cannot be started).
#include <csignal>
#include <fstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_support.hpp"
#include "embedlab/job.hpp"
#include "embedlab/power.hpp"
#include "embedlab/remote.hpp"
#include "embedlab/resources.hpp"
#include "job/job_check.hpp"
#include "remote/worker_events.hpp"

using embedlab::test::cli;
using embedlab::test::TempDir;
using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

TEST(RemoteHost, ParsesUserHostAndPort)
{
    auto h = embedlab::parse_host("pi@raspberrypi.local:2222");
    EXPECT_EQ(h.destination, "pi@raspberrypi.local");
    EXPECT_EQ(h.port, 2222);
    h = embedlab::parse_host("pi5");
    EXPECT_EQ(h.destination, "pi5");
    EXPECT_EQ(h.port, 0);
    h = embedlab::parse_host("root@[::1]:22");
    EXPECT_EQ(h.destination, "root@::1");
    EXPECT_EQ(h.port, 22);
    h = embedlab::parse_host("fe80::1"); // a bare v6 address has no port
    EXPECT_EQ(h.destination, "fe80::1");
    EXPECT_EQ(h.port, 0);
    EXPECT_THROW(embedlab::parse_host(""), embedlab::InputError);
    EXPECT_THROW(embedlab::parse_host("-oProxyCommand=x"), embedlab::InputError);
    EXPECT_THROW(embedlab::parse_host("host:99999"), embedlab::InputError);
    EXPECT_THROW(embedlab::parse_host("host:"), embedlab::InputError);
    EXPECT_EQ(embedlab::parse_host_list("a,b:23").size(), 2u);
}

TEST(RemoteQuote, ShellGetsTheWordBack)
{
    const TempDir dir;
    const auto marker = dir / "injected";
    for (const std::string& word :
         {std::string("plain"), std::string("it's"), std::string("a b\tc"), "x; touch " + marker.string(),
          "$(touch " + marker.string() + ")", std::string("`id` \"q\" \\ * ?"), std::string("")}) {
        const auto r = embedlab::run_command({"/bin/sh", "-c", "printf %s " + embedlab::shell_quote(word)},
                                             "", std::chrono::seconds(10));
        EXPECT_EQ(r.status, 0);
        EXPECT_EQ(r.out, word);
    }
    EXPECT_FALSE(fs::exists(marker));
}

// A client killed with SIGKILL leaves its connection directory (and master) behind;
// the next session stops that master and removes the directory, and only that one.
TEST(RemoteSsh, StaleConnectionDirectoriesOfDeadClientsAreCleaned)
{
    const TempDir dir;
    const pid_t child = ::fork();
    if (child == 0)
        ::_exit(0);
    ASSERT_GT(child, 0);
    ::waitpid(child, nullptr, 0); // a pid that no longer runs
    auto make = [&](const std::string& name, long owner) {
        fs::create_directories(dir / name);
        std::ofstream(dir / name / "owner.pid") << owner << '\n';
        std::ofstream(dir / name / "cm") << "socket stand-in";
    };
    make("embedlab-ssh-dead01", child);
    make("embedlab-ssh-alive1", ::getpid());
    make("other-ssh-dead01", child);
    const auto calls = dir / "calls";
    const auto fake_ssh = dir / "fake-ssh";
    std::ofstream(fake_ssh) << "#!/bin/sh\necho \"$@\" >> '" << calls.string() << "'\n";
    fs::permissions(fake_ssh, fs::perms::owner_all);

    EXPECT_EQ(embedlab::remove_stale_ssh_directories(dir.path(), fake_ssh.string()), 1);
    EXPECT_FALSE(fs::exists(dir / "embedlab-ssh-dead01"));
    EXPECT_TRUE(fs::exists(dir / "embedlab-ssh-alive1"));
    EXPECT_TRUE(fs::exists(dir / "other-ssh-dead01"));
    std::ifstream in(calls);
    std::string line;
    ASSERT_TRUE(std::getline(in, line)) << "the stale master was not asked to exit";
    EXPECT_NE(line.find("ControlPath=" + (dir / "embedlab-ssh-dead01" / "cm").string()), std::string::npos)
        << line;
    EXPECT_NE(line.find("-O exit"), std::string::npos) << line;
    EXPECT_FALSE(std::getline(in, line)) << "only the dead client's master: " << line;
}

TEST(RemoteSubprocess, ReportsExecFailureAndStopsAtTimeout)
{
    EXPECT_THROW(embedlab::Subprocess({"/nonexistent/embedlab-no-such-program"}), embedlab::InputError);
    const auto r = embedlab::run_command({"sleep", "30"}, "", std::chrono::milliseconds(200));
    EXPECT_TRUE(r.timed_out);
    EXPECT_EQ(r.status, -1);
    const auto cat = embedlab::run_command({"cat"}, "line one\nline two", std::chrono::seconds(10));
    EXPECT_EQ(cat.status, 0);
    EXPECT_EQ(cat.out, "line one\nline two");
    EXPECT_EQ(embedlab::run_command({"sh", "-c", "exit 3"}, "", std::chrono::seconds(10)).status, 3);
}

// Issue 24, item 13: a peer that never prints a newline is cut off at 64 MB
// with a message, instead of growing the client without bound.
TEST(RemoteSubprocess, EndlessLineIsCutOffWithAMessage)
{
    embedlab::Subprocess p({"sh", "-c", "head -c 100000000 /dev/zero"});
    size_t lines = 0;
    try {
        p.pump([&](std::string_view) { ++lines; }, std::chrono::seconds(60));
        ADD_FAILURE() << "read 100 MB without a newline";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("sh: printed more than 64 MB without a newline"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(lines, 0u);
}

TEST(RemotePower, ParsesPmicReadAdcAndIntegrates)
{
    // Abridged output of `vcgencmd pmic_read_adc` on a Raspberry Pi 5.
    const std::string canned = "     3V7_WL_SW_A current(0)=0.10000000A\n"
                               "       3V3_SYS_A current(1)=0.20000000A\n"
                               "        VDD_CORE_A current(7)=2.00000000A\n"
                               "     3V7_WL_SW_V volt(8)=3.70000000V\n"
                               "       3V3_SYS_V volt(9)=3.30000000V\n"
                               "        VDD_CORE_V volt(15)=0.80000000V\n"
                               "        EXT5V_V volt(24)=5.10000000V\n"
                               "        BATT_V volt(25)=0.00000000V\n";
    const auto watts = embedlab::parse_pmic_read_adc(canned);
    ASSERT_TRUE(watts.has_value());
    EXPECT_NEAR(*watts, 0.1 * 3.7 + 0.2 * 3.3 + 2.0 * 0.8, 1e-12);
    EXPECT_FALSE(embedlab::parse_pmic_read_adc("error=1 error_msg=\"Command not registered\"\n"));
    // 2 W above a 1 W idle for 3 s: 6 J; a ramp from 1 to 3 W over 2 s: 2 J above idle.
    EXPECT_NEAR(embedlab::integrate_energy({{0, 3}, {1, 3}, {3, 3}}, 1.0), 6.0, 1e-12);
    EXPECT_NEAR(embedlab::integrate_energy({{0, 1}, {2, 3}}, 1.0), 2.0, 1e-12);
    EXPECT_NEAR(embedlab::mean_power({{0, 1}, {2, 3}}), 2.0, 1e-12);
    if (!embedlab::find_executable("vcgencmd")) {
        std::string why;
        EXPECT_FALSE(embedlab::power_sampling_available(&why));
        EXPECT_NE(why.find("vcgencmd"), std::string::npos) << why;
    }
}

TEST(RemoteJob, RejectsBadJobs)
{
    EXPECT_THROW(embedlab::check_job(Json::array()), embedlab::InputError);
    EXPECT_THROW(embedlab::check_job({{"kind", "train"}, {"model", "m"}}), embedlab::InputError);
    EXPECT_THROW(embedlab::check_job({{"kind", "compress"}, {"model", "m"}, {"method", "pca"}}),
                 embedlab::InputError); // no out, no rank
    EXPECT_NO_THROW(embedlab::check_job({{"kind", "measure"}, {"model", "m"}}));
    // Mistyped fields are the job's fault (InputError naming the field), not a JSON exception.
    const std::vector<std::pair<Json, std::string>> mistyped = {
        {{{"kind", 5}, {"model", "m"}}, "\"kind\""},
        {{{"kind", "compress"},
          {"model", "m"},
          {"out", "o"},
          {"method", "tt"},
          {"shape", {4, 4, 8}},
          {"eps", "0.3"}},
         "\"eps\""},
        {{{"kind", "measure"}, {"model", "m"}, {"power", 1}}, "\"power\""},
        {{{"kind", "measure"}, {"model", "m"}, {"tokens", "50"}}, "\"tokens\""},
        {{{"kind", "eval"}, {"model", "m"}, {"text", "t"}, {"ctx", 0}}, "\"ctx\""},
        {{{"kind", "eval"}, {"model", "m"}, {"text", "t"}, {"ctx", 64}, {"stride", 65}}, "\"stride\""},
        {{{"kind", "compress"},
          {"model", "m"},
          {"out", "o"},
          {"method", "pca"},
          {"rank", 4},
          {"force", "yes"}},
         "\"force\""},
        {{{"kind", "compress"},
          {"model", "m"},
          {"out", "o"},
          {"method", "pca"},
          {"rank", 4},
          {"measure", {{"repeat", 0}}}},
         "\"repeat\""},
    };
    for (const auto& [job, field] : mistyped) {
        try {
            embedlab::check_job(job);
            ADD_FAILURE() << "accepted " << job.dump();
        } catch (const embedlab::InputError& e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        }
    }
    const auto m = embedlab::detail::measure_options({{"tokens", 20}, {"power", "off"}});
    EXPECT_EQ(m.tokens, 20);
    EXPECT_EQ(m.repeat, 5);
    EXPECT_EQ(m.power, "off");
}

TEST(RemoteJob, NormalisesWorkerLinesFromTheOtherMachine)
{
    using embedlab::detail::parse_worker_line;
    using Kind = embedlab::detail::WorkerLine::Kind;
    auto p = parse_worker_line(R"({"event":"progress","stage":"eval","done":3,"total":10})");
    EXPECT_EQ(p.kind, Kind::Progress);
    EXPECT_EQ(p.json, Json({{"event", "progress"}, {"stage", "eval"}, {"done", 3}, {"total", 10}}));
    // Beyond int64, negative, done > total: clamped so that 0 <= done <= total.
    p = parse_worker_line(R"({"event":"progress","stage":"x","done":18446744073709551615,"total":-4})");
    EXPECT_EQ(p.kind, Kind::Progress);
    EXPECT_EQ(p.json["done"], 0);
    EXPECT_EQ(p.json["total"], 0);
    // An experiment's overall share survives, within [0, 1] (the workbench's one bar reads it).
    p = parse_worker_line(
        R"({"event":"progress","stage":"eval original","done":3,"total":10,"overall":0.25})");
    EXPECT_EQ(p.json["overall"], 0.25);
    p = parse_worker_line(R"({"event":"progress","stage":"x","done":3,"total":10,"overall":7})");
    EXPECT_EQ(p.json["overall"], 1.0);
    p = parse_worker_line(R"({"event":"progress","done":"3","total":10})");
    EXPECT_EQ(p.kind, Kind::Text); // not a progress event we can read: shown as text
    EXPECT_EQ(p.json["message"], R"({"event":"progress","done":"3","total":10})");
    p = parse_worker_line(R"({"event":"log","message":["x"]})");
    EXPECT_EQ(p.kind, Kind::Log);
    EXPECT_EQ(p.json["message"], "");
    p = parse_worker_line(R"({"event":"result","result":{"kind":"eval","ppl":1.5}})");
    EXPECT_EQ(p.kind, Kind::Result);
    EXPECT_EQ(p.json["ppl"], 1.5);
    p = parse_worker_line("warning: plain text");
    EXPECT_EQ(p.kind, Kind::Text);
    EXPECT_EQ(p.json["message"], "warning: plain text");

    p = parse_worker_line(R"({"event":"error","error_kind":5,"message":"boom"})");
    ASSERT_EQ(p.kind, Kind::Error);
    try {
        embedlab::detail::throw_worker_error("pi", p.json);
        FAIL();
    } catch (const embedlab::RemoteError& e) {
        EXPECT_EQ(std::string(e.what()), "pi: the worker failed: boom");
    }
    p = parse_worker_line(R"({"event":"error","error_kind":"input","message":"m: no config.json"})");
    EXPECT_THROW(embedlab::detail::throw_worker_error("pi", p.json), embedlab::InputError);
    p = parse_worker_line(R"({"event":"error","error_kind":"cancelled"})");
    EXPECT_THROW(embedlab::detail::throw_worker_error("pi", p.json), embedlab::Cancelled);
}

TEST(RemoteWorker, RunsAMeasureJobLocallyAsJsonLines)
{
    const TempDir dir;
    std::ofstream(dir / "job.json") << Json{{"kind", "measure"},
                                            {"model", embedlab::default_model_path().string()},
                                            {"tokens", 8},
                                            {"repeat", 1},
                                            {"lookups", 4},
                                            {"power", "off"}}
                                           .dump();
    const auto r = cli({"worker", "--job", (dir / "job.json").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::vector<Json> events;
    for (std::string line; std::getline(lines, line);)
        events.push_back(Json::parse(line));
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events.front()["event"], "started");
    ASSERT_EQ(events.back()["event"], "result");
    const auto& m = events.back()["result"]["measure"];
    EXPECT_EQ(m["tokens"], 8);
    EXPECT_EQ(m["embedding"], "dense");
    EXPECT_GT(m["peak_rss_bytes"].get<int64_t>(), 0);
    EXPECT_EQ(m["energy_measured"]["available"], false);
    EXPECT_GT(m["energy_model"]["original"].get<double>(), 0);
    EXPECT_TRUE(events.back()["result"]["host"].contains("cpu_cores"));

    std::ofstream(dir / "bad.json") << R"({"kind": "measure"})";
    const auto bad = cli({"worker", "--job", (dir / "bad.json").string()});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.out.find("\"error_kind\":\"input\""), std::string::npos) << bad.out;
}
