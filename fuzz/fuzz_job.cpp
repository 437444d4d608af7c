// A job file (job.hpp), as `embedlab-cli worker --job` and `remote run` read it.
// A job check_job accepts must give its compression fields and measure options
// without another error: the checks run before any model is loaded.
#include <cstdlib>

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
            const auto c = detail::job_compression(job);
            if (c.method != "pca" && c.method != "svd" && c.method != "tt")
                std::abort();
            if (c.method != "tt" && c.rank < 1)
                std::abort();
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
