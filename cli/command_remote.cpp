// remote doctor|run: jobs on other hosts over ssh (engine/include/embedlab/remote.hpp).
#include <fstream>
#include <map>
#include <sstream>

#include "common.hpp"
#include "embedlab/file_input.hpp"
#include "embedlab/json_input.hpp"
#include "embedlab/remote.hpp"
#include "embedlab/text_format.hpp"
#include "progress_printer.hpp"
#include "sweep_table.hpp"

namespace embedlab::cli {

namespace {

const std::set<std::string> kRemoteOptions = {"--ssh-config", "--remote-cli", "--remote-dir",
                                              "--connect-timeout"};

RemoteOptions remote_options(const Args& args)
{
    RemoteOptions o;
    if (auto f = args.get("--ssh-config")) {
        std::error_code ec;
        const auto status = std::filesystem::status(*f, ec);
        if (!std::filesystem::exists(status))
            throw InputError(*f + ": no such ssh config file");
        if (!std::filesystem::is_regular_file(status))
            throw InputError(*f + ": the ssh config is not a regular file (" +
                             (std::filesystem::is_directory(status) ? "a directory"
                              : std::filesystem::is_fifo(status)    ? "a FIFO"
                                                                    : "a special file") +
                             "); give the path of an ssh_config file");
        o.ssh_config = *f;
    }
    o.remote_cli = args.get("--remote-cli").value_or(o.remote_cli);
    o.remote_dir = args.get("--remote-dir").value_or(o.remote_dir);
    o.connect_timeout_seconds = static_cast<int>(args.get_int("--connect-timeout", 10, 1, 600));
    return o;
}

std::string gib(int64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
    return buf;
}

int remote_doctor_command(const std::vector<std::string>& argv)
{
    Args args("remote doctor", argv, kRemoteOptions, {"--json"});
    const auto host = args.single_positional("HOST");
    if (!host)
        throw InputError(
            "remote doctor: HOST is required ([user@]host[:port] or a name from the ssh config)");
    const auto j = remote_doctor(parse_host(*host), remote_options(args));
    const bool ok = j.value("reachable", false) && j.value("embedlab_cli", false);
    if (args.has("--json")) {
        print_json(j);
        return ok ? 0 : 1;
    }
    if (!j.value("reachable", false)) {
        std::printf("%s: not reachable: %s\n", host->c_str(), j.value("error", "").c_str());
        return 1;
    }
    if (!j.value("embedlab_cli", false)) {
        std::printf("%s: reachable; %s\n", host->c_str(), j.value("error", "").c_str());
        return 1;
    }
    const auto& id = j["identity"];
    const std::string version = id.value("embedlab_version", "?");
    std::printf(
        "%s: reachable; embedlab-cli %s (%s)\n", host->c_str(), version.c_str(),
        j.value("version_matches", false)
            ? "matches this one"
            : ("differs from this one, " + std::string(EMBEDLAB_VERSION) + ": results may not be comparable")
                  .c_str());
    std::printf("  hostname %s, %s\n", id.value("hostname", "?").c_str(), id.value("kernel", "?").c_str());
    std::printf("  device   %s\n", id["device_model"].is_string()
                                       ? id["device_model"].get<std::string>().c_str()
                                       : "(no /proc/device-tree/model)");
    std::printf("  cpu      %s, %d cores\n",
                id["cpu_model"].is_string() ? id["cpu_model"].get<std::string>().c_str() : "?",
                id.value("cpu_cores", 0));
    std::printf("  memory   %s\n", gib(id.value("memory_bytes", int64_t{0})).c_str());
    std::printf("  power    %s\n", id.value("power_sampling", false)
                                       ? "sampling available (vcgencmd pmic_read_adc)"
                                       : ("not available: " + id.value("power_sampling_reason", "")).c_str());
    return 0;
}

// Progress lines on stderr: one per stage and 10%, prefixed with the host.
class RemoteProgress {
public:
    explicit RemoteProgress(bool quiet) : quiet_(quiet) {}
    void operator()(size_t job, const std::string& host, const Json& e)
    {
        if (quiet_)
            return;
        const std::string prefix = host + " job " + std::to_string(job + 1) + ": ";
        if (e.value("event", "") == "log") {
            std::fprintf(stderr, "%s%s\n", prefix.c_str(), e.value("message", "").c_str());
        } else if (e.value("event", "") == "progress") {
            const int64_t total = e.value("total", int64_t{0});
            if (total <= 0)
                return;
            const auto done = static_cast<double>(e.value("done", int64_t{0}));
            const int percent = static_cast<int>(100.0 * done / static_cast<double>(total));
            int& last = deciles_[{job, e.value("stage", "")}];
            if (percent / 10 == last - 1)
                return;
            last = percent / 10 + 1;
            std::fprintf(stderr, "%s%s: %d%%\n", prefix.c_str(), e.value("stage", "").c_str(), percent);
        }
        std::fflush(stderr);
    }

private:
    bool quiet_;
    std::map<std::pair<size_t, std::string>, int> deciles_;
};

Json read_job(const std::string& file)
{
    const auto j =
        parse_json_unique<Json>(io::read_regular_file(file, io::metadata_file_cap, "job file"), file);
    if (!j.is_object())
        throw InputError(file + ": not a JSON object");
    try {
        check_job(j);
    } catch (const InputError& e) {
        throw InputError(file + ": " + e.what());
    }
    return j;
}

// "embedlab-cli: JOB.json: why", escaped (text_format.hpp printable): the error comes
// from the task's event and stderr files.
void print_job_failure(const std::string& file, const std::string& error)
{
    std::fprintf(stderr, "embedlab-cli: %s: %s\n", printable(file, 2000).c_str(),
                 printable(error, 2000).c_str());
}

// remote run --slurm JOB.json..: the jobs as one Slurm job array (slurm.hpp),
// results printed as the host pool prints them, "host" being the node.
int remote_run_slurm(const Args& args)
{
    const auto& files = args.positional();
    if (files.empty())
        throw InputError("remote run --slurm: give at least one JOB.json");
    std::vector<Json> jobs;
    for (const auto& file : files)
        jobs.push_back(read_job(file));
    return run_on_slurm(args, jobs, {{"jobs", files}}, "remote run --slurm",
                        [&](const std::filesystem::path&, const std::vector<SlurmTask>& tasks) {
                            Json all = Json::array();
                            bool ok = true;
                            for (const auto& t : tasks) {
                                const bool done = t.state == SlurmTaskState::Done;
                                Json j = {{"job", files[t.index]},
                                          {"ok", done},
                                          {"host", t.node},
                                          {"slurm_job_id", t.job_id},
                                          {"slurm_array_task_id", t.index}};
                                if (done)
                                    j["result"] = t.result;
                                else
                                    j["error"] =
                                        t.message +
                                        (t.stderr_tail.empty() ? "" : " (stderr: " + t.stderr_tail + ")");
                                if (!done)
                                    print_job_failure(files[t.index], j["error"].get<std::string>());
                                ok = ok && done;
                                all.push_back(j);
                            }
                            print_json(all);
                            return ok ? 0 : 1;
                        });
}

int remote_run_command(const std::vector<std::string>& argv)
{
    std::set<std::string> valued = kRemoteOptions;
    valued.insert(slurm_valued_options().begin(), slurm_valued_options().end());
    Args args("remote run", argv, valued,
              {"--json", "--quiet", "--no-fetch", "--cleanup", "--slurm", "--no-wait"});
    if (args.has("--slurm"))
        return remote_run_slurm(args);
    for (const auto& option : slurm_valued_options())
        if (args.has(option))
            throw InputError("remote run: " + option + " applies to --slurm");
    if (args.has("--no-wait"))
        throw InputError("remote run: --no-wait applies to --slurm");
    const auto& pos = args.positional();
    if (pos.size() < 2)
        throw InputError("remote run: give HOST[,HOST...] and at least one JOB.json");
    const auto hosts = parse_host_list(pos[0]);
    std::vector<Json> jobs;
    for (size_t i = 1; i < pos.size(); ++i)
        jobs.push_back(read_job(pos[i]));
    RemoteOptions options = remote_options(args);
    options.fetch = !args.has("--no-fetch");
    options.cleanup = args.has("--cleanup");
    // Ctrl-C: the printer's callback reports the interrupt flag main() installed.
    ProgressPrinter interrupt("", "", true);
    const auto keep_going = interrupt.callback();
    const CancelFn cancelled = [&] { return !keep_going(0, 0); };
    RemoteProgress progress(args.has("--quiet"));

    if (hosts.size() == 1 && jobs.size() == 1) { // errors keep their exit codes (2, 130, 1)
        try {
            SshSession session(hosts[0], options);
            const auto result = run_remote_job(
                session, jobs[0], [&](const Json& e) { progress(0, hosts[0].text, e); }, cancelled);
            print_json(result);
            return 0;
        } catch (const RemoteError& e) {
            std::fprintf(stderr, "embedlab-cli: %s\n", e.what());
            return 1;
        }
    }
    const auto outcomes = run_job_pool(
        jobs, hosts, options,
        [&](size_t job, const std::string& host, const Json& e) { progress(job, host, e); }, cancelled);
    Json all = Json::array();
    bool ok = true;
    for (size_t i = 0; i < outcomes.size(); ++i) {
        const auto& o = outcomes[i];
        Json j = {{"job", pos[i + 1]}, {"ok", o.ok}, {"host", o.host}};
        if (o.ok)
            j["result"] = o.result;
        else
            j["error"] = o.error;
        if (!o.ok)
            std::fprintf(stderr, "embedlab-cli: %s: %s\n", pos[i + 1].c_str(), o.error.c_str());
        ok = ok && o.ok;
        all.push_back(j);
    }
    print_json(all);
    return ok ? 0 : 1;
}

} // namespace

int command_remote(const std::vector<std::string>& argv)
{
    const std::string mode = argv.empty() ? "" : argv[0];
    const std::vector<std::string> rest(argv.begin() + (argv.empty() ? 0 : 1), argv.end());
    if (mode == "doctor")
        return remote_doctor_command(rest);
    if (mode == "run")
        return remote_run_command(rest);
    throw InputError("remote: expected 'remote doctor HOST' or 'remote run HOST[,HOST..] JOB.json..'");
}

} // namespace embedlab::cli
