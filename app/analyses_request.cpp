// How a request is named in the job list and the demo's progress lines: the
// engine's description of the same experiment request, and where it runs.
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

std::string describe_request(const CompressionRequest& r)
{
    std::string what;
    try {
        what = embedlab::describe_request(detail::experiment_request("", r, ""));
    } catch (const InputError&) {
        what = r.method; // not a method: check_request says so before anything runs
    }
    if (r.slurm)
        what += " on Slurm";
    else if (!r.host.empty())
        what += " on " + r.host;
    return what;
}

} // namespace embedlab::app
