#include "job/job_check.hpp"

#include "embedlab/error.hpp"
#include "embedlab/job.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

namespace {

std::vector<int64_t> int_list_field(const Json& job, const std::string& key)
{
    if (!job.contains(key))
        return {};
    if (!job[key].is_array())
        throw InputError("job: \"" + key + "\" must be an array of integers");
    std::vector<int64_t> v;
    for (const auto& x : job[key]) {
        if (!x.is_number_integer() || x.get<int64_t>() < 1)
            throw InputError("job: \"" + key + "\" must be an array of positive integers");
        v.push_back(x.get<int64_t>());
    }
    return v;
}

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

JobCompression job_compression(const Json& job)
{
    JobCompression spec;
    spec.method = job_string(job, "method", true);
    if (spec.method == "pca" || spec.method == "svd") {
        spec.rank = job_int(job, "rank", 0, 1, 1 << 20);
        if (spec.rank == 0)
            throw InputError("job: method " + spec.method + " needs \"rank\"");
    } else if (spec.method == "tt") {
        spec.shape = int_list_field(job, "shape");
        spec.ranks = int_list_field(job, "ranks");
        spec.eps = number_field(job, "eps", 0.0, 0.0, 1.0);
        if (spec.shape.empty() || spec.ranks.empty() == (spec.eps <= 0))
            throw InputError("job: method tt needs \"shape\" and one of \"ranks\" or \"eps\"");
    } else {
        throw InputError("job: method \"" + spec.method + "\" is not available in jobs (pca, svd, tt)");
    }
    return spec;
}

MeasureOptions measure_options(const Json& o)
{
    MeasureOptions m;
    m.tokens = static_cast<int64_t>(number_field(o, "tokens", 50, 1, 1 << 16));
    m.repeat = static_cast<int64_t>(number_field(o, "repeat", 5, 1, 100000));
    m.lookups = static_cast<int64_t>(number_field(o, "lookups", 256, 1, 1 << 24));
    m.seed = static_cast<int64_t>(number_field(o, "seed", 0, 0, 1e15));
    m.nu = number_field(o, "nu", 5, 0, 1e12);
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
    static const std::vector<std::string> fields = {"model", "text", "eval_text"};
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
    if (kind == "compress") {
        detail::job_string(job, "out", true);
        detail::job_compression(job);
    }
    if (kind == "eval")
        detail::job_string(job, "text", true);
    if (job.contains("measure") && !job["measure"].is_object())
        throw InputError("job: \"measure\" must be an object of measure options");
    const int64_t ctx = detail::job_int(job, "ctx", 128, 1, 1 << 20);
    detail::job_int(job, "stride", ctx, 1, ctx);
    detail::job_int(job, "batch", 0, 0, 1 << 16);
    bool_field(job, "force");
    bool_field(job, "dense");
    if (kind == "measure")
        detail::measure_options(job);
    if (job.contains("measure"))
        detail::measure_options(job["measure"]);
}

} // namespace embedlab
