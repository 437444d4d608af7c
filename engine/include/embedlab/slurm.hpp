// Sweeps as Slurm job arrays (issue 22): one worker job per sweep point, run by
// `embedlab-cli worker --job DIR/job-<i>.json` as task i of ONE array job.
//
//   embedlab::write_slurm_sweep("sweeps/pca", jobs, {{"model", "m"}});   // job-0.json ... manifest.json
//   auto job_id = embedlab::submit_slurm_sweep("sweeps/pca", {.partition = "cpu", .array_limit = 4});
//   for (const auto& t : embedlab::slurm_sweep_status("sweeps/pca"))
//       if (t.state == embedlab::SlurmTaskState::Done) use(t.result);   // the worker's result
//   embedlab::submit_slurm_sweep("sweeps/pca", {}, embedlab::failed_tasks(tasks));  // resubmit
//
// The sweep directory must be on a file system the compute nodes see: it holds the
// jobs, the batch script, the manifest (options, every submission's array job id)
// and logs/task-<i>.out, each task's JSON-line events (worker --job), which is
// how a task's state and result are read back (squeue only says pending/running;
// sacct needs accounting, which many clusters keep from users). Slurm's own
// sbatch/squeue/scancel/scontrol run as fixed argv (subprocess.hpp); the batch
// script takes the embedlab-cli path and the directory as its arguments, so no
// user string is ever put into shell code. The manifest is a file anyone with the
// directory may have edited: its job ids must be numbers (and reach squeue and
// scancel after "--"), a resubmission's options are checked as `sweep --slurm`
// checks its own, and a resubmission's nodes run this executable, never the
// program the manifest names.
// Thread safety: functions are reentrant; one process should own a sweep
// directory's submissions at a time (the manifest is rewritten atomically).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedlab {

struct SlurmOptions {
    std::string partition;                // --partition ("": the cluster's default)
    std::string time;                     // --time, e.g. 00:30:00
    std::string mem;                      // --mem, e.g. 4G
    int cpus_per_task = 0;                // --cpus-per-task (0: Slurm's default)
    int array_limit = 0;                  // at most K tasks at once: --array=0-(n-1)%K (0: no limit)
    std::vector<std::string> sbatch_args; // more sbatch options, one argv word each
    std::filesystem::path cli;            // the embedlab-cli the nodes run ("": this executable)
    std::string job_name = "embedlab-sweep";
};
nlohmann::ordered_json slurm_options_json(const SlurmOptions& options);
// A manifest's "options", checked: InputError naming the field ("options.cpus_per_task
// is '4', not a whole number ...", an sbatch_args word check_sbatch_arg refuses).
SlurmOptions slurm_options_from_json(const nlohmann::ordered_json& json);

// What sbatch_args may hold (--sbatch-arg, a manifest's options.sbatch_args): a
// scheduling option as --NAME=VALUE (--account, --qos, --constraint, --gres, ...) or
// a scheduling switch (--exclusive, --requeue, ...); never what the tasks run, their
// environment or their files (--export, --chdir, --output, --wrap, ...), nor what
// sweep sets itself (--partition, --time, ...). InputError "<where>: '<arg>' ..." otherwise.
void check_sbatch_arg(const std::string& arg, const std::string& where);
// check_sbatch_arg on each of options.sbatch_args, `where` prefixing "sbatch_args[i]".
void check_slurm_options(const SlurmOptions& options, const std::string& where);

// InputError "<tool> not found on PATH ..." when a Slurm command is missing.
void require_slurm_tool(const std::string& tool, const std::string& label);
// MaxArraySize from `scontrol show config` (0 when it cannot be read).
int slurm_max_array_size();
// InputError "<label>: N points, but this cluster's MaxArraySize is M ..." when
// an array of `tasks` (indices 0..tasks-1) cannot be submitted.
void check_slurm_array_size(int tasks, const std::string& label);

// Writes DIR (created; it must not exist, or be empty): job-<i>.json for each job
// (its input paths, job_input_fields(), made absolute: the nodes read them),
// sweep.sh, logs/, manifest.json with `info` (what the sweep is, for collecting).
// InputError naming DIR when it cannot be written.
void write_slurm_sweep(const std::filesystem::path& dir, const std::vector<nlohmann::ordered_json>& jobs,
                       const nlohmann::ordered_json& info);
// DIR/manifest.json, checked: InputError naming the file and the field for a
// submission whose job_id is not a Slurm job id (digits, or N_M) or whose tasks are
// not the sweep's, and for an info that is not an object.
nlohmann::ordered_json read_slurm_manifest(const std::filesystem::path& dir);

// Submits `tasks` (empty: every task) as one array job with sbatch and records it
// in the manifest; a resubmitted task's old logs are removed first. Options come
// from the manifest when `options` is null (a resubmission keeps the first's,
// checked by slurm_options_from_json, except `cli`: the nodes run this executable).
// Returns the array job id. InputError for a missing sbatch, an array larger than
// MaxArraySize, options check_slurm_options refuses (naming the manifest and the
// field for a resubmission), or sbatch's refusal (its message).
std::string submit_slurm_sweep(const std::filesystem::path& dir, const SlurmOptions* options,
                               const std::vector<int>& tasks = {});

enum class SlurmTaskState { Pending, Running, Done, Failed };
const char* slurm_task_state_name(SlurmTaskState state); // "pending", "running", "done", "failed"

struct SlurmTask {
    int index = 0;
    SlurmTaskState state = SlurmTaskState::Pending;
    std::string job_id;              // the array job of its latest submission
    std::string slurm_state;         // squeue's (PENDING, RUNNING, ...) while queued
    std::string node;                // where it ran (the worker's SLURMD_NODENAME) or runs
    std::string message;             // failed: the worker's error, or why there is no result
    std::string stderr_tail;         // failed: the last lines of logs/task-<i>.err
    nlohmann::ordered_json progress; // the last progress event, if any
    nlohmann::ordered_json result;   // done: the worker's result
};
// Every task's state: its event file first (a result or an error is final), then
// squeue; a task in neither ended without a word (killed, time or memory limit).
std::vector<SlurmTask> slurm_sweep_status(const std::filesystem::path& dir);
std::vector<int> failed_tasks(const std::vector<SlurmTask>& tasks);
bool slurm_sweep_finished(const std::vector<SlurmTask>& tasks); // nothing pending or running

// scancel on every array job the sweep submitted. Returns the ids cancelled.
std::vector<std::string> cancel_slurm_sweep(const std::filesystem::path& dir);

// "0-2,5,7-9" for {0,1,2,5,7,8,9}.
std::string array_ranges(std::vector<int> tasks);

} // namespace embedlab
