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
#include "embedlab/model.hpp"
#include "embedlab/power.hpp"
#include "job/job_check.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

namespace {

CompressionSpec spec_of(const Json& job)
{
    const auto c = detail::job_compression(job);
    CompressionSpec spec;
    spec.method = c.method;
    spec.rank = c.rank;
    spec.shape = c.shape;
    spec.ranks = c.ranks;
    spec.eps = c.eps;
    return spec;
}

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

Json perplexity_json(const PerplexityResult& r)
{
    return {{"ppl", r.ppl},         {"nll_per_token", r.nll_per_token},
            {"tokens", r.tokens},   {"ctx", r.ctx},
            {"stride", r.stride},   {"windows", r.windows},
            {"seconds", r.seconds}, {"tokens_per_second", r.tokens_per_second}};
}

Json run_compress(const Json& job, const JobEventFn& events, const CancelFn& cancelled)
{
    const std::filesystem::path model = detail::job_string(job, "model", true);
    const std::filesystem::path out = detail::job_string(job, "out", true);
    const std::string eval_text = detail::job_string(job, "eval_text", false);
    const bool force = job.value("force", false);
    if (std::filesystem::exists(out) && !force)
        throw InputError(out.string() + ": already exists (set \"force\": true to replace it)");
    CompressionSpec spec = spec_of(job);
    auto lm = load_model(model, {.need_tokenizer = !eval_text.empty()});
    if (!lm.files.embedlab_manifest.empty())
        throw InputError(model.string() + ": is already an EmbedLab compressed model; compress the original");
    const auto* dense = dynamic_cast<const DenseTokenEmbedding*>(&lm.model->token_embedding());
    if (!dense)
        throw InputError(model.string() + ": the token embedding is not a dense table");
    const auto c = compress_table(dense->table(), spec, lm.model->parameter_breakdown().total(),
                                  progress_events("compress " + spec.method, events, cancelled));
    SaveCompressedOptions save{.dense = job.value("dense", false), .overwrite = force};
    if (!eval_text.empty()) {
        const int64_t ctx = detail::job_int(job, "ctx", 128, 1, 1 << 20);
        const auto ids = lm.tokenizer->encode(read_text_file(eval_text));
        const PerplexityOptions po{.ctx = ctx, .stride = ctx};
        const auto base =
            evaluate_perplexity(*lm.model, ids, po, progress_events("eval original", events, cancelled));
        lm.model->set_token_embedding(c.embedding);
        const auto comp =
            evaluate_perplexity(*lm.model, ids, po, progress_events("eval compressed", events, cancelled));
        save.evaluation = {{"text_sha256", sha256_file(eval_text)},
                           {"tokens", comp.tokens},
                           {"ctx", comp.ctx},
                           {"stride", comp.stride},
                           {"baseline", perplexity_json(base)},
                           {"compressed", perplexity_json(comp)},
                           {"delta_ln_ppl", std::log(comp.ppl) - std::log(base.ppl)},
                           {"protocol", "METHODS.md section 0"}};
    }
    const Json manifest =
        save_compressed_model(lm, c, out, save, progress_events("write", events, cancelled));
    Json result = {{"kind", "compress"}, {"out", out.string()}, {"manifest", manifest}};
    if (job.contains("measure")) {
        lm = LoadedModel{}; // release the source model before measuring the written one
        Json options = job["measure"];
        options.erase("text"); // the measured text is the job's eval_text, an uploaded input
        if (!eval_text.empty())
            options["text"] = eval_text;
        result["measure"] =
            measure_model(out, options, progress_events("measure", events, cancelled), cancelled);
    }
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
    const auto r = evaluate_perplexity(*lm.model, ids, po, progress_events("eval", events, cancelled));
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
