// Slurm job arrays for sweeps (slurm.hpp).
#include "embedlab/slurm.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/file_input.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/job.hpp"
#include "embedlab/json_members.hpp"
#include "embedlab/name_table.hpp"
#include "embedlab/pipeline_request.hpp"
#include "embedlab/remote.hpp"
#include "embedlab/subprocess.hpp"
#include "embedlab/text_format.hpp"
#include "remote/worker_events.hpp"

namespace embedlab {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr auto kSlurmTimeout = std::chrono::seconds(60);
constexpr const char* kManifest = "manifest.json";

// The batch script: $1 the embedlab-cli to run, $2 the sweep directory. Slurm
// names the task; nothing here comes from the user.
constexpr const char* kBatchScript = R"(#!/bin/sh
# An EmbedLab sweep task (embedlab-cli sweep --slurm): runs job-<task>.json of
# the sweep directory $2 with the embedlab-cli $1; its events go to logs/.
exec "$1" worker --job "$2/job-$SLURM_ARRAY_TASK_ID.json"
)";

std::string now_utc()
{
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

fs::path log_path(const fs::path& dir, int task, const char* ext)
{
    return dir / "logs" / ("task-" + std::to_string(task) + ext);
}

std::string last_lines(const std::string& text, int n)
{
    size_t pos = text.size();
    while (pos > 0 && (text[pos - 1] == '\n'))
        --pos;
    const size_t end = pos;
    for (int i = 0; i < n && pos > 0; ++i) {
        pos = text.rfind('\n', pos - 1);
        if (pos == std::string::npos) {
            pos = 0;
            break;
        }
    }
    return text.substr(pos == 0 ? 0 : pos + 1, end - (pos == 0 ? 0 : pos + 1));
}

// The last `max_bytes` of a file ("" when it cannot be read): a task's stderr can be
// as large as the task made it, and only its last lines are shown.
std::string read_tail(const fs::path& file, size_t max_bytes)
{
    std::ifstream in(file, std::ios::binary | std::ios::ate);
    if (!in)
        return {};
    const std::streamoff size = in.tellg();
    const std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - max_bytes : 0;
    in.seekg(start);
    std::string out(static_cast<size_t>(size - start), '\0');
    in.read(out.data(), static_cast<std::streamsize>(out.size()));
    out.resize(static_cast<size_t>(in.gcount()));
    return out;
}

// Calls `line` with each line of a file, read in blocks (issue 57 item 9: a task's
// event log is as long as its run made it; sweep-status held a 208 MB log three times
// over). A line longer than `max_line` is refused with the file and line number.
// Returns false when the file cannot be opened.
template <typename Fn> bool for_each_line(const fs::path& file, size_t max_line, Fn&& line)
{
    std::ifstream in(file, std::ios::binary);
    if (!in)
        return false;
    std::vector<char> block(size_t{1} << 20);
    std::string current;
    size_t number = 1;
    while (in) {
        in.read(block.data(), static_cast<std::streamsize>(block.size()));
        const size_t got = static_cast<size_t>(in.gcount());
        if (got == 0)
            break;
        std::string_view rest(block.data(), got);
        while (!rest.empty()) {
            const size_t nl = rest.find('\n');
            const std::string_view part = rest.substr(0, nl);
            if (current.size() + part.size() > max_line)
                throw InputError(file.string() + ":" + std::to_string(number) + ": a line longer than " +
                                 std::to_string(max_line >> 20) + " MiB; not an event log `embedlab-cli " +
                                 "worker` wrote");
            if (nl == std::string_view::npos) {
                current.append(part);
                break;
            }
            if (current.empty())
                line(part);
            else {
                current.append(part);
                line(std::string_view(current));
                if (current.capacity() > block.size())
                    current = std::string(); // a long line's buffer is not kept
                else
                    current.clear();
            }
            ++number;
            rest.remove_prefix(nl + 1);
        }
    }
    if (!current.empty())
        line(std::string_view(current));
    return true;
}

constexpr size_t kMaxEventLine = size_t{64} << 20;

void write_manifest(const fs::path& dir, const Json& manifest)
{
    write_file_atomic(dir / kManifest, manifest.dump(1) + "\n");
}

struct QueuedTask {
    std::string state, node;
};

// squeue's view of the sweep's array jobs: "<job>_<task>" -> state, node.
std::map<std::string, QueuedTask> queued_tasks(const std::vector<std::string>& job_ids)
{
    std::map<std::string, QueuedTask> out;
    if (job_ids.empty())
        return out;
    std::string list;
    for (const auto& id : job_ids)
        list += (list.empty() ? "" : ",") + id;
    // The ids are checked numbers (read_slurm_manifest); still, they follow "--" (squeue's
    // --jobs without a value takes its list from the first word after the options).
    const auto r = run_command({"squeue", "--noheader", "--array", "--format=%i|%T|%N", "--jobs", "--", list},
                               "", kSlurmTimeout);
    if (r.status != 0) {
        // Jobs that ended long ago are purged; squeue then calls their ids invalid.
        if (r.err.find("Invalid job id") != std::string::npos)
            return out;
        throw RemoteError("squeue: " + (r.timed_out ? std::string("timed out") : last_lines(r.err, 3)));
    }
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
        const auto a = line.find('|');
        const auto b = line.find('|', a == std::string::npos ? a : a + 1);
        if (a == std::string::npos || b == std::string::npos)
            continue;
        out[line.substr(0, a)] = {line.substr(a + 1, b - a - 1), line.substr(b + 1)};
    }
    return out;
}

