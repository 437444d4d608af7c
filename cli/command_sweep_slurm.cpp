// sweep --slurm, sweep-status, sweep-collect: a sweep as one Slurm job array
// (engine/include/embedlab/slurm.hpp). The rows are the local sweep's, read from
// each task's worker result, plus where it ran.
#include <chrono>
#include <ctime>
#include <functional>
#include <sstream>
#include <thread>

#include "common.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/job.hpp"
#include "embedlab/remote.hpp"
#include "embedlab/results.hpp"
#include "embedlab/slurm.hpp"
#include "embedlab/text_format.hpp"
#include "progress_printer.hpp"
#include "sweep_table.hpp"

namespace embedlab::cli {

namespace fs = std::filesystem;

namespace {

// Text from the sweep directory (a worker's message, a node's name, stderr) as it is
// printed: through the one escaping every message quoting a file goes through
// (text_format.hpp printable), so a crafted event cannot move the cursor or retitle
// the terminal. Long texts are cut at 2000 bytes.
std::string shown(const std::string& text)
{
    return printable(text, 2000);
}

// stderr's last lines, one printed line each.
void print_stderr_tail(const std::string& tail, const char* indent)
{
    std::istringstream in(tail);
    for (std::string line; std::getline(in, line);)
        std::fprintf(stderr, "%sstderr: %s\n", indent, shown(line).c_str());
}

std::string counts(const std::vector<SlurmTask>& tasks)
{
    int n[4] = {0, 0, 0, 0};
    for (const auto& t : tasks)
        ++n[static_cast<int>(t.state)];
    return std::to_string(n[2]) + " done, " + std::to_string(n[1]) + " running, " + std::to_string(n[0]) +
           " pending, " + std::to_string(n[3]) + " failed";
}

} // namespace

const std::set<std::string>& slurm_valued_options()
{
    static const std::set<std::string> options = {"--sweep-dir",     "--partition", "--time",
                                                  "--cpus-per-task", "--mem",       "--array-limit",
                                                  "--sbatch-arg",    "--slurm-cli"};
    return options;
}

SlurmOptions slurm_options(const Args& args)
{
    SlurmOptions o;
    o.partition = args.get("--partition").value_or("");
    o.time = args.get("--time").value_or("");
    o.mem = args.get("--mem").value_or("");
    o.cpus_per_task = static_cast<int>(args.get_int("--cpus-per-task", 0, 1, 4096));
    o.array_limit = static_cast<int>(args.get_int("--array-limit", 0, 1, 1'000'000));
    o.sbatch_args = args.get_all("--sbatch-arg");
    for (const auto& a : o.sbatch_args) // what a resubmission accepts from the manifest too
        check_sbatch_arg(a, "--sbatch-arg");
    if (auto cli = args.get("--slurm-cli"))
        o.cli = fs::absolute(*cli);
    if (!o.cli.empty() && !fs::is_regular_file(o.cli))
        throw InputError("--slurm-cli " + o.cli.string() + ": no such file");
    return o;
}

fs::path sweep_dir_option(const Args& args)
{
    const std::time_t t = std::time(nullptr);
    char buf[64];
    std::strftime(buf, sizeof buf, "embedlab-sweep-%Y%m%d-%H%M%S", std::localtime(&t));
    return fs::absolute(args.get("--sweep-dir").value_or(buf)).lexically_normal();
}

bool follow_slurm_sweep(const fs::path& dir, bool quiet, std::vector<SlurmTask>& tasks)
{
    std::string last;
    const auto start = std::chrono::steady_clock::now();
    while (true) {
        tasks = slurm_sweep_status(dir);
        const std::string line = counts(tasks);
        if (!quiet && line != last) {
            const auto s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::fprintf(stderr, "slurm: %s (%.0f s)\n", line.c_str(), s);
            std::fflush(stderr);
            last = line;
        }
        if (slurm_sweep_finished(tasks))
            return true;
        for (int i = 0; i < 10; ++i) { // poll every second, answer Ctrl-C at once
            if (interrupted()) {
                const auto ids = cancel_slurm_sweep(dir);
                std::fprintf(stderr, "slurm: interrupted; cancelled array job %s (scancel)\n",
                             joined(ids, ", ").c_str());
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
}

namespace {

// The local sweep's table or JSON from the finished tasks, each row with its
// Slurm ids and host; DIR/results.csv and .json (results.hpp) beside them.
// Exit 0 when every task is done, 1 when some failed (they are listed).
int collect(const fs::path& dir, const std::vector<SlurmTask>& tasks, bool json)
{
    const Json manifest = read_slurm_manifest(dir);
    const Json& info = manifest["info"]; // an object (read_slurm_manifest)
    if (info.contains("model") && !info["model"].is_string())
        throw InputError((dir / "manifest.json").string() + ": info.model is " +
                         printable(info["model"].dump(), 60) + ", not a model path");
    const std::string model = info.value("model", "");
    Json rows = Json::array(), first_record, failed = Json::array();
    std::string first_events; // the file first_record was read from
    std::vector<RunSummary> summaries;
    for (const auto& t : tasks) {
        if (t.state != SlurmTaskState::Done) {
            if (t.state == SlurmTaskState::Failed)
                failed.push_back({{"task", t.index},
                                  {"slurm_job_id", t.job_id},
                                  {"message", t.message},
                                  {"stderr_tail", t.stderr_tail}});
            continue;
        }
        // The task's event file is the worker's word, read back from a shared directory:
        // a result without a usable record is that file's fault, said as such.
        const std::string events = (dir / "logs" / ("task-" + std::to_string(t.index) + ".out")).string();
        if (!t.result.contains("record") || !t.result["record"].is_object())
            throw InputError(events + ": the result event has no record (an object with the run's numbers; " +
                             "sweep-collect reads the sweep's compress tasks)");
        const Json& record = t.result["record"];
        try {
            Json row = sweep_row(record);
            row["slurm_job_id"] = t.job_id;
            row["slurm_array_task_id"] = t.index;
            row["node"] = t.node;
            row["host"] = t.result.contains("host") ? t.result["host"] : Json();
            if (!json) // what the table prints (--json passes the record's values on as they are)
                check_sweep_row(row);
            if (t.result.contains("summary"))
                summaries.push_back(summary_from_json(t.result["summary"]));
            rows.push_back(row);
        } catch (const InputError& e) {
            throw InputError(events + ": the result event's " + e.what());
        } catch (const nlohmann::json::exception& e) {
            throw InputError(events + ": the result event's record has a missing or mistyped field (" +
                             printable(e.what(), 200) + ")");
        }
        if (first_record.is_null()) {
            first_record = record;
            first_events = events;
        }
    }
    if (!summaries.empty()) {
        write_file_atomic(dir / "results.csv", results_csv(summaries));
        write_file_atomic(dir / "results.json", results_json(summaries));
    }
    Json sweep = {{"model", model}, {"rows", rows}};
    if (!first_record.is_null()) {
        try {
            sweep = sweep_json(model, first_record, rows);
        } catch (const nlohmann::json::exception& e) {
            throw InputError(first_events + ": the result event's record has a missing or mistyped field (" +
                             printable(e.what(), 200) + ")");
        }
        if (!json && (!sweep["params_before"].is_number_integer() || !sweep["baseline_ppl"].is_number()))
            throw InputError(first_events +
                             ": the result event's record gives no accounting.params_before or "
                             "evaluation.baseline.ppl (numbers)");
    }
    if (json) {
        sweep["sweep_dir"] = dir.string();
        sweep["failed"] = failed;
        print_json(sweep);
    } else if (!rows.empty()) {
        sweep_print_header();
        for (const auto& row : rows)
            sweep_print_row(row, "  task " + std::to_string(row["slurm_array_task_id"].get<int>()) + " on " +
                                     shown(row["node"].get<std::string>()));
        sweep_print_original(sweep);
    }
    for (const auto& f : failed) {
        std::fprintf(stderr, "slurm: task %d (array job %s) failed: %s\n", f["task"].get<int>(),
                     shown(f["slurm_job_id"].get<std::string>()).c_str(),
                     shown(f["message"].get<std::string>()).c_str());
        print_stderr_tail(f["stderr_tail"].get<std::string>(), "  ");
    }
    if (!failed.empty())
        std::fprintf(
            stderr,
            "slurm: resubmit the failed tasks with: embedlab-cli sweep-collect %s --resubmit-failed\n",
            shown(dir.string()).c_str());
    return failed.empty() ? 0 : 1;
}

fs::path sweep_dir_argument(const Args& args, const char* command)
{
    const auto dir = args.single_positional("DIR");
    if (!dir)
        throw InputError(std::string(command) +
                         ": DIR (a sweep directory written by sweep --slurm) is required");
    return fs::absolute(*dir).lexically_normal();
}

} // namespace

int run_on_slurm(const Args& args, const std::vector<Json>& jobs, const Json& info, const std::string& label,
                 const std::function<int(const fs::path& dir, const std::vector<SlurmTask>& tasks)>& finish)
{
    const SlurmOptions options = slurm_options(args);
    require_slurm_tool("sbatch", label);
    require_slurm_tool("squeue", label);
    const fs::path dir = sweep_dir_option(args);
    check_slurm_array_size(static_cast<int>(jobs.size()), label);
    std::error_code ec;
    const bool existed = fs::exists(dir, ec); // then empty: write_slurm_sweep takes nothing else
    write_slurm_sweep(dir, jobs, info);
    std::string job_id;
    try {
        job_id = submit_slurm_sweep(dir, &options);
    } catch (...) {
        // Nothing was submitted: remove what this call wrote, so the same command can run again.
        if (existed) {
            for (const auto& entry : fs::directory_iterator(dir, ec))
                fs::remove_all(entry.path(), ec);
        } else {
            fs::remove_all(dir, ec);
        }
        throw;
    }
    std::fprintf(stderr, "slurm: submitted array job %s (%zu tasks) from %s\n", job_id.c_str(), jobs.size(),
                 shown(dir.string()).c_str());
    if (args.has("--no-wait")) {
        std::printf("%s\n", dir.string().c_str());
        return 0;
    }
    std::vector<SlurmTask> tasks;
    if (!follow_slurm_sweep(dir, args.has("--quiet"), tasks))
        return 130;
    return finish(dir, tasks);
}

int sweep_on_slurm(const Args& args, const std::vector<CompressionRequest>& requests,
                   const std::string& model)
{
    std::vector<Json> jobs;
    for (const auto& r : requests) {
        Json job = {{"kind", "compress"}};
        job.update(request_json(r));
        jobs.push_back(job);
    }
    return run_on_slurm(args, jobs,
                        {{"model", model}, {"method", requests.front().method}, {"points", requests.size()}},
                        "sweep --slurm", [&](const fs::path& dir, const std::vector<SlurmTask>& tasks) {
                            return collect(dir, tasks, args.has("--json"));
                        });
}

int command_sweep_status(const std::vector<std::string>& argv)
{
    Args args("sweep-status", argv, {}, {"--json", "--cancel"});
    const auto dir = sweep_dir_argument(args, "sweep-status");
    if (args.has("--cancel")) {
        const auto ids = cancel_slurm_sweep(dir);
        std::fprintf(stderr, "slurm: cancelled array job %s (scancel)\n", joined(ids, ", ").c_str());
    }
    const auto tasks = slurm_sweep_status(dir);
    if (args.has("--json")) {
        Json list = Json::array();
        for (const auto& t : tasks) {
            Json j = {{"task", t.index},
                      {"state", slurm_task_state_name(t.state)},
                      {"slurm_job_id", t.job_id},
                      {"slurm_state", t.slurm_state},
                      {"node", t.node}};
            if (!t.progress.is_null())
                j["progress"] = t.progress;
            if (t.state == SlurmTaskState::Failed) {
                j["message"] = t.message;
                j["stderr_tail"] = t.stderr_tail;
            }
            list.push_back(j);
        }
        print_json({{"sweep_dir", dir.string()},
                    {"finished", slurm_sweep_finished(tasks)},
                    {"summary", counts(tasks)},
                    {"tasks", list}});
        return 0;
    }
    std::printf("%s: %s\n", shown(dir.string()).c_str(), counts(tasks).c_str());
    for (const auto& t : tasks) {
        std::printf("  task %-4d %-8s job %-8s %s", t.index, slurm_task_state_name(t.state),
                    shown(t.job_id).c_str(), shown(t.node).c_str());
        // A progress event is normalised as it is read (worker_events.hpp): a string stage, integer counts.
        if (t.state == SlurmTaskState::Running && t.progress.is_object())
            std::printf("  %s %lld/%lld", shown(t.progress.value("stage", "")).c_str(),
                        (long long)t.progress.value("done", int64_t{0}),
                        (long long)t.progress.value("total", int64_t{0}));
        if (t.state == SlurmTaskState::Failed)
            std::printf("  %s", shown(t.message).c_str());
        std::printf("\n");
    }
    return 0;
}

int command_sweep_collect(const std::vector<std::string>& argv)
{
    Args args("sweep-collect", argv, {}, {"--json", "--quiet", "--no-wait", "--resubmit-failed"});
    const auto dir = sweep_dir_argument(args, "sweep-collect");
    std::vector<SlurmTask> tasks = slurm_sweep_status(dir);
    if (args.has("--resubmit-failed")) {
        const auto failed = failed_tasks(tasks);
        if (failed.empty()) {
            std::fprintf(stderr, "slurm: no failed task to resubmit\n");
        } else {
            const std::string job_id = submit_slurm_sweep(dir, nullptr, failed);
            std::fprintf(stderr, "slurm: resubmitted tasks %s as array job %s (run by this embedlab-cli)\n",
                         array_ranges(failed).c_str(), job_id.c_str());
        }
    }
    if (args.has("--no-wait"))
        tasks = slurm_sweep_status(dir);
    else if (!follow_slurm_sweep(dir, args.has("--quiet"), tasks))
        return 130;
    return collect(dir, tasks, args.has("--json"));
}

} // namespace embedlab::cli
