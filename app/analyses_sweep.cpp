// Sweeps from the workbench (analyses_sweep.hpp): here or on an ssh host, one
// compress_and_evaluate after another on one progress bar; on Slurm, one job array
// (analyses_slurm.cpp).
#include "analyses_sweep.hpp"

#include "analyses_internal.hpp"

namespace embedlab::app {

std::vector<std::string> compress_and_evaluate_sweep(const std::vector<CompressionRequest>& requests,
                                                     const RunTarget& target, const ProgressFn& progress,
                                                     const StatusFn& status, const SweepRowFn& row)
{
    std::vector<std::string> failures;
    if (target.slurm) {
        for (const auto& [i, message] :
             detail::slurm_sweep_compress_and_evaluate(requests, target, progress, status, row))
            failures.push_back(describe_request(requests[i]) + ": " + message);
        return failures;
    }
    const auto n = static_cast<int64_t>(requests.size());
    for (int64_t i = 0; i < n; ++i) {
        const auto& request = requests[static_cast<size_t>(i)];
        report_progress(progress, 1000 * i, 1000 * n); // a cancel between runs stops here
        if (status)
            status(std::to_string(i + 1) + "/" + std::to_string(n) + ": " + describe_request(request));
        try {
            const RunSummary r =
                compress_and_evaluate(request, target, detail::stage(progress, 1000 * i, 1000, 1000 * n));
            if (row)
                row(static_cast<size_t>(i), r);
        } catch (const Cancelled&) {
            throw;
        } catch (const std::exception& e) { // the other runs still run: a rank can fail alone
            failures.push_back(describe_request(request) + ": " + e.what());
        }
    }
    report_progress(progress, 1000 * n, 1000 * n);
    return failures;
}

} // namespace embedlab::app
