// A sweep from the workbench (issue 41 item 11): the method panel's requests that
// differ in a swept field, run as ONE job. Here or on an ssh host they run one after
// another; on a Slurm cluster they are one job array (write_slurm_sweep with every
// request). Each run's row comes back as soon as it ends, so the results table
// fills row by row; a cancel stops the runs not yet done.
//
//   const auto failed = embedlab::app::compress_and_evaluate_sweep(
//       requests, target, progress, status,
//       [&](size_t i, const RunSummary& row) { add(requests[i], row); });  // this thread
//
// Plain C++ (no Qt): the window calls it from its engine thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analyses.hpp"

namespace embedlab::app {

// A run of the sweep ended: its index in `requests` and its row.
using SweepRowFn = std::function<void(size_t index, const RunSummary& row)>;

// Runs every request on `target`; `row` is called on the calling thread for each as
// it ends (Slurm: in the order the tasks end). One progress bar for the whole sweep;
// `status` says which run ("2/3: pca rank 16") or the array's state ("Slurm 12: 1/3
// done, 1 running"). A run that fails does not stop the others: the failures are
// returned, each "<describe_request>: <message>". Cancelled (progress returning
// false) stops the rest; rows already given stay given.
std::vector<std::string> compress_and_evaluate_sweep(const std::vector<CompressionRequest>& requests,
                                                     const RunTarget& target, const ProgressFn& progress,
                                                     const StatusFn& status, const SweepRowFn& row);

} // namespace embedlab::app