// A value of a manifest's field as a message quotes it: a string in quotes, anything
// else as JSON, control characters escaped and long values cut.
std::string quoted(const Json& value)
{
    return value.is_string() ? "'" + printable(value.get<std::string>(), 60) + "'"
                             : printable(value.dump(), 60);
}

// Slurm's id of an array job, "1234", or of one of its tasks, "1234_5": digits only,
// so it can never be read as an option (the manifest is a file anyone may have edited).
bool is_slurm_job_id(const std::string& id)
{
    const auto digits = [](std::string_view s) {
        return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string_view::npos;
    };
    const auto underscore = id.find('_');
    if (underscore == std::string::npos)
        return digits(id);
    return digits(std::string_view(id).substr(0, underscore)) &&
           digits(std::string_view(id).substr(underscore + 1));
}

// The sbatch options --sbatch-arg may add: where and how a task is scheduled, as
// --NAME=VALUE, or a scheduling switch. What the tasks run, their environment and
// their files (--export, --chdir, --output, --wrap, --get-user-env, --container, ...)
// are EmbedLab's and are never taken from an argument or a manifest; nor are sweep's
// own options (below). Names without their "--", one space apart.
constexpr std::string_view kSbatchValued =
    "account qos constraint gres gpus gpus-per-node gpus-per-task gpus-per-socket cpus-per-gpu mem-per-cpu "
    "mem-per-gpu nodelist exclude reservation nice priority comment mail-type mail-user begin deadline "
    "time-min licenses wckey tmp hint threads-per-core cores-per-socket sockets-per-node dependency signal "
    "exclusive nodes distribution";
constexpr std::string_view kSbatchSwitches =
    "exclusive requeue no-requeue contiguous hold oversubscribe overcommit spread-job";

// Whether `name` ("--qos") is one of `names` ("account qos ...").
bool listed(std::string_view names, std::string_view name)
{
    if (name.size() < 3 || name.substr(0, 2) != "--")
        return false;
    name.remove_prefix(2);
    for (size_t pos = 0; pos < names.size();) {
        const size_t end = std::min(names.find(' ', pos), names.size());
        if (names.substr(pos, end - pos) == name)
            return true;
        pos = end + 1;
    }
    return false;
}

