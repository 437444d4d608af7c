// What the analyses' .cpp files share (libtorch inside; never included by Qt code).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyses.hpp"
#include "embedlab/error.hpp"
#include "embedlab/experiment_request.hpp"

namespace embedlab {
class LanguageModel;
class Tokenizer;
struct LoadedModel;
struct CompressionSpec;
struct CompressedEmbedding;
struct CompressionRun;
} // namespace embedlab

namespace embedlab::app::detail {

// Splits one progress bar into consecutive stages of the given weights.
ProgressFn stage(const ProgressFn& progress, int64_t offset, int64_t weight, int64_t total);

// This computer's name for the results' "host" column.
std::string host_name();

// A local run the workbench still keeps in memory (the last few), or null.
std::shared_ptr<const CompressionRun> kept_compression(const CompressionRequest& request);

// analyses_remote.cpp: a request run on target.host by `embedlab-cli worker` there.
RunSummary remote_compress_and_evaluate(const CompressionRequest& request, const RunTarget& target,
                                        const ProgressFn& progress);
// The worker's side (RemoteOptions' remote_cli and remote_dir): the overload
// above takes them from the target ("": these defaults); tests point them at the
// build's embedlab-cli.
struct RemoteWorker {
    std::string cli = "embedlab-cli";
    std::string dir = "~/.cache/embedlab";
};
RunSummary remote_compress_and_evaluate(const CompressionRequest& request, const RunTarget& target,
                                        const ProgressFn& progress, const RemoteWorker& worker);

// A chain (pipeline_request.hpp) as the same "compress" job with its "pipeline" list.
RunSummary remote_chain_and_evaluate(const nlohmann::ordered_json& pipeline, const RunTarget& target,
                                     const ProgressFn& progress);
RunSummary remote_chain_and_evaluate(const nlohmann::ordered_json& pipeline, const RunTarget& target,
                                     const ProgressFn& progress, const RemoteWorker& worker);

// analyses_slurm.cpp: a request on a Slurm target, as a one-task Slurm job array;
// its state ("Slurm 12: pending", ... "running on node3") goes to `status`.
RunSummary slurm_compress_and_evaluate(const CompressionRequest& request, const RunTarget& target,
                                       const ProgressFn& progress, const StatusFn& status);
// The same for a workbench sweep: every request a task of ONE array; `row` gets each
// task's row as it ends. Returns the failed tasks: (index, why, where the logs are).
std::vector<std::pair<size_t, std::string>>
slurm_sweep_compress_and_evaluate(const std::vector<CompressionRequest>& requests, const RunTarget& target,
                                  const ProgressFn& progress, const StatusFn& status,
                                  const std::function<void(size_t, const RunSummary&)>& row);
// A chain's job (its pipeline JSON) as a one-task array.
RunSummary slurm_chain_and_evaluate(const nlohmann::ordered_json& pipeline, const RunTarget& target,
                                    const ProgressFn& progress, const StatusFn& status);

} // namespace embedlab::app::detail
