// Stacked compression (pipeline.hpp): trim, then one method, as one job and one record.
#include "embedlab/pipeline.hpp"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <signal.h>
#include <unistd.h>

#include "embedlab/file_output.hpp"
#include "embedlab/model_files.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTrimShare = 0.4; // of the progress bar, for the trim step

// The working directory of a chain for `out`: `.NAME.chain-PID` beside it (or in the
// system's temporary directory without one).
fs::path scratch_parent_and_prefix(const fs::path& out, std::string& prefix)
{
    fs::path o = out.empty() ? fs::temp_directory_path() / "embedlab" : fs::absolute(out).lexically_normal();
    if (o.filename().empty())
        o = o.parent_path();
    prefix = "." + o.filename().string() + ".chain-";
    return o.parent_path();
}

// The marker file that proves EmbedLab made a working directory, and which process on
// which host, so a later run removes only what a dead run of ours left.
constexpr const char* kScratchMarker = ".embedlab-chain";

std::string this_host()
{
    char name[256] = {};
    return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

// When process `pid` started (clock ticks after boot: /proc/PID/stat's 22nd field), so
// a PID reused by another process is told apart; "" when it cannot be read.
std::string process_start(long pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto comm_end = stat.rfind(')'); // the command name may hold spaces and ')'
    if (comm_end == std::string::npos)
        return "";
    std::istringstream fields(stat.substr(comm_end + 1));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i) // the fields after ')' start at the 3rd
        if (i == 22)
            return field;
    return "";
}

std::string marker_text(long pid)
{
    return "EmbedLab chain working directory\nhost " + this_host() + "\npid " + std::to_string(pid) +
           "\nstart " + process_start(pid) + "\n";
}

// Whether the process that wrote `marker` (marker_text) is still running here; true
// whenever that cannot be ruled out (another host, an unreadable marker).
bool maker_may_be_running(const std::string& marker, long pid)
{
    std::istringstream in(marker);
    std::string title, key, host, start;
    long written_pid = -1;
    if (!std::getline(in, title) || title != "EmbedLab chain working directory")
        return true;
    in >> key >> host;
    if (key != "host" || host != this_host())
        return true;
    if (!(in >> key >> written_pid) || key != "pid" || written_pid != pid)
        return true;
    if (!(in >> key) || key != "start")
        return true;
    std::getline(in, start);
    start.erase(0, start.find_first_not_of(' '));
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        return false;
    // Alive, or not ours to signal: the same process only if it started when the marker says.
    const std::string now = process_start(pid);
    return start.empty() || now.empty() || now == start;
}