// "--account, --qos, ..." for a message.
std::string options_text(std::string_view names)
{
    std::string out = "--";
    for (const char c : names)
        out += c == ' ' ? std::string(", --") : std::string(1, c);
    return out;
}

// What sweep sets itself, and how a user chooses it.
constexpr std::pair<std::string_view, std::string_view> kSbatchOwn[] = {
    {"--partition", "sweep's --partition"},
    {"--time", "sweep's --time"},
    {"--mem", "sweep's --mem"},
    {"--cpus-per-task", "sweep's --cpus-per-task"},
    {"--array", "the sweep's points and --array-limit"},
    {"--job-name", "EmbedLab"}};

// No control characters (what printable() would escape).
bool plain(std::string_view s)
{
    return std::none_of(s.begin(), s.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
    });
}

// A manifest string option: a string without control characters (an argv word of its own).
std::string option_string(const Json& options, const char* key, const std::string& fallback)
{
    if (!options.contains(key))
        return fallback;
    const Json& v = options[key];
    if (!v.is_string() || !plain(v.get<std::string>()))
        throw InputError(std::string("options.") + key + " is " + quoted(v) + ", not a plain string");
    return v.get<std::string>();
}

int option_int(const Json& options, const char* key, int max)
{
    if (!options.contains(key))
        return 0;
    const Json& v = options[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > max)
        throw InputError(std::string("options.") + key + " is " + quoted(v) +
                         ", not a whole number from 0 to " + std::to_string(max));
    return static_cast<int>(v.get<int64_t>());
}

} // namespace

void check_sbatch_arg(const std::string& arg, const std::string& where)
{
    const std::string shown = where + ": '" + printable(arg, 100) + "'";
    const auto eq = arg.find('=');
    const std::string_view name = std::string_view(arg).substr(0, eq);
    for (const auto& [option, set_by] : kSbatchOwn)
        if (name == option)
            throw InputError(shown + ": " + std::string(option) + " is set by " + std::string(set_by));
    const bool ok = eq == std::string::npos
                        ? listed(kSbatchSwitches, name)
                        : listed(kSbatchValued, name) && eq + 1 < arg.size() && plain(arg);
    if (ok)
        return;
    throw InputError(shown + " is not an sbatch option a sweep passes on: only scheduling options, as " +
                     "--NAME=VALUE (" + options_text(kSbatchValued) + ") or the switches " +
                     options_text(kSbatchSwitches) +
                     "; what the tasks run, their environment and their files are not set this way");
}

Json slurm_options_json(const SlurmOptions& o)
{
    Json j;
    EMBEDLAB_JSON_MEMBERS(j, o, partition, time, mem, cpus_per_task, array_limit, sbatch_args);
    j["cli"] = o.cli.string();
    j["job_name"] = o.job_name;
    return j;
}

SlurmOptions slurm_options_from_json(const Json& j)
{
    if (!j.is_object())
        throw InputError("options is " + quoted(j) + ", not an object");
    SlurmOptions o;
    o.partition = option_string(j, "partition", "");
    o.time = option_string(j, "time", "");
    o.mem = option_string(j, "mem", "");
    o.cpus_per_task = option_int(j, "cpus_per_task", 4096);
    o.array_limit = option_int(j, "array_limit", 1'000'000);
    if (j.contains("sbatch_args")) {
        const Json& args = j["sbatch_args"];
        if (!args.is_array())
            throw InputError("options.sbatch_args is " + quoted(args) + ", not a list of strings");
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string field = "options.sbatch_args[" + std::to_string(i) + "]";
            if (!args[i].is_string())
                throw InputError(field + " is " + quoted(args[i]) + ", not a string");
            check_sbatch_arg(args[i].get<std::string>(), field);
            o.sbatch_args.push_back(args[i].get<std::string>());
        }
    }
    // A job's name is EmbedLab's (sweep sets no other): a plain word.
    o.job_name = option_string(j, "job_name", o.job_name);
    if (o.job_name.empty() || o.job_name.size() > 64 ||
        o.job_name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            std::string::npos)
        throw InputError("options.job_name is " + quoted(j["job_name"]) +
                         ", not a job name (letters, digits, '.', '_', '-')");
    if (j.contains("cli") && !j["cli"].is_string())
        throw InputError("options.cli is " + quoted(j["cli"]) + ", not a path");
    o.cli = j.value("cli", "");
    return o;
}

