// How a request is named in the job list and the demo's progress lines (the
// engine's description of the request, and where it runs), and the run target's
// JSON form for sessions and settings.
#include "analyses.hpp"
#include "analyses_internal.hpp"

#include <filesystem>

#include "embedlab/resources.hpp"

namespace embedlab::app {

std::string sst2_dev_path()
{
    namespace fs = std::filesystem;
    std::error_code ec;
    for (const auto& dir : shared_data_dirs()) {
        const auto file = dir / "data" / "glue" / "SST-2" / "dev.tsv";
        if (fs::is_regular_file(file, ec))
            return fs::weakly_canonical(file, ec).string();
    }
    return {};
}

std::string describe_run(const CompressionRequest& request, const RunTarget& target)
{
    std::string what = describe_request(request); // an unknown method: its name (check_request says why)
    if (target.slurm)
        what += " on Slurm";
    else if (!target.host.empty())
        what += " on " + target.host;
    return what;
}

CompressionRequest stored_request_from_json(const nlohmann::ordered_json& json)
{
    // request_from_json requires a model: a stored panel choice has none (the window's).
    const bool no_model =
        json.is_object() &&
        (!json.contains("model") || (json["model"].is_string() && json["model"].get<std::string>().empty()));
    if (!no_model)
        return request_from_json(json);
    auto with_model = json;
    with_model["model"] = "-";
    auto r = request_from_json(with_model);
    r.model.clear();
    return r;
}

nlohmann::ordered_json target_json(const RunTarget& t)
{
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    auto put = [&](const char* key, const std::string& value) {
        if (!value.empty())
            j[key] = value;
    };
    put("host", t.host);
    put("ssh_config", t.ssh_config);
    put("remote_cli", t.remote_cli);
    put("remote_dir", t.remote_dir);
    if (t.slurm)
        j["slurm"] = true;
    put("slurm_partition", t.slurm_partition);
    put("slurm_time", t.slurm_time);
    if (t.slurm_array_limit != 0)
        j["slurm_array_limit"] = t.slurm_array_limit;
    return j;
}

RunTarget target_from_json(const nlohmann::ordered_json& j)
{
    if (!j.is_object())
        throw InputError("target: must be a JSON object");
    RunTarget t;
    auto str = [&](const char* key, std::string& out) {
        if (!j.contains(key))
            return;
        if (!j[key].is_string())
            throw InputError(std::string("target: \"") + key + "\" must be a string");
        out = j[key].get<std::string>();
    };
    str("host", t.host);
    str("ssh_config", t.ssh_config);
    str("remote_cli", t.remote_cli);
    str("remote_dir", t.remote_dir);
    str("slurm_partition", t.slurm_partition);
    str("slurm_time", t.slurm_time);
    if (j.contains("slurm")) {
        if (!j["slurm"].is_boolean())
            throw InputError("target: \"slurm\" must be true or false");
        t.slurm = j["slurm"].get<bool>();
    }
    if (j.contains("slurm_array_limit")) {
        const auto& v = j["slurm_array_limit"];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1'000'000)
            throw InputError("target: \"slurm_array_limit\" must be an integer in 0..1000000");
        t.slurm_array_limit = static_cast<int>(v.get<int64_t>());
    }
    if (t.slurm && !t.host.empty())
        throw InputError("target: \"slurm\" and \"host\" both given: a run goes to one of them");
    return t;
}

} // namespace embedlab::app
