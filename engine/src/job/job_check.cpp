#include "job/job_check.hpp"

#include <algorithm>
#include <array>

#include "embedlab/error.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/job.hpp"
#include "embedlab/pipeline_request.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

namespace {

// What a compress job adds to its request: the output and what happens to it.
const std::array<std::string, 5> kCompressJobFields{"kind", "out", "dense", "force", "measure"};

double number_field(const Json& o, const std::string& key, double fallback, double lo, double hi)
{
    if (!o.contains(key))
        return fallback;
    if (!o[key].is_number() || !(o[key].get<double>() >= lo) || !(o[key].get<double>() <= hi))
        throw InputError("job: \"" + key + "\" must be a number in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "]");
    return o[key].get<double>();
}

bool bool_field(const Json& o, const std::string& key)
{
    if (!o.contains(key))
        return false;
    if (!o[key].is_boolean())
        throw InputError("job: \"" + key + "\" must be true or false");
    return o[key].get<bool>();
}

} // namespace

namespace detail {

std::string job_string(const Json& job, const std::string& key, bool required)
{
    if (!job.contains(key)) {
        if (required)
            throw InputError("job: \"" + key + "\" is required for kind \"" + job.value("kind", "") + "\"");
        return {};
    }
    if (!job[key].is_string() || job[key].get<std::string>().empty())
        throw InputError("job: \"" + key + "\" must be a non-empty string");
    return job[key].get<std::string>();
}

int64_t job_int(const Json& job, const std::string& key, int64_t fallback, int64_t lo, int64_t hi)
{
    if (!job.contains(key))
        return fallback;
    if (!job[key].is_number_integer() || job[key].get<int64_t>() < lo || job[key].get<int64_t>() > hi)
        throw InputError("job: \"" + key + "\" must be an integer in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "]");
    return job[key].get<int64_t>();
}

MeasureOptions measure_options(const Json& o)
{
    MeasureOptions m;
    m.tokens = static_cast<int64_t>(number_field(o, "tokens", 50, 1, 1 << 16));
    m.repeat = static_cast<int64_t>(number_field(o, "repeat", 5, 1, 100000));
    m.lookups = static_cast<int64_t>(number_field(o, "lookups", 256, 1, 1 << 24));
    m.seed = static_cast<int64_t>(number_field(o, "seed", 0, 0, 1e15));
    m.nu = number_field(o, "nu", 5, 1e-12, 1e12); // omega divides by nu's memory energy
    m.tau = number_field(o, "tau", 1, 0, 1e12);
    m.idle_seconds = number_field(o, "idle_seconds", 1, 0, 600);
    m.energy_seconds = number_field(o, "energy_seconds", 2, 0, 3600);
    if (o.contains("power")) {
        if (!o["power"].is_string() || (o["power"] != "auto" && o["power"] != "off"))
            throw InputError("job: \"power\" must be \"auto\" or \"off\"");
        m.power = o["power"].get<std::string>();
    }
    if (o.contains("text") && o["text"].is_string())
        m.text = o["text"].get<std::string>();
    return m;
}

} // namespace detail

const std::vector<std::string>& job_input_fields()
{
    static const std::vector<std::string> fields = [] {
        auto f = request_input_fields();
        f.push_back("text"); // eval and measure jobs
        return f;
    }();
    return fields;
}

void check_job(const Json& job)
{
    if (!job.is_object())
        throw InputError("job: must be a JSON object");
    const std::string kind =
        job.contains("kind") && job["kind"].is_string() ? job["kind"].get<std::string>() : "";
    if (kind != "compress" && kind != "eval" && kind != "measure")
        throw InputError("job: \"kind\" must be \"compress\", \"eval\" or \"measure\"");
    detail::job_string(job, "model", true);
    for (const auto& f : {"text", "eval_text", "out"})
        detail::job_string(job, f, false);
    if (kind == "compress" && is_pipeline_json(job)) {
        pipeline_from_json(job); // a chain (pipeline_request.hpp): its steps name their fields
    } else if (kind == "compress") {
        // A compress job is an experiment request (experiment_request.hpp) plus where it goes.
        const auto& known = request_fields();
        for (const auto& [key, value] : job.items())
            if (std::find(known.begin(), known.end(), key) == known.end() &&
                std::find(kCompressJobFields.begin(), kCompressJobFields.end(), key) ==
                    kCompressJobFields.end())
                throw InputError("job: \"" + key + "\" is not a field of a compress job");
        request_from_json(job);
    } else {
        const int64_t ctx = detail::job_int(job, "ctx", 128, 1, 1 << 20);
        detail::job_int(job, "stride", ctx, 1, ctx);
        detail::job_int(job, "batch", 0, 0, 1 << 16);
    }
    if (kind == "eval")
        detail::job_string(job, "text", true);
    if (job.contains("measure") && !job["measure"].is_object())
        throw InputError("job: \"measure\" must be an object of measure options");
    bool_field(job, "force");
    bool_field(job, "dense");
    if (kind == "measure")
        detail::measure_options(job);
    if (job.contains("measure"))
        detail::measure_options(job["measure"]);
}

} // namespace embedlab