// sbatch's own lines without their doubled "sbatch: " prefix, and what is missing
// when no controller answers.
static std::string sbatch_failure(const std::string& err)
{
    if (err.empty())
        return "sbatch: timed out (no Slurm controller answered)";
    std::string lines;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("sbatch: ", 0) == 0)
            line.erase(0, 8);
        lines += (lines.empty() ? "" : "; ") + line;
    }
    std::string hint;
    if (err.find("controller") != std::string::npos || err.find("SLURM_CONF") != std::string::npos ||
        err.find("slurm.conf") != std::string::npos || err.find("Connection refused") != std::string::npos)
        hint = std::string(" (no Slurm controller is reachable") +
               (std::getenv("SLURM_CONF") ? "" : " and SLURM_CONF is unset") +
               ": run this on the cluster's login node, or scripts/slurm-local.sh start to try a "
               "single-node cluster here)";
    return "sbatch: " + lines + hint;
}

void require_slurm_tool(const std::string& tool, const std::string& label)
{
    if (!find_executable(tool))
        throw InputError(label + ": " + tool +
                         " not found on PATH (Slurm's client tools: Debian's slurm-client, or a "
                         "cluster login node)");
}

int slurm_max_array_size()
{
    if (!find_executable("scontrol"))
        return 0;
    const auto r = run_command({"scontrol", "show", "config"}, "", kSlurmTimeout);
    if (r.status != 0)
        return 0;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("MaxArraySize", 0) != 0)
            continue;
        const auto eq = line.find('=');
        try {
            return eq == std::string::npos ? 0 : std::stoi(line.substr(eq + 1));
        } catch (const std::exception&) {
            return 0;
        }
    }
    return 0;
}

void check_slurm_array_size(int tasks, const std::string& label)
{
    if (const int max = slurm_max_array_size(); max > 0 && tasks > max)
        throw InputError(label + ": " + std::to_string(tasks) +
                         " points, but this cluster's MaxArraySize is " + std::to_string(max) +
                         " (array indices 0.." + std::to_string(max - 1) + "); split the sweep");
}

std::string array_ranges(std::vector<int> tasks)
{
    std::sort(tasks.begin(), tasks.end());
    tasks.erase(std::unique(tasks.begin(), tasks.end()), tasks.end());
    std::string out;
    for (size_t i = 0; i < tasks.size();) {
        size_t j = i;
        while (j + 1 < tasks.size() && tasks[j + 1] == tasks[j] + 1)
            ++j;
        // Appended piece by piece: GCC 12 warns (-Wstringop-overflow, a false positive)
        // on a const char* + std::string temporary here.
        if (!out.empty())
            out += ',';
        out += std::to_string(tasks[i]);
        if (j > i) {
            out += '-';
            out += std::to_string(tasks[j]);
        }
        i = j + 1;
    }
    return out;
}

