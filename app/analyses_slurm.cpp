// Workbench compressions as Slurm job arrays (engine slurm.hpp): the same "compress"
// jobs `sweep --slurm` submits, one task for a row, one array for a sweep's rows,
// their state shown while they wait.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <thread>

#include "analyses_internal.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/job.hpp"
#include "embedlab/remote.hpp"
#include "embedlab/results.hpp"
#include "embedlab/slurm.hpp"
#include "embedlab/subprocess.hpp"

namespace embedlab::app::detail {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The embedlab-cli the nodes run: beside this executable (an install, or the
// build tree's cli/ next to app/ and tests/), else the one on PATH.
fs::path cli_for_nodes()
{
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    for (const fs::path& candidate :
         {self.parent_path() / "embedlab-cli", self.parent_path() / ".." / "cli" / "embedlab-cli"})
        if (!ec && fs::is_regular_file(candidate))
            return fs::weakly_canonical(candidate);
    if (auto found = find_executable("embedlab-cli"))
        return *found;
    throw InputError("Slurm: embedlab-cli not found beside the workbench or on PATH (the nodes run it)");
}

// Where the workbench's sweep directories go: EMBEDLAB_SWEEP_DIR, else
// ~/.cache/embedlab/slurm (home directories are what clusters share with nodes).
fs::path sweep_root()
{
    if (const char* dir = std::getenv("EMBEDLAB_SWEEP_DIR"); dir && *dir)
        return dir;
    const char* home = std::getenv("HOME");
    return fs::path(home && *home ? home : "/tmp") / ".cache" / "embedlab" / "slurm";
}

fs::path new_sweep_dir()
{
    static std::atomic<int> counter{0};
    char stamp[32];
    const std::time_t t = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
    return sweep_root() / ("workbench-" + std::string(stamp) + "-" + std::to_string(::getpid()) + "-" +
                           std::to_string(counter++));
}

// Whether a Slurm controller answers; if not, what is missing and how to get one,
// instead of sbatch's own words ("fetch_config: DNS SRV lookup failed").
void require_slurm_controller()
{
    require_slurm_tool("scontrol", "Slurm");
    const char* conf = std::getenv("SLURM_CONF");
    const bool conf_set = conf && *conf;
    const fs::path file = conf_set ? fs::path(conf) : fs::path("/etc/slurm/slurm.conf");
    std::error_code ec;
    std::string missing;
    if (conf_set && !fs::exists(file, ec)) // Slurm's tools retry a missing file for a minute
        missing = "SLURM_CONF names " + file.string() + ", which does not exist";
    else if (run_command({"scontrol", "ping"}, "", std::chrono::seconds(20)).status == 0)
        return;
    else if (!fs::exists(file, ec)) // nor a configless cluster's controller (DNS SRV)
        missing = "SLURM_CONF is not set, /etc/slurm/slurm.conf does not exist and no controller was found";
    else
        missing = "no Slurm controller answers (scontrol ping, configuration " + file.string() + ")";
    throw InputError("Slurm: no cluster: " + missing +
                     ". Run the workbench on a cluster's login node, or start a single-node Slurm on this "
                     "machine with scripts/slurm-local.sh start (see docs/remote.md)");
}

} // namespace

RunSummary slurm_compress_and_evaluate(const CompressionRequest& request, const RunTarget& target,
                                       const ProgressFn& progress, const StatusFn& status)
{
    RunSummary row;
    const auto failed = slurm_sweep_compress_and_evaluate({request}, target, progress, status,
                                                          [&](size_t, const RunSummary& r) { row = r; });
    if (!failed.empty())
        throw RemoteError(failed.front().second);
    return row;
}

namespace {

// `jobs` as ONE array; `row` gets each task's row as it ends. The failed tasks: (index, why).
std::vector<std::pair<size_t, std::string>>
slurm_jobs(const std::vector<Json>& jobs, const std::string& model, const RunTarget& target,
           const ProgressFn& progress, const StatusFn& status,
           const std::function<void(size_t, const RunSummary&)>& row)
{
    const auto n = static_cast<int64_t>(jobs.size());
    SlurmOptions options;
    options.partition = target.slurm_partition;
    options.time = target.slurm_time;
    options.array_limit = target.slurm_array_limit;
    options.cli = cli_for_nodes();
    options.job_name = "embedlab-workbench";
    require_slurm_tool("sbatch", "Slurm");
    require_slurm_tool("squeue", "Slurm");
    require_slurm_controller();
    const fs::path dir = new_sweep_dir();
    write_slurm_sweep(dir, jobs, {{"model", model}, {"from", "workbench"}});
    const std::string job_id = submit_slurm_sweep(dir, &options); // ONE array of n tasks
    report_progress(progress, 0, 1000 * n);
    std::vector<std::pair<size_t, std::string>> failed;
    std::vector<bool> ended(static_cast<size_t>(n), false);
    std::vector<int64_t> done_of(static_cast<size_t>(n), 0); // each task's share of the bar, of 1000
    std::string last;
    while (true) {
        int64_t done = 0, running = 0, finished = 0;
        std::string node;
        for (const SlurmTask& task : slurm_sweep_status(dir)) {
            const auto i = static_cast<size_t>(task.index);
            if (i >= ended.size())
                continue;
            if (!ended[i] && task.state == SlurmTaskState::Done) {
                ended[i] = true;
                done_of[i] = 1000;
                if (row)
                    row(i, summary_from_json(task.result.value("summary", Json::object())));
            } else if (!ended[i] && task.state == SlurmTaskState::Failed) {
                ended[i] = true;
                done_of[i] = 1000;
                failed.emplace_back(i, "Slurm job " + job_id + (n > 1 ? " task " + std::to_string(i) : "") +
                                           " failed: " + task.message +
                                           (task.stderr_tail.empty() ? "" : " (" + task.stderr_tail + ")") +
                                           "; logs in " + dir.string());
            } else if (!ended[i] && task.progress.contains("overall") &&
                       task.progress["overall"].is_number()) {
                done_of[i] =
                    std::max(done_of[i],
                             static_cast<int64_t>(std::lround(999 * task.progress["overall"].get<double>())));
            }
            running += task.state == SlurmTaskState::Running;
            finished += task.state == SlurmTaskState::Done;
            done += done_of[i];
            if (n == 1)
                node = std::string(slurm_task_state_name(task.state)) +
                       (task.node.empty() ? "" : " on " + task.node);
        }
        // One task: its state ("Slurm 12: running on node3"); an array: the counts.
        std::string state = "Slurm " + job_id + ": ";
        if (n == 1)
            state += node;
        else
            state += std::to_string(finished) + "/" + std::to_string(n) + " done" +
                     (running > 0 ? ", " + std::to_string(running) + " running" : "") +
                     (failed.empty() ? "" : ", " + std::to_string(failed.size()) + " failed");
        if (status && state != last)
            status(state);
        last = state;
        if (std::all_of(ended.begin(), ended.end(), [](bool e) { return e; }))
            break;
        // The same call hears a cancel: scancel, then the job is cancelled here.
        if (progress && !progress(done, 1000 * n)) {
            cancel_slurm_sweep(dir);
            throw Cancelled();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    report_progress(progress, 1000 * n, 1000 * n);
    if (failed.empty()) {
        std::error_code ec;
        fs::remove_all(dir, ec); // the numbers are in the rows; a failed task's logs stay
    }
    return failed;
}

} // namespace

std::vector<std::pair<size_t, std::string>>
slurm_sweep_compress_and_evaluate(const std::vector<CompressionRequest>& requests, const RunTarget& target,
                                  const ProgressFn& progress, const StatusFn& status,
                                  const std::function<void(size_t, const RunSummary&)>& row)
{
    if (requests.empty())
        return {};
    std::vector<Json> jobs;
    for (const auto& request : requests) {
        Json job = request_json(request);
        job["kind"] =
            "compress"; // no "out": a row needs only the numbers; write_slurm_sweep makes paths absolute
        jobs.push_back(std::move(job));
    }
    return slurm_jobs(jobs, requests.front().model, target, progress, status, row);
}

RunSummary slurm_chain_and_evaluate(const Json& pipeline, const RunTarget& target, const ProgressFn& progress,
                                    const StatusFn& status)
{
    Json job = pipeline;
    job["kind"] = "compress"; // write_slurm_sweep makes the steps' paths absolute too
    RunSummary row;
    const auto failed = slurm_jobs({job}, pipeline.value("model", ""), target, progress, status,
                                   [&](size_t, const RunSummary& r) { row = r; });
    if (!failed.empty())
        throw RemoteError(failed.front().second);
    return row;
}

} // namespace embedlab::app::detail
