// run_job: compress / eval / measure from a JSON description (job.hpp).
#include "embedlab/job.hpp"

#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include <sys/utsname.h>
#include <unistd.h>

#include "embedlab/compressed_model.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/model.hpp"
#include "embedlab/pipeline.hpp"
#include "embedlab/power.hpp"
#include "job/job_check.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

namespace {

// Progress events at most every 100 ms and at the end; cancellation checked at each call.
ProgressFn progress_events(const std::string& stage, const JobEventFn& events, const CancelFn& cancelled)
{
    auto last = std::make_shared<std::chrono::steady_clock::time_point>();
    return [=](int64_t done, int64_t total) {
        if (cancelled && cancelled())
            return false;
        const auto now = std::chrono::steady_clock::now();
        if (events && (done >= total || now - *last >= std::chrono::milliseconds(100))) {
            *last = now;
            events(Json{{"event", "progress"}, {"stage", stage}, {"done", done}, {"total", total}});
        }
        return true;
    };
}

// The experiment's progress as job events (at most every 100 ms, each new stage, the
// end); cancellation checked at each call.
ExperimentProgressFn experiment_events(const JobEventFn& events, const CancelFn& cancelled)
{
    auto last = std::make_shared<std::chrono::steady_clock::time_point>();
    auto last_stage = std::make_shared<std::string>();
    return [=](const ExperimentProgress& p) {
        if (cancelled && cancelled())
            return false;
        const auto now = std::chrono::steady_clock::now();
        if (events &&
            (p.stage != *last_stage || p.done >= p.total || now - *last >= std::chrono::milliseconds(100))) {
            *last = now;
            *last_stage = p.stage;
            events(Json{{"event", "progress"},
                        {"stage", p.stage},
                        {"done", p.done},
                        {"total", p.total},
                        {"overall", p.overall}});
        }
        return true;
    };
}

// With "measure": the written model measured, on the job's eval_text.
void measure_written(Json& result, const Json& job, const std::string& eval_text, const JobEventFn& events,
                     const CancelFn& cancelled)
{
    if (!job.contains("measure"))
        return;
    Json options = job["measure"];
    options.erase("text"); // the measured text is the job's eval_text, an uploaded input
    if (!eval_text.empty())
        options["text"] = eval_text;
    result["measure"] = measure_model(std::string(job["out"]), options,
                                      progress_events("measure", events, cancelled), cancelled);
}

// A pipeline (pipeline.hpp): trim, then a method, one record.
Json run_pipeline_job(const Json& job, const JobEventFn& events, const CancelFn& cancelled)
{
    const PipelineRequest request = pipeline_from_json(job);
    const std::string out = job.value("out", "");
    const auto run = run_pipeline(
        request, out, {.overwrite = job.value("force", false), .dense = job.value("dense", false)},
        experiment_events(events, cancelled));
    Json result = {{"kind", "compress"}, {"summary", summary_json(run.summary)}, {"record", run.record}};
    if (out.empty())
        return result;
    result["out"] = out;
    result["manifest"] = run.manifest;
    measure_written(result, job, request.request.eval_text, events, cancelled);
    return result;
}

// A compress job is an experiment request (experiment.hpp) plus, optionally, an
// output directory and a measurement of the written model.
Json run_compress(const Json& job, const JobEventFn& events, const CancelFn& cancelled)
{
    if (is_pipeline_json(job))
        return run_pipeline_job(job, events, cancelled);
    const CompressionRequest request = request_from_json(job);
    const std::string out = job.value("out", "");
    const bool force = job.value("force", false);
    if (!out.empty())
        check_export_target(out, force, request_inputs(request)); // now, not after the work
    auto run = run_compression(request, experiment_events(events, cancelled));
    Json result = {{"kind", "compress"}, {"summary", summary_json(run.summary)}};
    if (out.empty()) {
        result["record"] = run_json(run);
        return result;
    }
    result["out"] = out;
    result["manifest"] = export_run(run, out, {.dense = job.value("dense", false), .overwrite = force},
                                    progress_events("write", events, cancelled));
    run = CompressionRun{}; // release the models before measuring the written one
    measure_written(result, job, request.eval_text, events, cancelled);
    return result;
}

Json run_eval(const Json& job, const JobEventFn& events, const CancelFn& cancelled)
{
    const std::filesystem::path model = detail::job_string(job, "model", true);
    const std::string text = detail::job_string(job, "text", true);
    const int64_t ctx = detail::job_int(job, "ctx", 128, 1, 1 << 20);
    const PerplexityOptions po{.ctx = ctx,
                               .stride = detail::job_int(job, "stride", ctx, 1, ctx),
                               .batch_windows = detail::job_int(job, "batch", 0, 0, 1 << 16)};
    auto lm = load_model(model);
    const auto ids = lm.tokenizer->encode(read_text_file(text));
    auto r = evaluate_perplexity(*lm.model, ids, po, progress_events("eval", events, cancelled));
    add_bits_per_byte(r, ids, *lm.tokenizer);
    Json result = {{"kind", "eval"}, {"model", model.string()}, {"text_sha256", sha256_file(text)}};
    result.update(perplexity_json(r));
    result["embedding"] = lm.model->token_embedding().kind();
    return result;
}

std::string first_line(const std::filesystem::path& file)
{
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\0' || line.back() == '\n'))
        line.pop_back();
    return line;
}

} // namespace

Json run_job(const Json& job, const JobEventFn& events, const CancelFn& cancelled)
{
    check_job(job);
    const std::string kind = job["kind"];
    Json result;
    if (kind == "compress")
        result = run_compress(job, events, cancelled);
    else if (kind == "eval")
        result = run_eval(job, events, cancelled);
    else
        result = {{"kind", "measure"},
                  {"measure", measure_model(std::string(job["model"]), job,
                                            progress_events("measure", events, cancelled), cancelled)}};
    result["host"] = host_identity();
    return result;
}

Json host_identity()
{
    Json j;
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    j["hostname"] = name;
    utsname u{};
    if (::uname(&u) == 0)
        j["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
    const auto model = first_line("/proc/device-tree/model");
    j["device_model"] = model.empty() ? Json() : Json(model);
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string cpu;
    for (std::string line; std::getline(cpuinfo, line);)
        for (const char* key : {"model name", "Model", "Hardware"})
            if (cpu.empty() && line.rfind(key, 0) == 0 && line.find(':') != std::string::npos)
                cpu = line.substr(line.find(':') + 2);
    j["cpu_model"] = cpu.empty() ? Json() : Json(cpu);
    j["cpu_cores"] = std::thread::hardware_concurrency();
    std::ifstream meminfo("/proc/meminfo");
    for (std::string line; std::getline(meminfo, line);)
        if (line.rfind("MemTotal:", 0) == 0)
            j["memory_bytes"] = std::stoll(line.substr(9)) * 1024;
    j["embedlab_version"] = EMBEDLAB_VERSION;
    std::string why;
    j["power_sampling"] = power_sampling_available(&why);
    if (!j["power_sampling"].get<bool>())
        j["power_sampling_reason"] = why;
    return j;
}

} // namespace embedlab