void write_slurm_sweep(const fs::path& dir, const std::vector<Json>& jobs, const Json& info)
{
    const std::string label = dir.string();
    if (jobs.empty())
        throw InputError(label + ": a sweep needs at least one job");
    // sbatch expands %-patterns in --output; a directory with '%' would be renamed.
    if (dir.string().find('%') != std::string::npos)
        throw InputError(label + ": the sweep directory's path must not contain '%'");
    std::error_code ec;
    if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
        throw InputError(label + ": already exists (a sweep directory must be new or empty)");
    fs::create_directories(dir / "logs", ec);
    if (ec)
        throw InputError(label + ": cannot create the sweep directory (" + ec.message() + ")");
    try {
        for (size_t i = 0; i < jobs.size(); ++i) {
            // The nodes read the inputs: their paths are made absolute here, once for every caller.
            Json job = jobs[i];
            for (const auto& field : job_input_fields())
                if (job.contains(field) && job[field].is_string() && !job[field].get<std::string>().empty())
                    job[field] = fs::absolute(job[field].get<std::string>()).lexically_normal().string();
            for (const auto& pointer : pipeline_input_pointers(job)) { // a chain's steps name files too
                auto& path = job[Json::json_pointer(pointer)];
                path = fs::absolute(path.get<std::string>()).lexically_normal().string();
            }
            write_file_atomic(dir / ("job-" + std::to_string(i) + ".json"), job.dump(1) + "\n");
        }
        write_file_atomic(dir / "sweep.sh", kBatchScript);
        fs::permissions(dir / "sweep.sh",
                        fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec,
                        fs::perm_options::replace);
        write_manifest(dir, {{"format", "embedlab-slurm-sweep"},
                             {"version", 1},
                             {"created", now_utc()},
                             {"tasks", jobs.size()},
                             {"info", info},
                             {"submissions", Json::array()}});
    } catch (const std::exception& e) {
        throw InputError(label + ": cannot write the sweep directory (" + e.what() + ")");
    }
}

Json read_slurm_manifest(const fs::path& dir)
{
    const auto file = dir / kManifest;
    if (!fs::is_regular_file(file))
        throw InputError(dir.string() + ": not a sweep directory (no " + kManifest + ")");
    const auto j =
        Json::parse(io::read_regular_file(file, io::metadata_file_cap, "sweep manifest"), nullptr, false);
    if (!j.is_object() || j.value("format", "") != "embedlab-slurm-sweep" || !j.contains("tasks") ||
        !j["tasks"].is_number_unsigned() || j["tasks"].get<uint64_t>() == 0 ||
        j["tasks"].get<uint64_t>() > 1'000'000 || !j.contains("submissions") || !j["submissions"].is_array())
        throw InputError(file.string() + ": not an EmbedLab sweep manifest");
    if (!j.contains("info") || !j["info"].is_object())
        throw InputError(file.string() + ": info is " + (j.contains("info") ? quoted(j["info"]) : "missing") +
                         ", not an object");
    // Every id is a number before any of them reaches squeue or scancel.
    const auto n = j["tasks"].get<int64_t>();
    for (size_t i = 0; i < j["submissions"].size(); ++i) {
        const Json& s = j["submissions"][i];
        const std::string field = file.string() + ": submissions[" + std::to_string(i) + "]";
        if (!s.is_object())
            throw InputError(field + " is " + quoted(s) + ", not an object");
        if (!s.contains("job_id") || !s["job_id"].is_string() ||
            !is_slurm_job_id(s["job_id"].get<std::string>()))
            throw InputError(field + ".job_id is " +
                             (s.contains("job_id") ? quoted(s["job_id"]) : "missing") +
                             ", not a Slurm job id (a number, or N_M for a task of an array)");
        if (s.contains("tasks")) {
            const Json& tasks = s["tasks"];
            if (!tasks.is_array())
                throw InputError(field + ".tasks is " + quoted(tasks) + ", not a list of task indices");
            for (const auto& t : tasks)
                if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n)
                    throw InputError(field + ".tasks holds " + quoted(t) + ", not a task of the sweep (0.." +
                                     std::to_string(n - 1) + ")");
        }
    }
    return j;
}

void check_slurm_options(const SlurmOptions& o, const std::string& where)
{
    for (size_t i = 0; i < o.sbatch_args.size(); ++i)
        check_sbatch_arg(o.sbatch_args[i], where + "sbatch_args[" + std::to_string(i) + "]");
}

