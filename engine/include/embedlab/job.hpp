// Jobs: one unit of work described as JSON, run by the same code locally and by
// `embedlab-cli worker` on a remote host (remote.hpp), so their numbers match.
//
//   auto job = nlohmann::ordered_json::parse(R"({"kind": "measure", "model": "out/pca16", "tokens": 50})");
//   auto result = embedlab::run_job(job, [](const nlohmann::ordered_json& e) { /* progress, log */ });
//   result["measure"]["end_to_end"]["seconds_mean"];
//
// Job fields (paths are local to the machine that runs the job):
//   kind "compress": model, method pca|svd|tt, rank | shape + (ranks | eps), out DIR,
//                    [eval_text FILE, ctx (128)], [dense], [force], [measure {options}]
//                    writes DIR atomically (compressed_model.hpp); with "measure" the
//                    written model is then measured as below
//   kind "eval":     model, text FILE, [ctx (128), stride (ctx), batch (0)]: perplexity (METHODS 0)
//   kind "measure":  model (compressed or dense), [text FILE: its first l tokens, else
//                    seeded random ids], [tokens l (50), repeat (5), lookups (256), seed (0),
//                    nu (5), tau (1), power "auto"|"off", idle_seconds (1), energy_seconds (2)]
// Results carry "kind", the job's numbers and "host" (host_identity()).
// Events: {"event": "progress", "stage": S, "done": n, "total": m} and
// {"event": "log", "message": M}, on the calling thread.
// Thread safety: reentrant; one job at a time per process is best (libtorch uses every core).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"

namespace embedlab {

using JobEventFn = std::function<void(const nlohmann::ordered_json& event)>;
using CancelFn = std::function<bool()>; // true: stop (the job throws Cancelled)

// Fields naming input files or directories, and the output field ("out").
const std::vector<std::string>& job_input_fields();

// Throws InputError("job: <problem>") for an unknown kind, missing or mistyped
// fields; does not touch the file system.
void check_job(const nlohmann::ordered_json& job);

nlohmann::ordered_json run_job(const nlohmann::ordered_json& job, const JobEventFn& events = {},
                               const CancelFn& cancelled = {});

// On-device figures of a model (kind "measure" above): per-token lookup latency
// (TensorSLM Table 5), end-to-end latency of l tokens (Table 6), peak RSS, the
// energy model (METHODS 5) and measured energy where the device reports power.
nlohmann::ordered_json measure_model(const std::filesystem::path& model,
                                     const nlohmann::ordered_json& options, const ProgressFn& progress = {},
                                     const CancelFn& cancelled = {});

// This machine: hostname, kernel, device model (/proc/device-tree/model), CPU
// model and cores, memory, embedlab version, whether power sampling works.
nlohmann::ordered_json host_identity();

} // namespace embedlab
