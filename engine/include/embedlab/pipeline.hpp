// Stacked compression (issue 60, "Stacking"): vocabulary trimming as a compress step,
// and a chain of steps run as one job with one record.
//
//   auto p = embedlab::pipeline_from_json(nlohmann::ordered_json::parse(R"({
//       "model": "models/tinyllama", "eval_text": "eval.txt",
//       "pipeline": [{"method": "trim", "freq_text": "f.txt", "coverage": 0.999},
//                    {"method": "pca", "rank": 32, "store": "q8_0"}]})"));
//   auto result = embedlab::run_pipeline(p, "out/chain", {}, progress);
//   result.summary.parameters;        // "trim 0.999 → pca 32 → q8_0"
//   result.record["pipeline"];        // every step's settings; bytes against the original
//
// A chain is at most two steps: trim (first, when given), then one method of the
// registry; the method's own "store" field is the chain's last step (the type its
// factors are stored at). The CLI's `compress --method trim ... --then pca --rank 32
// --then-store q8_0` is this request, and so is a worker job with a "pipeline" list.
// A request without trim is a plain experiment request (experiment_request.hpp):
// `--then-store T` on a single method is that method's store T.
//
// The run: trim_model into a temporary directory beside the output (its evaluation
// measures the original model on the evaluation text), run_compression on the trimmed
// model, export_run to the output; the output appears only when every step finished,
// and the temporary directory is removed whatever happens (a SIGKILL leaves it, with a
// marker file: the next run for the same output removes it). Trim alone writes the
// trimmed model directory (trim.json as `embedlab-cli trim` writes it) and run.json.
//
// The record's bytes and parameters are the whole chain's against the ORIGINAL model:
// the token table V x d as the input stores it, against the last step's stored factors
// (K rows); the model's weights likewise, the untied head cut to K rows by trim. The
// perplexities are each model's on its own tokenization (the original's from trim's
// evaluation), so read bits per byte across a trimmed chain.
//
// Thread safety: reentrant; progress runs on the calling thread and may cancel.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/experiment.hpp"
#include "embedlab/pipeline_request.hpp"

namespace embedlab {

struct PipelineOptions {
    bool overwrite = false;
    bool dense = false; // the method step's dense/ export
};

struct PipelineResult {
    RunSummary summary;              // the chain's row (method "chain", parameters its label)
    nlohmann::ordered_json record;   // the run's record (run_json with the "pipeline" block)
    nlohmann::ordered_json manifest; // what `out` holds (embedlab.json, or run.json for trim alone)
};

// A chain's working directory that a killed run left: `.NAME.chain-PID` beside `out`,
// holding EmbedLab's marker file, written on this host by process PID, which no longer
// runs (or is another process now: its start time differs).
struct StaleWorkingDirectory {
    std::filesystem::path path;
    long pid = 0;
};

// Removes the stale working directories of chains for `out` (run_pipeline does so
// before it makes its own; a front end calls it first to say what it removed).
// Directories without the marker, another host's and a live process's are left alone.
std::vector<StaleWorkingDirectory> remove_stale_chain_directories(const std::filesystem::path& out);

// Runs the chain into `out` (an empty `out` writes nothing: the record only); a request
// without trim runs as run_compression and export_run. InputError before any work for
// a bad request or output.
PipelineResult run_pipeline(const PipelineRequest& p, const std::filesystem::path& out,
                            const PipelineOptions& options = {}, const ExperimentProgressFn& progress = {});

} // namespace embedlab