std::string submit_slurm_sweep(const fs::path& dir_in, const SlurmOptions* given,
                               const std::vector<int>& only)
{
    const fs::path dir = fs::absolute(dir_in).lexically_normal();
    const std::string label = "sweep --slurm";
    require_slurm_tool("sbatch", label);
    Json manifest = read_slurm_manifest(dir);
    const int n = manifest["tasks"].get<int>();
    SlurmOptions options;
    if (given) {
        options = *given;
        check_slurm_options(options, label + ": ");
    } else {
        // A resubmission: the first submission's options, checked as sweep --slurm checks
        // its own (the manifest is a file anyone may have edited), and never its program:
        // the nodes run this executable, as they would have for a new sweep.
        try {
            options =
                slurm_options_from_json(manifest.contains("options") ? manifest["options"] : Json::object());
        } catch (const InputError& e) {
            throw InputError((dir / kManifest).string() + ": " + e.what());
        }
        options.cli.clear();
    }
    if (options.cli.empty())
        options.cli = fs::read_symlink("/proc/self/exe");
    std::vector<int> tasks = only;
    if (tasks.empty())
        for (int i = 0; i < n; ++i)
            tasks.push_back(i);
    for (int t : tasks)
        if (t < 0 || t >= n)
            throw InputError(label + ": task " + std::to_string(t) + " is not in the sweep (0.." +
                             std::to_string(n - 1) + ")");
    check_slurm_array_size(*std::max_element(tasks.begin(), tasks.end()) + 1, label);
    for (int t : tasks) { // a resubmitted task starts with empty logs
        std::error_code ec;
        fs::remove(log_path(dir, t, ".out"), ec);
        fs::remove(log_path(dir, t, ".err"), ec);
    }
    std::string array = array_ranges(tasks);
    if (options.array_limit > 0)
        array += "%" + std::to_string(options.array_limit);
    std::vector<std::string> argv = {"sbatch",
                                     "--parsable",
                                     "--job-name=" + options.job_name,
                                     "--array=" + array,
                                     "--output=" + (dir / "logs" / "task-%a.out").string(),
                                     "--error=" + (dir / "logs" / "task-%a.err").string()};
    if (!options.partition.empty())
        argv.push_back("--partition=" + options.partition);
    if (!options.time.empty())
        argv.push_back("--time=" + options.time);
    if (!options.mem.empty())
        argv.push_back("--mem=" + options.mem);
    if (options.cpus_per_task > 0)
        argv.push_back("--cpus-per-task=" + std::to_string(options.cpus_per_task));
    argv.insert(argv.end(), options.sbatch_args.begin(), options.sbatch_args.end());
    argv.push_back((dir / "sweep.sh").string());
    argv.push_back(options.cli.string());
    argv.push_back(dir.string());
    const auto r = run_command(argv, "", kSlurmTimeout);
    if (r.status != 0)
        throw InputError(sbatch_failure(r.timed_out ? std::string() : last_lines(r.err, 3)));
    std::string job_id = r.out.substr(0, r.out.find_first_of(";\n"));
    if (job_id.empty() || job_id.find_first_not_of("0123456789") != std::string::npos)
        throw RemoteError("sbatch: unexpected reply '" + last_lines(r.out, 1) + "'");
    manifest["options"] = slurm_options_json(options);
    manifest["submissions"].push_back({{"job_id", job_id}, {"tasks", tasks}, {"submitted", now_utc()}});
    write_manifest(dir, manifest);
    return job_id;
}

const char* slurm_task_state_name(SlurmTaskState s)
{
    static constexpr Named<SlurmTaskState> names[]{{SlurmTaskState::Pending, "pending"},
                                                   {SlurmTaskState::Running, "running"},
                                                   {SlurmTaskState::Done, "done"},
                                                   {SlurmTaskState::Failed, "failed"}};
    return name_of(names, s);
}

