// A chain's request as JSON and its checks without weights (pipeline_request.hpp).
#include "embedlab/pipeline_request.hpp"

#include <algorithm>
#include <array>

#include "embedlab/text_format.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

namespace {

// A job's own fields (job.hpp), never a step's.
constexpr std::array<const char*, 5> kJobOnlyFields{"kind", "out", "dense", "force", "measure"};
constexpr std::array<const char*, 4> kTrimFields{"freq_text", "keep", "coverage", "keep_tokens"};
// The request's fields that stay at the top of a chain: the model and its evaluation.
constexpr std::array<const char*, 13> kChainTopFields{
    "model", "tokenizer",  "eval_text", "eval_ids",  "eval_tokens", "ctx", "stride",
    "batch", "divergence", "task",      "task_data", "task_limit",  "seed"};

template <size_t N> bool listed(const std::array<const char*, N>& names, const std::string& key)
{
    return std::find_if(names.begin(), names.end(), [&](const char* n) { return key == n; }) != names.end();
}

std::string step_name(size_t index)
{
    return "pipeline[" + std::to_string(index) + "]";
}

TrimOptions trim_from_json(const Json& step, const std::string& where)
{
    TrimOptions o;
    for (const auto& [key, value] : step.items()) {
        const std::string field = where + "." + key;
        if (key == "method")
            continue;
        if (!listed(kTrimFields, key))
            throw InputError(where + ": \"" + key +
                             "\" is not a field of trim (freq_text, keep or coverage, keep_tokens)");
        if ((key == "freq_text" || key == "keep_tokens") && !value.is_string())
            throw InputError(field + ": must be a file path (a string)");
        if (key == "keep" && !value.is_number_integer())
            throw InputError(field + ": must be an integer (the kept vocabulary's size)");
        if (key == "coverage" && !value.is_number())
            throw InputError(field + ": must be a number in (0, 1]");
        if (key == "freq_text")
            o.freq_text = value.get<std::string>();
        else if (key == "keep_tokens")
            o.keep_tokens = value.get<std::string>();
        else if (key == "keep")
            o.keep = value.get<int64_t>();
        else
            o.coverage = value.get<double>();
    }
    return o;
}

Json trim_step_json(const TrimOptions& o)
{
    Json j = {{"method", "trim"}, {"freq_text", o.freq_text.string()}};
    if (o.keep)
        j["keep"] = *o.keep;
    if (o.coverage)
        j["coverage"] = *o.coverage;
    if (!o.keep_tokens.empty())
        j["keep_tokens"] = o.keep_tokens.string();
    return j;
}

// The steps, and in `top` the fields outside them: a "pipeline" list, or a single
// trim request ({"method": "trim", its fields beside the model's}).
Json steps_of(const Json& json, Json& top)
{
    top = Json::object();
    if (!json.contains("pipeline")) {
        Json trim = {{"method", "trim"}};
        for (const auto& [key, value] : json.items())
            if (listed(kTrimFields, key))
                trim[key] = value;
            else if (key != "method" && !listed(kJobOnlyFields, key))
                top[key] = value;
        return Json::array({trim});
    }
    const Json& steps = json["pipeline"];
    if (!steps.is_array() || steps.empty())
        throw InputError("pipeline: must be a non-empty list of steps, each {\"method\": ..., its fields}");
    if (json.contains("method"))
        throw InputError("pipeline: a request with a pipeline names its methods in the steps; remove the "
                         "top-level \"method\"");
    for (const auto& [key, value] : json.items())
        if (key != "pipeline" && !listed(kJobOnlyFields, key))
            top[key] = value;
    return steps;
}

// Trim alone: the model and the evaluation trim runs (eval_text, ctx).
CompressionRequest trim_only_request(const Json& top)
{
    CompressionRequest r;
    for (const auto& [key, value] : top.items()) {
        if (key != "model" && key != "eval_text" && key != "ctx")
            throw InputError("pipeline: \"" + key +
                             "\" does not apply to trim alone (it takes model, eval_text, ctx and its own "
                             "fields freq_text, keep or coverage, keep_tokens)");
        set_request_field(r, key, value);
    }
    if (r.model.empty())
        throw InputError("pipeline: \"model\" is required");
    return r;
}

// The method step's fields joined to the top's, read as an experiment request.
CompressionRequest method_request(Json request_json, const Json& step, const std::string& where)
{
    for (const auto& [key, value] : step.items()) {
        if (key != "method" && request_json.contains(key))
            throw InputError(where + "." + key + ": given both in the step and at the top of the request");
        request_json[key] = value;
    }
    const auto& known = request_fields();
    for (const auto& [key, value] : request_json.items())
        if (std::find(known.begin(), known.end(), key) == known.end())
            throw InputError((step.contains(key) ? where + "." + key : "pipeline: \"" + key + "\"") +
                             " is not a field of a compress request");
    try {
        return request_from_json(request_json);
    } catch (const InputError& e) {
        throw InputError(where + ": " + e.what());
    }
}

} // namespace

bool is_pipeline_json(const Json& json)
{
    return json.is_object() &&
           (json.contains("pipeline") ||
            (json.contains("method") && json["method"].is_string() && json["method"] == "trim"));
}

