// What the analyses' .cpp files share (libtorch inside; never included by Qt code).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
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
} // namespace embedlab

namespace embedlab::app::detail {

// Splits one progress bar into consecutive stages of the given weights.
ProgressFn stage(const ProgressFn& progress, int64_t offset, int64_t weight, int64_t total);

// This computer's name for the results' "host" column.
std::string host_name();

// The original model's perplexity, computed once per key (model, text, length,
// host: callers build it) and remembered for the process; safe from any thread.
double original_perplexity(const std::string& key, const std::function<double()>& compute);

// The request's text, or the bundled sample text when it is empty.
std::string text_or_default(const std::string& text);

// The workbench's request as the engine's experiment request (experiment.hpp):
// empty texts are the bundled sample text; the evaluation is on `text`'s first
// eval_tokens ids (the remote path replaces the text by those ids).
embedlab::CompressionRequest experiment_request(const std::string& model, const CompressionRequest& request,
                                                const std::string& text);

// analyses_remote.cpp: a request with a host, run by `embedlab-cli worker` there.
CompressionRun remote_compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                            const std::string& text, const ProgressFn& progress);
// The worker's side (RemoteOptions' remote_cli and remote_dir): the overload
// above uses these defaults; tests point them at the build's embedlab-cli.
struct RemoteWorker {
    std::string cli = "embedlab-cli";
    std::string dir = "~/.cache/embedlab";
};
CompressionRun remote_compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                            const std::string& text, const ProgressFn& progress,
                                            const RemoteWorker& worker);

// analyses_slurm.cpp: a request with `slurm`, as a one-task Slurm job array; its
// state ("Slurm 12: pending", ... "running on node3") goes to `status`.
CompressionRun slurm_compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                           const std::string& text, const ProgressFn& progress,
                                           const StatusFn& status);

} // namespace embedlab::app::detail
