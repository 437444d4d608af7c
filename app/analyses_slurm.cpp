// Workbench compressions as one-task Slurm job arrays (engine slurm.hpp): the same
// "compress" job `sweep --slurm` submits, its state shown while it waits.
#include <unistd.h>

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
    Json job = request_json(request);
    job["kind"] =
        "compress"; // no "out": the row needs only the numbers; write_slurm_sweep makes paths absolute
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
    write_slurm_sweep(dir, {job}, {{"model", request.model}, {"from", "workbench"}});
    const std::string job_id = submit_slurm_sweep(dir, &options);
    report_progress(progress, 0, 1000);
    std::string last;
    int64_t done = 0;
    while (true) {
        const SlurmTask task = slurm_sweep_status(dir).front();
        const std::string state = "Slurm " + job_id + ": " + slurm_task_state_name(task.state) +
                                  (task.node.empty() ? "" : " on " + task.node);
        if (status && state != last)
            status(state);
        last = state;
        if (task.state == SlurmTaskState::Done) {
            report_progress(progress, 1000, 1000);
            RunSummary row = summary_from_json(task.result.value("summary", Json::object()));
            std::error_code ec;
            fs::remove_all(dir, ec); // the numbers are in the row; a failed task's logs stay
            return row;
        }
        if (task.state == SlurmTaskState::Failed)
            throw RemoteError("Slurm job " + job_id + " failed: " + task.message +
                              (task.stderr_tail.empty() ? "" : " (" + task.stderr_tail + ")") + "; logs in " +
                              dir.string());
        if (task.progress.contains("overall") && task.progress["overall"].is_number())
            done = std::max(done,
                            static_cast<int64_t>(std::lround(999 * task.progress["overall"].get<double>())));
        // The same call hears a cancel: scancel, then the job is cancelled here.
        if (progress && !progress(done, 1000)) {
            cancel_slurm_sweep(dir);
            throw Cancelled();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
}

} // namespace embedlab::app::detail