std::string second_method_refusal(const std::string& first, const std::string& second,
                                  const std::string& store_field)
{
    std::string why = "a chain is trim, then one method: ";
    why += first;
    why += "'s output is a compressed table (its factors or codes), not a model a method takes (compress "
           "refuses an EmbedLab compressed model), and ";
    why += second;
    why += " fitted to ";
    why += first;
    why += "'s reconstruction would store only its own factors, so the two would not stack; ";
    why += store_field;
    why += " sets the stored type of ";
    why += first;
    why += "'s factors instead";
    return why;
}

PipelineRequest pipeline_from_json(const Json& json)
{
    if (!json.is_object())
        throw InputError("pipeline: the request must be a JSON object");
    Json top;
    PipelineRequest p;
    p.steps = steps_of(json, top);
    std::optional<size_t> method_step;
    for (size_t i = 0; i < p.steps.size(); ++i) {
        const Json& step = p.steps[i];
        const std::string where = step_name(i);
        if (!step.is_object() || !step.contains("method") || !step["method"].is_string())
            throw InputError(where + ".method: each step is an object naming its method (trim, " +
                             method_names() + ")");
        const std::string method = step["method"];
        if (method == "trim") {
            if (i != 0)
                throw InputError(where +
                                 ".method: trim must be the first step (it changes the vocabulary every "
                                 "later step works on)");
            p.trim = trim_from_json(step, where);
        } else if (!find_method(method)) {
            throw InputError(where + ".method: unknown method \"" + method + "\" (trim, " + method_names() +
                             ")");
        } else if (method_step) {
            throw InputError(where + ".method: " + method + " after " +
                             p.steps[*method_step]["method"].get<std::string>() + " does not apply: " +
                             second_method_refusal(p.steps[*method_step]["method"].get<std::string>(), method,
                                                   "the method's \"store\" field"));
        } else {
            method_step = i;
        }
    }
    p.request = method_step ? method_request(top, p.steps[*method_step], step_name(*method_step))
                            : trim_only_request(top);
    return p;
}

Json pipeline_json(const PipelineRequest& p)
{
    if (!p.trim)
        return request_json(p.request);
    Json top = Json::object();
    Json steps = Json::array({trim_step_json(*p.trim)});
    const Json fields = request_json(p.request);
    Json step = Json::object();
    for (const auto& [key, value] : fields.items()) {
        if (key == "method" && p.request.method.empty())
            continue;
        if (listed(kChainTopFields, key))
            top[key] = value;
        else
            step[key] = value;
    }
    if (!p.request.method.empty())
        steps.push_back(step);
    top["pipeline"] = steps;
    return top;
}

void check_pipeline_request(const PipelineRequest& p, const ModelConfig& config)
{
    if (p.request.method.empty()) {
        if (!p.trim)
            throw InputError("pipeline: no step");
        return;
    }
    const std::string where = step_name(p.trim ? 1 : 0);
    for (const auto& a : method_applicability(config))
        if (a.method == p.request.method && !a.applies)
            throw InputError(where + ".method: " + a.method + " does not apply to " + p.request.model + ": " +
                             a.reason);
    check_request(p.request, config.hidden_size, where);
    if (!p.trim)
        return;
    // Trim's evaluation measures the original on the same text, window and stride.
    const CompressionRequest& r = p.request;
    const auto refuse = [](const std::string& field, const std::string& why) {
        throw InputError("pipeline: " + field + " does not apply to a trimmed chain: " + why);
    };
    if (!r.tokenizer.empty())
        refuse("tokenizer", "trim reads and rewrites the model directory's own tokenizer");
    if (r.has_eval_ids || r.eval_tokens > 0)
        refuse(r.has_eval_ids ? "eval_ids" : "eval_tokens",
               "the original and the trimmed model tokenize eval_text each their own way");
    if (r.stride > 0 && r.stride != r.ctx)
        refuse("stride", "the original is measured with stride = ctx");
    if (r.divergence)
        refuse("divergence", "it compares two models over the same tokens; compare bits per byte");
    if (!r.task.empty())
        refuse("task", "the task's original accuracy would be the trimmed model's");
    if (config.is_encoder() && !r.eval_text.empty())
        refuse("eval_text", "an encoder has no next-token perplexity (trim alone records the share of the "
                            "text's tokens that changed)");
}

std::vector<std::string> pipeline_input_pointers(const Json& job)
{
    std::vector<std::string> pointers;
    if (!job.is_object() || !job.contains("pipeline") || !job["pipeline"].is_array())
        return pointers;
    const auto& files = request_input_fields();
    for (size_t i = 0; i < job["pipeline"].size(); ++i) {
        const Json& step = job["pipeline"][i];
        if (!step.is_object())
            continue;
        for (const auto& [key, value] : step.items())
            if ((key == "keep_tokens" || std::find(files.begin(), files.end(), key) != files.end()) &&
                value.is_string() && !value.get<std::string>().empty())
                pointers.push_back("/pipeline/" + std::to_string(i) + "/" + key);
    }
    return pointers;
}

std::string pipeline_label(const PipelineRequest& p)
{
    std::string label;
    if (p.trim)
        label = p.trim->coverage ? "trim " + short_number(*p.trim->coverage)
                                 : "trim keep " + std::to_string(p.trim->keep.value_or(0));
    if (p.request.method.empty())
        return label;
    CompressionRequest method = p.request;
    method.store.clear();
    if (!label.empty())
        label += " → ";
    label += describe_request(method);
    if (!p.request.store.empty() && p.request.store != "f32")
        label += " → " + p.request.store;
    return label;
}

} // namespace embedlab
