// The request half of stacked compression (pipeline.hpp): a chain's steps as JSON
// and the checks that need no model weights. Torch-free, so the job checker reaches it.
//
//   auto p = embedlab::pipeline_from_json(job);     // InputError naming pipeline[i].<field>
//   embedlab::check_pipeline_request(p, config);      // the method against the model
//   embedlab::pipeline_json(p);                       // back to the same JSON
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/experiment_request.hpp"
#include "embedlab/trim.hpp"

namespace embedlab {

struct PipelineRequest {
    std::optional<TrimOptions> trim; // the first step, when the chain trims
    // The method step (method, its fields, store) and the model and evaluation fields;
    // method empty: trim alone. Its model is the original.
    CompressionRequest request;
    nlohmann::ordered_json steps = nlohmann::ordered_json::array(); // the steps as given
};

// Whether a job or request JSON is a pipeline: it has "pipeline", or method "trim".
bool is_pipeline_json(const nlohmann::ordered_json& json);
// Reads {"model", evaluation fields, "pipeline": [step, ...]} or a single trim request
// ({"method": "trim", "freq_text", "keep" | "coverage", "keep_tokens"}). Job fields
// (kind, out, force, dense) are skipped. InputError("pipeline[i].<field>: ...") naming
// the step and field: an unknown method, trim not first, a second method, a field the
// step does not take.
PipelineRequest pipeline_from_json(const nlohmann::ordered_json& json);
// The request as JSON: model and evaluation fields, then "pipeline".
nlohmann::ordered_json pipeline_json(const PipelineRequest& p);
// Every check that needs no work but trim's (check_trim_options reads the files): the
// steps' fields and ranges, the method against the model's config (d, whether it applies: flat on an
// encoder), the evaluation options a trimmed chain supports. InputError naming the step's field.
void check_pipeline_request(const PipelineRequest& p, const ModelConfig& config);
// Why a second table method after the first is refused (two methods do not stack), for
// the JSON's and the CLI's messages; `store_field` names how to store the factors instead.
std::string second_method_refusal(const std::string& first, const std::string& second,
                                  const std::string& store_field);
// The JSON pointers ("/pipeline/0/freq_text") of the files a job's steps name, which the
// remote runners upload (ssh) or make absolute (Slurm) as they do job_input_fields.
std::vector<std::string> pipeline_input_pointers(const nlohmann::ordered_json& job);
// The chain's row label: "trim 0.999 → pca rank 32 → q8_0" (trim's coverage or "keep N",
// the method as describe_request words it, the store type).
std::string pipeline_label(const PipelineRequest& p);

} // namespace embedlab
