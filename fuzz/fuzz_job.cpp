// A job file (job.hpp), as `embedlab-cli worker --job` and `remote run` read it.
// A job check_job accepts must give its compression fields and measure options
// without another error: the checks run before any model is loaded.
#include <cstdlib>

#include "embedlab/experiment_request.hpp"
#include "embedlab/job.hpp"
#include "fuzz_support.hpp"
#include "job/job_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    const auto text = fuzz::as_text(data, size);
    const auto job =
        nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (job.is_discarded())
        return 0; // the worker reports invalid JSON before check_job
    bool accepted = false;
    fuzz::expect_input_errors([&] {
        check_job(job);
        accepted = true;
    });
    if (!accepted)
        return 0;
    try {
        const std::string kind = job["kind"];
        if (kind == "compress") {
            // The request must read back, and its JSON form must give the same request.
            const auto r = request_from_json(job);
            const auto again = request_from_json(request_json(r));
            if (request_json(again) != request_json(r))
                std::abort();
            method_descriptor(r.method);
        }
        if (kind == "measure")
            detail::measure_options(job);
        if (job.contains("measure"))
            detail::measure_options(job["measure"]);
    } catch (const std::exception&) {
        std::abort(); // check_job let through a job the runner cannot read
    }
    return 0;
}
