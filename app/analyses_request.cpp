// How a request is named in the job list and the demo's progress lines: the
// engine's description of the same experiment request, and where it runs.
#include "analyses.hpp"
#include "analyses_internal.hpp"

namespace embedlab::app {

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