// The chain's intermediate directories, beside the output (or in the system's temporary
// directory without one); removed when the run ends, finished or not. A run killed
// with SIGKILL leaves it: the next run for the same output removes it
// (remove_stale_chain_directories), proven ours by the marker.
class ScratchDirectory {
public:
    explicit ScratchDirectory(const fs::path& out)
    {
        remove_stale_chain_directories(out);
        std::string prefix;
        const fs::path parent = scratch_parent_and_prefix(out, prefix); // sets prefix first
        path_ = parent / (prefix + std::to_string(::getpid()));
        fs::remove_all(path_);
        fs::create_directories(path_);
        write_file_atomic(path_ / kScratchMarker, marker_text(::getpid()));
    }
    ~ScratchDirectory()
    {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    ScratchDirectory(const ScratchDirectory&) = delete;
    ScratchDirectory& operator=(const ScratchDirectory&) = delete;
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

ProgressFn trim_progress(const ExperimentProgressFn& progress)
{
    if (!progress)
        return {};
    return [progress](int64_t done, int64_t total) {
        const double share = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0;
        return progress({"trim", done, total, kTrimShare * share});
    };
}

ExperimentProgressFn after_trim(const ExperimentProgressFn& progress)
{
    if (!progress)
        return {};
    return [progress](ExperimentProgress p) {
        p.overall = kTrimShare + (1 - kTrimShare) * p.overall;
        return progress(p);
    };
}

double json_number(const Json& j, const char* a, const char* b)
{
    return j.contains(a) && j[a].contains(b) && j[a][b].is_number() ? j[a][b].get<double>() : kNaN;
}

// The original model's figures, as the input stores them (bits 0: mixed dtypes).
struct Original {
    int64_t vocab = 0, hidden = 0, parameters = 0;
    double bits = 0; // per stored value
    int64_t table_parameters() const { return vocab * hidden; }
    double bytes(int64_t values) const { return bits > 0 ? static_cast<double>(values) * bits / 8 : kNaN; }
};

Original original_of(const ModelFiles& files, const TrimReport& trim)
{
    return {.vocab = trim.vocab_before,
            .hidden = files.config.hidden_size,
            .parameters = trim.record["parameters_before"].get<int64_t>(),
            .bits = files.format == ModelFormat::HuggingFace ? stored_bits_per_value(files.stored_dtype) : 0};
}

// The original's evaluation, from trim's (the same text, ctx and stride = ctx).
void original_evaluation(RunSummary& s, const TrimReport& trim)
{
    if (!trim.record.contains("evaluation"))
        return;
    const Json& e = trim.record["evaluation"];
    s.ppl_original = json_number(e, "original", "ppl");
    s.bits_per_byte_original = json_number(e, "original", "bits_per_byte");
    s.delta_ln_ppl = std::log(s.ppl) - std::log(s.ppl_original);
}

// Trim alone's row: the token table cut to the kept rows, at the input's storage.
RunSummary trim_summary(const PipelineRequest& p, const Original& o, const TrimReport& trim)
{
    RunSummary s;
    s.method = "trim";
    s.parameters = p.trim->coverage ? "coverage " + short_number(*p.trim->coverage)
                                    : "keep " + std::to_string(*p.trim->keep);
    s.part = "token_embedding";
    s.model = p.request.model;
    s.eval_text = p.request.eval_text;
    s.params_before = o.table_parameters();
    s.params_after = static_cast<int64_t>(trim.kept.size()) * o.hidden;
    s.ratio = static_cast<double>(s.params_after) / static_cast<double>(s.params_before);
    s.bytes_before = o.bytes(s.params_before);
    s.bytes_after = o.bytes(s.params_after);
    s.model_bytes_before = o.bytes(o.parameters);
    s.model_bytes_after = o.bytes(trim.record["parameters_after"].get<int64_t>());
    s.mean_cosine = 1; // the kept rows are the original's
    s.ppl = s.ppl_original = s.delta_ln_ppl = kNaN;
    if (trim.record.contains("evaluation")) {
        const Json& e = trim.record["evaluation"];
        s.ppl = json_number(e, "trimmed", "ppl");
        s.bits_per_byte = json_number(e, "trimmed", "bits_per_byte");
        s.eval_tokens = e.contains("trimmed") ? e["trimmed"].value("scored_tokens", int64_t{0}) : 0;
        original_evaluation(s, trim);
    }
    return s;
}

// The chain's row: the method's run on the trimmed model, its bytes and parameters
// against the original's table and weights.
RunSummary chain_summary(const PipelineRequest& p, const Original& o, const TrimReport& trim,
                         const RunSummary& run)
{
    RunSummary s = run;
    s.method = "chain";
    s.parameters = pipeline_label(p);
    s.model = p.request.model;
    s.params_before = o.table_parameters();
    s.ratio = static_cast<double>(s.params_after) / static_cast<double>(s.params_before);
    if (std::isfinite(run.bytes_after))
        s.bytes_before = o.bytes(s.params_before);
    if (std::isfinite(run.model_bytes_after)) // the trimmed weights with the table's bytes replaced
        s.model_bytes_before = o.bytes(o.parameters);
    if (std::isfinite(run.ppl))
        original_evaluation(s, trim);
    return s;
}

Json totals_json(const RunSummary& s)
{
    return {
        {"table_parameters", {{"before", s.params_before}, {"after", s.params_after}, {"ratio", s.ratio}}},
        {"table_bytes", {{"before", s.bytes_before}, {"after", s.bytes_after}}},
        {"model_bytes", {{"before", s.model_bytes_before}, {"after", s.model_bytes_after}}}};
}

// The record's "pipeline" block: every step's settings, the whole chain's figures.
Json pipeline_block(const PipelineRequest& p, const TrimReport& trim, const RunSummary& s)
{
    Json j = {{"label", pipeline_label(p)},
              {"request", pipeline_json(p)},
              {"vocab_size", {{"before", trim.vocab_before}, {"after", trim.kept.size()}}},
              {"whole_chain", totals_json(s)},
              {"trim", trim.record},
              {"summary", summary_json(s)},
              {"note", "bytes and parameters of the whole chain against the original model (its token table "
                       "as stored; model_bytes: every weight); each model is evaluated on its own "
                       "tokenization, so compare bits per byte"}};
    j["trim"].erase("weights_files"); // of the intermediate directory, removed after the run
    return j;
}

PipelineResult run_trim_alone(const PipelineRequest& p, const ModelFiles& files, const TrimOptions& options,
                              const fs::path& out, const PipelineOptions& po,
                              const ExperimentProgressFn& progress)
{
    // Written in our own temporary directory, so run.json joins trim's files before the rename.
    std::optional<ScratchDirectory> scratch;
    std::optional<AtomicDirectory> dir;
    fs::path target;
    if (out.empty()) {
        scratch.emplace(out);
        target = scratch->path() / "trimmed";
    } else {
        dir.emplace(out, po.overwrite);
        target = dir->path();
    }
    const auto start = std::chrono::steady_clock::now();
    const TrimReport trim = trim_model(p.request.model, target, options, trim_progress(progress));
    PipelineResult result;
    result.summary = trim_summary(p, original_of(files, trim), trim);
    result.summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.record = {{"format", "embedlab-run"},
                     {"request", pipeline_json(p)},
                     {"method", "trim"},
                     {"pipeline", pipeline_block(p, trim, result.summary)},
                     {"summary", summary_json(result.summary)}};
    if (dir) {
        write_file_atomic(dir->path() / "run.json", result.record.dump(1) + "\n");
        dir->commit();
        result.manifest = result.record;
    }
    return result;
}

PipelineResult run_untrimmed(const PipelineRequest& p, const fs::path& out, const PipelineOptions& po,
                             const ExperimentProgressFn& progress)
{
    if (!out.empty())
        check_export_target(out, po.overwrite, request_inputs(p.request)); // now, not after the work
    const CompressionRun run = run_compression(p.request, progress);
    PipelineResult result{.summary = run.summary, .record = run_json(run)};
    if (!out.empty())
        result.manifest = export_run(run, out, {.dense = po.dense, .overwrite = po.overwrite});
    return result;
}

std::vector<fs::path> pipeline_inputs(const PipelineRequest& p)
{
    auto inputs = request_inputs(p.request);
    inputs.push_back(p.trim->freq_text);
    if (!p.trim->keep_tokens.empty())
        inputs.push_back(p.trim->keep_tokens);
    return inputs;
}

} // namespace

std::vector<StaleWorkingDirectory> remove_stale_chain_directories(const fs::path& out)
{
    std::string prefix;
    const fs::path parent = scratch_parent_and_prefix(out, prefix);
    std::vector<StaleWorkingDirectory> removed;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
        const std::string name = entry.path().filename().string();
        const std::string digits = name.substr(std::min(name.size(), prefix.size()));
        if (name.rfind(prefix, 0) != 0 || digits.empty() || digits.size() > 9 ||
            digits.find_first_not_of("0123456789") != std::string::npos)
            continue;
        const long pid = std::stol(digits);
        std::error_code status_error;
        const fs::path marker = entry.path() / kScratchMarker;
        if (!fs::is_directory(fs::symlink_status(entry.path(), status_error)) ||
            !fs::is_regular_file(fs::symlink_status(marker, status_error)))
            continue; // not a directory EmbedLab made: left alone
        std::ifstream in(marker);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (pid == ::getpid() || maker_may_be_running(text, pid))
            continue;
        std::error_code remove_error;
        fs::remove_all(entry.path(), remove_error);
        if (!remove_error)
            removed.push_back({entry.path(), pid});
    }
    return removed;
}