std::vector<SlurmTask> slurm_sweep_status(const fs::path& dir)
{
    const Json manifest = read_slurm_manifest(dir);
    const int n = manifest["tasks"].get<int>();
    std::vector<SlurmTask> tasks(n);
    std::vector<std::string> job_ids;
    for (int i = 0; i < n; ++i)
        tasks[i].index = i;
    for (const auto& s : manifest["submissions"]) {
        const std::string id = s.value("job_id", "");
        job_ids.push_back(id);
        if (s.contains("tasks") && s["tasks"].is_array())
            for (const auto& t : s["tasks"])
                if (t.is_number_integer() && t.get<int>() >= 0 && t.get<int>() < n)
                    tasks[t.get<int>()].job_id = id; // the latest submission wins
    }
    // squeue before the event files: a task that ends in between has its final event.
    const auto queued = queued_tasks(job_ids);
    for (auto& task : tasks) {
        bool final_event = false, any_line = false;
        for_each_line(log_path(dir, task.index, ".out"), kMaxEventLine, [&](std::string_view line) {
            any_line = true;
            const auto w = detail::parse_worker_line(line);
            using K = detail::WorkerLine::Kind;
            if (w.kind == K::Started && w.json.contains("slurm") && w.json["slurm"].is_object() &&
                w.json["slurm"].contains("node") && w.json["slurm"]["node"].is_string())
                task.node = w.json["slurm"]["node"].get<std::string>();
            else if (w.kind == K::Progress)
                task.progress = w.json;
            else if (w.kind == K::Result) {
                task.state = SlurmTaskState::Done;
                task.result = w.json;
                final_event = true;
            } else if (w.kind == K::Error) {
                task.state = SlurmTaskState::Failed;
                task.message = w.json.value("error_kind", "") == "cancelled"
                                   ? "cancelled"
                                   : w.json.value("message", "failed");
                final_event = true;
            }
        });
        if (!final_event) {
            const auto q = queued.find(task.job_id + "_" + std::to_string(task.index));
            if (task.job_id.empty()) {
                task.state = SlurmTaskState::Failed;
                task.message = "never submitted";
            } else if (q != queued.end()) {
                task.slurm_state = q->second.state;
                task.state = q->second.state == "PENDING" ? SlurmTaskState::Pending : SlurmTaskState::Running;
                if (task.node.empty())
                    task.node = q->second.node;
            } else {
                task.state = SlurmTaskState::Failed;
                task.message = !any_line ? "ended without running (cancelled while pending?)"
                                         : "ended without a result (killed: cancelled, or its time or "
                                           "memory limit?)";
            }
        }
        if (task.state == SlurmTaskState::Failed)
            task.stderr_tail = last_lines(read_tail(log_path(dir, task.index, ".err"), size_t{64} << 10), 5);
    }
    return tasks;
}

std::vector<int> failed_tasks(const std::vector<SlurmTask>& tasks)
{
    std::vector<int> out;
    for (const auto& t : tasks)
        if (t.state == SlurmTaskState::Failed)
            out.push_back(t.index);
    return out;
}

bool slurm_sweep_finished(const std::vector<SlurmTask>& tasks)
{
    return std::none_of(tasks.begin(), tasks.end(), [](const SlurmTask& t) {
        return t.state == SlurmTaskState::Pending || t.state == SlurmTaskState::Running;
    });
}

std::vector<std::string> cancel_slurm_sweep(const fs::path& dir)
{
    require_slurm_tool("scancel", "sweep --cancel");
    const Json manifest = read_slurm_manifest(dir);
    std::vector<std::string> ids;
    for (const auto& s : manifest["submissions"])
        if (const std::string id = s.value("job_id", ""); !id.empty())
            ids.push_back(id);
    if (ids.empty())
        return ids;
    std::vector<std::string> argv = {"scancel", "--"}; // checked numbers (read_slurm_manifest), after "--"
    argv.insert(argv.end(), ids.begin(), ids.end());
    const auto r = run_command(argv, "", kSlurmTimeout);
    if (r.status != 0 && r.err.find("Invalid job id") == std::string::npos)
        throw RemoteError("scancel: " + (r.timed_out ? std::string("timed out") : last_lines(r.err, 3)));
    return ids;
}

} // namespace embedlab
