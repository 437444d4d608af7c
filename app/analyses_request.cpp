// How a request is named in the job list and the demo's progress lines.
#include <cstdio>

#include "analyses.hpp"

namespace embedlab::app {

namespace {
std::string number(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}
} // namespace

std::string describe_request(const CompressionRequest& r)
{
    std::string what;
    if (r.method == "tt")
        what = "tt eps " + number(r.eps);
    else if (r.method == "lle")
        what = "lle keep " + number(r.keep_ratio) + ", k " + std::to_string(r.k);
    else if (r.method == "fourier")
        what = "fourier " + r.mlp + ", " + std::to_string(r.steps) + " steps";
    else if (r.method == "flat")
        what = "flat remaining " + number(r.remaining) + ", " + r.allocation;
    else
        what = r.method + " rank " + std::to_string(r.rank);
    if (r.lora_rank > 0)
        what += " + LoRA r " + std::to_string(r.lora_rank) + ", " + std::to_string(r.lora_steps) + " steps";
    if (!r.host.empty())
        what += " on " + r.host;
    return what;
}

} // namespace embedlab::app