PipelineResult run_pipeline(const PipelineRequest& p, const fs::path& out, const PipelineOptions& po,
                            const ExperimentProgressFn& progress)
{
    if (!p.trim)
        return run_untrimmed(p, out, po, progress);
    const auto start = std::chrono::steady_clock::now();
    check_trim_options(*p.trim);
    const ModelFiles files = read_model_files(p.request.model, WeightValues::ShapesOnly);
    check_pipeline_request(p, files.config);
    if (!out.empty())
        check_export_target(out, po.overwrite, pipeline_inputs(p)); // now, not after the work
    TrimOptions options = *p.trim;
    options.eval_text = p.request.eval_text; // trim's evaluation measures the original
    options.ctx = p.request.ctx;
    options.overwrite = true;
    if (p.request.method.empty())
        return run_trim_alone(p, files, options, out, po, progress);

    const ScratchDirectory scratch(out);
    const fs::path trimmed = scratch.path() / "trimmed";
    const TrimReport trim = trim_model(p.request.model, trimmed, options, trim_progress(progress));
    fs::remove(trimmed / "trim.json"); // its figures go into the one record, not beside it in `out`
    CompressionRequest request = p.request;
    request.model = trimmed.string();
    CompressionRun run = run_compression(request, after_trim(progress));
    PipelineResult result;
    result.summary = chain_summary(p, original_of(files, trim), trim, run.summary);
    result.summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.extra["pipeline"] = pipeline_block(p, trim, result.summary);
    // The model the chain started from, not the trimmed copy in the removed working directory
    // (the manifest's digests stay the trimmed files', whose tensors `out` holds).
    run.extra["source"] = {{"path", fs::absolute(p.request.model).lexically_normal().string()},
                           {"trimmed_by", "pipeline (its trim step; files: the trimmed model's)"}};
    result.record = run_json(run);
    result.record["request"] = pipeline_json(p);
    result.record["summary"] = summary_json(result.summary);
    if (!out.empty())
        result.manifest = export_run(run, out, {.dense = po.dense, .overwrite = po.overwrite});
    return result;
}

} // namespace embedlab
