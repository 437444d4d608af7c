// run_compression and export_run (experiment.hpp): the one implementation of
// "fit, recover, evaluate, record, export" that every front end calls.
#include "embedlab/experiment.hpp"
#include "embedlab/table_method.hpp"
#include "embedlab/text_format.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "embedlab/compressed_model.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/finetune.hpp"
#include "embedlab/flat_llm.hpp"
#include "embedlab/lora.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/tasks.hpp"
#include "embedlab/tensor_train.hpp"
#include "embedlab/tokenizer.hpp"
#include "eval/classifier_task.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string host_name()
{
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0)
        return "localhost";
    return buf;
}

// One progress bar over the run's stages, each weighted by its usual share of the time.
class StagedProgress {
public:
    StagedProgress(ExperimentProgressFn fn, std::vector<std::pair<std::string, double>> stages)
        : fn_(std::move(fn)), stages_(std::move(stages))
    {
        for (const auto& s : stages_)
            total_ += s.second;
    }

    ProgressFn stage(const std::string& name) const
    {
        if (!fn_)
            return {};
        // The stage of that name, else the one it extends ("compress pca" is "compress"):
        // "compress positions" has a row of its own after "compress".
        size_t at = stages_.size();
        for (size_t i = 0; i < stages_.size() && at == stages_.size(); ++i)
            if (stages_[i].first == name)
                at = i;
        for (size_t i = 0; i < stages_.size() && at == stages_.size(); ++i)
            if (name.rfind(stages_[i].first + " ", 0) == 0)
                at = i;
        double before = 0, weight = 0;
        for (size_t i = 0; i < stages_.size(); ++i)
            if (i < at)
                before += stages_[i].second;
            else if (i == at)
                weight = stages_[i].second;
        return [=, this](int64_t done, int64_t total) {
            const double part = total > 0 ? std::clamp(double(done) / double(total), 0.0, 1.0) : 0.0;
            return fn_(
                {name, done, total, total_ > 0 ? std::min(1.0, (before + weight * part) / total_) : 0});
        };
    }

private:
    ExperimentProgressFn fn_;
    std::vector<std::pair<std::string, double>> stages_;
    double total_ = 0;
};

// What identifies the bytes of `path` (a file, or every file under a directory) for the
// process's caches: each file's name, size, device, inode and change time. The kernel
// sets the change time on every write, rename or link, and nothing sets it back (touch
// sets only the modification time), so a file rewritten in place, even to the same size
// and modification time, gets another key. A directory's own time is not enough: a
// file rewritten in place leaves it unchanged.
std::string file_identity(const fs::path& path)
{
    std::string key;
    const auto add = [&](const fs::path& p) {
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0)
            return;
        key += p.string() + ' ' + std::to_string(st.st_size) + ' ' + std::to_string(st.st_dev) + ' ' +
               std::to_string(st.st_ino) + ' ' + std::to_string(st.st_ctim.tv_sec) + '.' +
               std::to_string(st.st_ctim.tv_nsec) + ' ' + std::to_string(st.st_mtim.tv_sec) + '.' +
               std::to_string(st.st_mtim.tv_nsec) + '\n';
    };
    std::error_code ec;
    if (path.empty() || !fs::exists(path, ec))
        return key;
    add(path);
    if (!fs::is_directory(path, ec))
        return key;
    std::vector<fs::path> files; // sorted: the key does not depend on the listing's order
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec))
            files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
        add(f);
    return key;
}

// The bytes of a compressed table's tensors as an export writes them: the stored
// types' blocks where --store chose one, every other factor at its own width.
double written_factor_bytes(const CompressedEmbedding& c, const std::string& prefix)
{
    double bytes = 0;
    for (const auto& [name, stored] : c.stored_tensors)
        bytes += static_cast<double>(stored.numel() * static_cast<int64_t>(stored.element_size()));
    for (const auto& [name, t] : embedding_factor_tensors(*c.embedding, prefix))
        if (!c.stored_types.contains(name))
            bytes += static_cast<double>(t.numel() * static_cast<int64_t>(t.element_size()));
    return bytes;
}

// Original-model perplexities by model, ids and protocol, for the process.
std::mutex baseline_mutex;
std::map<std::string, PerplexityResult> baselines;

std::string baseline_key(const CompressionRequest& r, const std::vector<int32_t>& ids,
                         const PerplexityOptions& o)
{
    std::error_code ec;
    const auto model = fs::weakly_canonical(r.model, ec);
    const std::string_view bytes(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t));
    return model.string() + "\n" + file_identity(model) + "\n" + r.tokenizer + "\n" +
           file_identity(r.tokenizer) + "\n" + std::to_string(std::hash<std::string_view>{}(bytes)) + "\n" +
           std::to_string(ids.size()) + "\n" + std::to_string(o.ctx) + "/" + std::to_string(o.stride) + "/" +
           std::to_string(o.batch_windows);
}

PerplexityResult original_perplexity(const CompressionRequest& r, const LanguageModel& model,
                                     const std::vector<int32_t>& ids, const PerplexityOptions& o,
                                     const ProgressFn& progress)
{
    const std::string key = baseline_key(r, ids, o);
    {
        std::lock_guard lock(baseline_mutex);
        if (auto it = baselines.find(key); it != baselines.end()) {
            report_progress(progress, 1, 1);
            return it->second;
        }
    }
    const auto result = evaluate_perplexity(model, ids, o, progress); // unlocked: a cancel caches nothing
    std::lock_guard lock(baseline_mutex);
    baselines[key] = result;
    return result;
}

bool baseline_cached(const CompressionRequest& r, const std::vector<int32_t>& ids, const PerplexityOptions& o)
{
    const std::string key = baseline_key(r, ids, o);
    std::lock_guard lock(baseline_mutex);
    return baselines.count(key) > 0;
}

// The original model's zero-shot task results by model, task, file and limit, for the process.
std::mutex task_mutex;
std::map<std::string, TaskResult> original_tasks;

std::string task_key(const CompressionRequest& r)
{
    std::error_code ec;
    const auto model = fs::weakly_canonical(r.model, ec), data = fs::weakly_canonical(r.task_data, ec);
    return model.string() + "\n" + file_identity(model) + "\n" + r.tokenizer + "\n" +
           file_identity(r.tokenizer) + "\n" + r.task + "\n" + data.string() + "\n" + file_identity(data) +
           "\n" + std::to_string(r.task_limit);
}

bool task_cached(const CompressionRequest& r)
{
    std::lock_guard lock(task_mutex);
    return original_tasks.count(task_key(r)) > 0;
}

TaskResult original_task(const CompressionRequest& r, const LanguageModel& model, const Tokenizer& tokenizer,
                         const TaskData& data, const ProgressFn& progress)
{
    const std::string key = task_key(r);
    {
        std::lock_guard lock(task_mutex);
        if (auto it = original_tasks.find(key); it != original_tasks.end()) {
            report_progress(progress, 1, 1);
            return it->second;
        }
    }
    auto result = evaluate_task(model, tokenizer, data, progress); // unlocked: a cancel caches nothing
    std::lock_guard lock(task_mutex);
    original_tasks[key] = result;
    return result;
}

// The manifest's evaluation.task block: the compressed model's accuracy and the original's,
// with GLUE's own metric where the task has one (cola mcc, mrpc and qqp f1).
Json task_record(const CompressionRequest& r, const TaskResult& compressed, const TaskResult& original)
{
    Json j = {{"name", r.task},
              {"data", fs::absolute(r.task_data).lexically_normal().string()},
              {"limit", r.task_limit},
              {"n", compressed.n},
              {"accuracy", compressed.accuracy},
              {"accuracy_norm", compressed.accuracy_norm},
              {"original", {{"accuracy", original.accuracy}, {"accuracy_norm", original.accuracy_norm}}},
              {"choice_agreement", choice_agreement(compressed, original)},
              {"metric", detail::headline_metric(compressed)},
              {"metric_value", detail::headline_value(compressed)},
              {"seconds", compressed.seconds}};
    for (const auto& [name, a, b] :
         {std::tuple{"mcc", compressed.mcc, original.mcc}, std::tuple{"f1", compressed.f1, original.f1}})
        if (!std::isnan(a)) {
            j[name] = a;
            j["original"][name] = b;
        }
    j["original"]["metric_value"] = detail::headline_value(original);
    return j;
}

// Tokens the task reads (every choice is scored on its own): about 4 characters a token.
double task_tokens(const TaskData& data)
{
    double chars = 0;
    for (const auto& e : data.examples)
        for (const auto& c : e.continuations)
            chars += double(e.context.size() + c.size());
    return chars / 4;
}

bool same_file(const std::string& a, const std::string& b)
{
    std::error_code ea, eb;
    const auto ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
    return !ea && !eb && ca == cb;
}

Json text_json(const std::string& path, size_t tokens)
{
    return {{"path", fs::absolute(path).lexically_normal().string()},
            {"sha256", sha256_file(path)},
            {"tokens", tokens}};
}

// The evaluation the request asks for: its ids, the protocol, and where they came from.
struct EvalInput {
    std::vector<int32_t> ids;
    PerplexityOptions options;
    int64_t text_ids = 0; // ids in the whole text (before eval_tokens)
};

EvalInput eval_input(const CompressionRequest& r, const LoadedModel& lm)
{
    EvalInput e;
    const auto& model = *lm.model;
    if (!r.eval_text.empty()) {
        e.ids = lm.tokenizer->encode(read_text_file(r.eval_text));
    } else {
        e.ids = r.eval_ids;
        const int64_t V = model.config().vocab_size;
        for (int32_t id : e.ids)
            if (id >= V)
                throw InputError(r.model + ": eval_ids holds id " + std::to_string(id) +
                                 ", beyond the vocabulary (V = " + std::to_string(V) + ")");
    }
    e.text_ids = static_cast<int64_t>(e.ids.size());
    if (r.eval_tokens > 0 && e.text_ids > r.eval_tokens)
        e.ids.resize(static_cast<size_t>(r.eval_tokens));
    const std::string source = r.eval_text.empty() ? "eval_ids" : r.eval_text;
    if (e.ids.size() < 2)
        throw InputError(source + ": the evaluation has " + std::to_string(e.ids.size()) +
                         " token(s); perplexity needs at least 2");
    const int64_t context = model.max_context();
    e.options.ctx = r.ctx > 0 ? r.ctx : std::min<int64_t>(128, context);
    if (e.options.ctx > context)
        throw InputError(r.model + ": ctx " + std::to_string(e.options.ctx) +
                         " is beyond the model's context (" + std::to_string(context) + ")");
    e.options.stride = r.stride > 0 ? r.stride : e.options.ctx;
    if (e.options.stride > e.options.ctx)
        throw InputError("stride " + std::to_string(e.options.stride) + " is larger than ctx " +
                         std::to_string(e.options.ctx));
    e.options.batch_windows = r.batch;
    return e;
}

// The manifest's per-model figures (a subset of perplexity_json, as always written).
Json evaluated_json(const PerplexityResult& r)
{
    Json j = {{"ppl", r.ppl},
              {"nll_per_token", r.nll_per_token},
              {"seconds", r.seconds},
              {"tokens_per_second", r.tokens_per_second}};
    if (r.scored_bytes > 0)
        j["bits_per_byte"] = r.bits_per_byte;
    return j;
}

// The manifest's evaluation block (METHODS 0), as `compress --eval-text` has always written it.
Json evaluation_json(const CompressionRequest& r, const EvalInput& e, const PerplexityResult& baseline,
                     const PerplexityResult& compressed)
{
    Json j;
    if (!r.eval_text.empty()) {
        j["text"] = fs::absolute(r.eval_text).lexically_normal().string();
        j["text_sha256"] = sha256_file(r.eval_text);
    } else {
        j["ids"] = "eval_ids of the request";
    }
    if (static_cast<int64_t>(e.ids.size()) < e.text_ids)
        j["first_ids"] = e.ids.size(); // eval_tokens cut the text
    j["tokens"] = compressed.tokens;
    if (compressed.scored_bytes > 0)
        j["scored_bytes"] = compressed.scored_bytes;
    j["ctx"] = compressed.ctx;
    j["stride"] = compressed.stride;
    j["baseline"] = evaluated_json(baseline);
    j["compressed"] = evaluated_json(compressed);
    j["delta_ln_ppl"] = std::log(compressed.ppl) - std::log(baseline.ppl); // TensorSLM eq. 12
    j["protocol"] = "METHODS.md section 0";
    return j;
}

CompressionSpec embedding_spec(const CompressionRequest& r, const MethodDescriptor& m, const LoadedModel& lm,
                               std::shared_ptr<const FrequencySplit> split)
{
    CompressionSpec spec = table_spec(r, lm.model->config().embedding_dim());
    spec.split = std::move(split);
    spec.unk_id = m.needs_frequency_text && lm.tokenizer ? lm.tokenizer->unk_id().value_or(-1) : -1;
    return spec;
}

std::string embedding_parameters(const CompressedEmbedding& c, const MethodDescriptor& m)
{
    return table_method(m.name).parameters(c.spec) + (c.spec.store.empty() ? "" : ", stored " + c.spec.store);
}

// LoRA recovery (METHODS 1): the ids to train on, never one the run is evaluated on.
struct Training {
    std::vector<int32_t> ids;
    int64_t first_id = 0; // ids[0] is the text's id number first_id
    TrainOptions options;
};

Training recovery_training(const CompressionRequest& r, const LoadedModel& lm, int64_t evaluated_ids)
{
    Training t;
    t.ids = lm.tokenizer->encode(read_text_file(r.train_text));
    t.options = {.steps = r.lora_steps,
                 .lr = 1e-3,
                 .batch = 8,
                 .seqlen = std::min<int64_t>(128, lm.model->max_context()),
                 .seed = r.seed};
    const int64_t need = t.options.batch * t.options.seqlen + 1;
    if (!r.eval_text.empty() && same_file(r.train_text, r.eval_text)) {
        const int64_t total = static_cast<int64_t>(t.ids.size());
        t.first_id = std::min(evaluated_ids, total);
        if (total - t.first_id < need)
            throw InputError(r.train_text + ": is also the evaluation text, and after its " +
                             std::to_string(t.first_id) + " evaluated ids only " +
                             std::to_string(total - t.first_id) + " of its " + std::to_string(total) +
                             " ids are left for LoRA training (one batch needs " + std::to_string(need) +
                             "); lower eval_tokens or choose another training text");
        t.ids.erase(t.ids.begin(), t.ids.begin() + t.first_id);
    }
    check_train_options(t.options, static_cast<int64_t>(t.ids.size()), lm.model->max_context(), r.train_text);
    return t;
}

Json recover(CompressionRun& run, const Training& t, const ProgressFn& progress)
{
    const auto& r = run.request;
    auto& model = *run.model.model;
    const LoraOptions lora{
        .rank = r.lora_rank, .alpha = 2.0 * static_cast<double>(r.lora_rank), .seed = r.seed};
    // A fourier table trains its own MLP (PETE keeps no per-token parameters), as
    // finetune does; every other table gets its factors or row adapter trained.
    const bool fourier_mlp = method_descriptor(r.method).id == Method::Fourier;
    const Trainable trainable = fourier_mlp ? prepare_fourier_mlp_recovery(model, lora)
                                            : prepare_recovery(model, lora, /*from_scratch=*/false);
    const auto result = train_next_token(
        model, trainable.params, t.ids, t.options,
        [&](const TrainStep& s) { return !progress || progress(s.step, s.steps); }, r.train_text);
    Json record = {{"mode", trainable.description["mode"]},
                   {"method", model.token_embedding().kind()},
                   {"trains", trainable.description["trains"]},
                   {"frozen", trainable.description["frozen"]},
                   {"lora", trainable.description["lora"]},
                   {"training", training_json(result, r.train_text, sha256_file(r.train_text), t.ids.size())},
                   {"by", "EmbedLab experiment API (LoRA recovery of a compressed embedding)"}};
    record["training"]["ids_from"] = t.first_id; // the evaluated ids come before
    if (fourier_mlp)                             // the trained MLP is the table an export writes
        run.embedding->embedding = model.shared_token_embedding();
    return record;
}

} // namespace

std::vector<int64_t> special_token_ids(const Tokenizer& tokenizer)
{
    std::vector<int64_t> out;
    for (int64_t id = 0; id < tokenizer.vocab_size(); ++id)
        if (tokenizer.is_special(static_cast<int32_t>(id)))
            out.push_back(id);
    return out;
}

FrequencyText read_frequency_text(const fs::path& file, const Tokenizer& tokenizer, int64_t vocab_size,
                                  double keep_ratio)
{
    FrequencyText f;
    f.path = file;
    const auto ids = tokenizer.encode(read_text_file(file));
    if (ids.empty())
        throw InputError(file.string() + ": the frequency text has no tokens");
    f.sha256 = sha256_file(file);
    // A text in another script than the vocabulary tokenizes to unknown tokens.
    if (const auto unk = tokenizer.unk_id()) {
        const auto unknown = std::count(ids.begin(), ids.end(), *unk);
        if (2 * unknown > static_cast<int64_t>(ids.size()))
            throw InputError(file.string() + ": " + std::to_string(unknown) + " of its " +
                             std::to_string(ids.size()) +
                             " tokens are the unknown token; is the text in the vocabulary's script?");
    }
    try {
        f.split = std::make_shared<FrequencySplit>(
            split_by_frequency(ids, vocab_size, keep_ratio, special_token_ids(tokenizer)));
    } catch (const InputError& e) {
        throw InputError(file.string() + ": " + e.what());
    }
    return f;
}

Json FrequencyText::json() const
{
    return {{"path", fs::absolute(path).lexically_normal().string()},
            {"sha256", sha256},
            {"tokens", split->total_tokens},
            {"distinct_seen", split->distinct_seen},
            {"keep_ratio", split->keep_ratio},
            {"common", split->common.size()},
            {"rare", split->rare.size()}};
}

const LanguageModel& CompressionRun::compressed_model() const
{
    return flat ? *flat->model : *model.model;
}

LoadOptions request_load_options(const CompressionRequest& request)
{
    const MethodDescriptor& m = method_descriptor(request.method);
    LoadOptions load;
    if (!request.tokenizer.empty())
        load.tokenizer = request.tokenizer;
    load.need_tokenizer = !request.eval_text.empty() || m.needs_frequency_text || m.needs_calibration_text ||
                          request.lora_rank > 0 || !request.task.empty();
    return load;
}

// The run's stages weighted by their estimated floating-point work, so one progress
// bar tracks the work (a cached baseline weighs nothing; LoRA training dwarfs a pca
// fit). Estimates, not measurements: the bar's pace, never a reported number.
std::vector<std::pair<std::string, double>> stage_costs(const CompressionRequest& r,
                                                        const MethodDescriptor& m, const ModelConfig& c,
                                                        const EvalInput* eval, const TrainOptions* train,
                                                        const CalibrationOptions& calib,
                                                        double task_tokens = 0)
{
    const double v = double(c.vocab_size), d = double(c.hidden_size), layers = double(c.num_layers);
    const double body = 2 * layers * (4 * d * d + 3 * d * double(c.intermediate_size)); // per position
    const double per_token = body + 2 * v * d;                                          // + the head
    const double tokens = eval ? double(eval->ids.size()) : 0;
    double compress = 0;
    if (m.part == CompressedPart::TokenEmbedding) {
        compress = table_method(m.name).fit_work(r, v, d);
    } else {                               // flat
        compress = 8 * layers * d * d * d; // per-head eigendecompositions, absorbed products
        if (calib.mlp) { // MLP covariances beyond the budget: a pass (to its group's last layer) per group
            const double f = double(c.intermediate_size), bytes = layers * f * f * 8;
            if (bytes > double(calib.mlp_covariance_budget))
                compress += std::ceil(bytes / double(calib.mlp_covariance_budget)) * 0.5 *
                            double(calib.samples) * double(calib.seqlen) * body;
        }
    }
    std::vector<std::pair<std::string, double>> stages{{"load", 0}};
    if (m.part == CompressedPart::AttentionValues)
        stages.emplace_back("calibrate", double(calib.samples) * double(calib.seqlen) * per_token);
    if (eval)
        stages.emplace_back("eval original",
                            baseline_cached(r, eval->ids, eval->options) ? 0 : tokens * per_token);
    if (!r.task.empty())
        stages.emplace_back("task original", task_cached(r) ? 0 : task_tokens * per_token);
    stages.emplace_back("compress", compress);
    if (r.positions)
        stages.emplace_back("compress positions", 2 * double(c.max_positions) * d * d);
    if (train)
        stages.emplace_back("train", 3 * double(train->steps) * double(train->batch) * double(train->seqlen) *
                                         per_token);
    if (eval)
        stages.emplace_back("eval compressed", tokens * per_token);
    if (r.divergence)
        stages.emplace_back("divergence", 2 * tokens * per_token); // both models again, window by window
    if (!r.task.empty())
        stages.emplace_back("task", task_tokens * per_token);
    double total = 0;
    for (const auto& st : stages)
        total += st.second;
    for (auto& st : stages) // a stage that runs is never invisible
        if (st.first != "load" &&
            !((st.first == "eval original" || st.first == "task original") && st.second == 0))
            st.second = std::max(st.second, 0.01 * total);
    return stages;
}

CompressionRun run_compression(const CompressionRequest& request, const ExperimentProgressFn& progress)
{
    check_request(request);
    if (progress && !progress({"load", 0, 1, 0}))
        throw Cancelled();
    return run_compression(request, load_model(request.model, request_load_options(request)), progress);
}

namespace {

// What a run reads before its long steps, so a bad text fails in a second.
struct RunInputs {
    std::optional<FrequencyText> freq;          // lle family
    std::vector<std::string> coverage_examples; // lle: coverage_data's examples
    std::optional<EvalInput> eval;
    std::optional<TaskData> task;
    std::optional<Training> training; // LoRA recovery
    std::vector<int32_t> calib_ids;   // flat
    CalibrationOptions calib_options;
    double flat_remaining = 0; // flat: remaining, or what target_ratio asks for
};

// The request against the loaded model: what its files and architecture allow.
void check_against_model(const CompressionRequest& request, const MethodDescriptor& m, const LoadedModel& lm)
{
    if (request_load_options(request).need_tokenizer && !lm.tokenizer)
        throw InputError(request.model + ": " + request.method +
                         " with these inputs needs the model's tokenizer");
    const auto& config = lm.model->config();
    if (!lm.files.embedlab_manifest.empty())
        throw InputError(request.model +
                         ": is already an EmbedLab compressed model; compress the original model");
    check_request(request, config.embedding_dim(), request.model);
    if (request.positions && config.arch != Architecture::GPT2)
        throw InputError(request.model + ": positions: " + architecture_name(config.arch) +
                         " models have no learned position table");
    if (m.part == CompressedPart::AttentionValues && !config.value_head_dims.empty())
        throw InputError(request.model + ": is already FLAT-compressed; use the original model");
}

// flat's calibration windows and its remaining ratio, checked against the model.
void read_calibration(const CompressionRequest& request, const LoadedModel& lm, RunInputs& in)
{
    const auto& model = *lm.model;
    in.flat_remaining = request.remaining;
    if (request.target_ratio > 0) {
        try {
            in.flat_remaining =
                remaining_for_target(model.config(), request.target_ratio, request_compresses_mlp(request));
        } catch (const InputError& e) {
            throw InputError(request.model + ": " + e.what());
        }
    }
    in.calib_ids = lm.tokenizer->encode(read_text_file(request.calib_text));
    if (in.calib_ids.empty())
        throw InputError(request.calib_text + ": the calibration text has no tokens");
    const int64_t context = calibration_context(model);
    in.calib_options = {.samples = request.samples,
                        .seqlen = request.seqlen > 0 ? request.seqlen : std::min<int64_t>(256, context),
                        .seed = request.seed,
                        // Sequential calibration sums the MLP covariances itself, layer by layer.
                        .mlp = request_compresses_mlp(request) && request.calibration == "parallel"};
    if (in.calib_options.seqlen > context)
        throw InputError(request.calib_text + ": calibration seqlen " +
                         std::to_string(in.calib_options.seqlen) + " is beyond the model's context (" +
                         std::to_string(context) + ")");
    try {
        calibration_window_starts(static_cast<int64_t>(in.calib_ids.size()), in.calib_options.samples,
                                  in.calib_options.seqlen, in.calib_options.seed);
    } catch (const InputError& e) {
        throw InputError(request.calib_text + ": " + e.what());
    }
}

RunInputs read_run_inputs(const CompressionRequest& request, const MethodDescriptor& m, const LoadedModel& lm)
{
    RunInputs in;
    if (m.needs_frequency_text)
        in.freq = read_frequency_text(request.freq_text, *lm.tokenizer, lm.model->config().vocab_size,
                                      request.keep_ratio);
    if (!request.coverage_data.empty())
        in.coverage_examples = task_texts(request.coverage_task, request.coverage_data);
    if (request.evaluates())
        in.eval = eval_input(request, lm);
    if (!request.task.empty())
        in.task = read_task_data(request.task, request.task_data, {.limit = request.task_limit});
    if (request.lora_rank > 0)
        in.training = recovery_training(request, lm, in.eval ? static_cast<int64_t>(in.eval->ids.size()) : 0);
    if (m.part == CompressedPart::AttentionValues)
        read_calibration(request, lm, in);
    return in;
}

// flat's words for its settings: "target 0.5, remaining 0.41, iprs, mlp, ranks 3,5,..".
std::string flat_parameters(const CompressionRequest& request, const FlatOptions& options,
                            const FlatResult& flat)
{
    std::string ranks;
    for (const auto& layer : flat.layers) { // piece by piece: GCC 12's -Wrestrict misfires on "," + string
        if (!ranks.empty())
            ranks += ',';
        ranks += std::to_string(layer.rank);
    }
    return (request.target_ratio > 0 ? "target " + short_number(request.target_ratio) + ", " : "") +
           "remaining " + short_number(options.remaining) + ", " + rank_allocation_name(options.allocation) +
           (options.mlp ? ", mlp" : "") +
           (options.calibration == FlatCalibration::Parallel ? ", parallel calibration" : "") +
           (options.calibration == FlatCalibration::Sequential && options.mlp &&
                    options.mlp_calibration == FlatMlpCalibration::AfterAttention
                ? ", mlp calibration after attention"
                : "") +
           ", ranks " + ranks;
}

// FLAT-LLM: the narrowed model and the part it compressed (METHODS 0: V and O, and the
// MLPs when narrowed), in values and in bytes.
void fit_flat(CompressionRun& run, const CompressionRequest& request, const RunInputs& in,
              const StagedProgress& bar)
{
    const auto& model = *run.model.model;
    FlatOptions options;
    options.remaining = in.flat_remaining;
    options.target_ratio = request.target_ratio;
    options.allocation = parse_rank_allocation(request.allocation);
    options.mlp = request_compresses_mlp(request);
    options.mlp_lambda = request.mlp_lambda;
    options.calibration = parse_flat_calibration(request.calibration);
    options.mlp_calibration = parse_flat_mlp_calibration(request.mlp_calibration);
    report_progress(bar.stage("compress"), 0, 1);
    run.flat =
        std::make_shared<FlatResult>(flat_compress(model, *run.calibration, options, bar.stage("compress")));
    report_progress(bar.stage("compress"), 1, 1);
    RunSummary& s = run.summary;
    s.parameters = flat_parameters(request, options, *run.flat);
    s.params_before = flat_compressed_params(model, options.mlp);
    s.params_after = flat_compressed_params(*run.flat->model, options.mlp);
    s.part = options.mlp ? "attention_values_and_mlp" : "attention_values";
    // In bytes too (issue 38): the part as a Hugging Face source of one dtype stores it,
    // and as the export writes the narrowed tensors (at the width the model holds them).
    if (const double bits = run.model.files.format == ModelFormat::HuggingFace
                                ? stored_bits_per_value(run.model.files.stored_dtype)
                                : 0.0;
        bits > 0) {
        const auto value_bytes =
            static_cast<double>(run.flat->model->weights().begin()->second.element_size());
        s.bytes_before = static_cast<double>(s.params_before) * bits / 8;
        s.bytes_after = static_cast<double>(s.params_after) * value_bytes;
    }
    s.mean_cosine = kNaN; // the embedding is untouched: no rows to compare
}

// --store (issue 38): the factors as the directory will hold them, evaluated so.
std::optional<StoredFactorBytes> store_run_factors(CompressionRun& run, const CompressionSpec& spec,
                                                   const torch::Tensor& table)
{
    if (spec.store.empty())
        return std::nullopt;
    const auto& config = run.model.model->config();
    auto stored = store_factors(*run.embedding, config);
    auto& c = *run.embedding;
    c.reconstruction = measure_reconstruction(table, *c.embedding);
    c.fit["stored"] = {{"type", spec.store},
                       {"tensors", c.stored_types},
                       {"note", "the fit's own figures are of the float32 factors; reconstruction is of "
                                "the stored ones, read back"}};
    if (run.positions)
        store_factors(*run.positions, config, /*positions=*/true);
    return stored;
}

// The table's accounting in the model's context: the tied head, the energy model, the
// input's storage and the stored bytes, positions in eta_emb (issue 20).
void account_table(CompressionRun& run, const CompressionRequest& request,
                   const std::optional<StoredFactorBytes>& stored)
{
    const auto& model = *run.model.model;
    const auto breakdown = model.parameter_breakdown();
    auto& accounting = run.embedding->accounting;
    apply_model_context(accounting, model.config().tied_embeddings, breakdown.position_embedding);
    apply_energy(accounting, request_energy(request));
    // Factors are float32; quant's values take its type's bits (the fit records them).
    apply_storage(accounting, token_embedding_stored_type(run.model.files),
                  accounting.bits_per_value_after > 0 ? accounting.bits_per_value_after : 32);
    if (stored && accounting.bits_per_value_before > 0) { // the stored tensors' own bytes
        const int64_t values = accounting.params_after - accounting.index_values;
        accounting.bits_per_value_after = values > 0 ? 8.0 * static_cast<double>(stored->values) / values : 0;
        accounting.index_bytes = stored->ids;
        accounting.bytes_after = static_cast<double>(stored->values + stored->ids);
        accounting.bytes_ratio = accounting.bytes_after / accounting.bytes_before;
    }
    if (run.positions) {
        const auto& p = run.positions->accounting;
        accounting.eta_emb_with_positions =
            static_cast<double>(accounting.params_before - accounting.params_after + p.params_before -
                                p.params_after) /
            static_cast<double>(accounting.params_before + p.params_before);
    }
}

// The lle family's records: the frequency text and V_C's coverage of a dataset.
void record_frequency_text(CompressionRun& run, const CompressionRequest& request, const RunInputs& in)
{
    if (!in.freq)
        return;
    run.extra["frequency_text"] = in.freq->json();
    if (request.coverage_data.empty())
        return;
    const auto cov = coverage_of_examples(*in.freq->split, *run.model.tokenizer, in.coverage_examples);
    run.extra["example_coverage"] = {{"task", request.coverage_task},
                                     {"data", request.coverage_data},
                                     {"examples", cov.examples},
                                     {"tokens", cov.tokens},
                                     {"token_coverage", cov.token_coverage},
                                     {"example_coverage", cov.example_coverage}};
}

// LoRA recovery (METHODS 1) of the compressed table, counted in the summary.
void recover_table(CompressionRun& run, const CompressionRequest& request, const Training& training,
                   const torch::Tensor& table, const StagedProgress& bar)
{
    const auto& model = *run.model.model;
    RunSummary& s = run.summary;
    run.recovery = recover(run, training, bar.stage("train"));
    s.parameters += " + LoRA r " + std::to_string(request.lora_rank) + ", " +
                    std::to_string(request.lora_steps) + " steps";
    // METHODS 0: unmerged adapters are stored values (an export keeps them beside the table).
    s.params_after += model.parameter_breakdown().adapters;
    s.bytes_after += 4.0 * static_cast<double>(model.parameter_breakdown().adapters); // float32
    // Issue 20 item 3: the recorded reconstruction is the recovered table's (with dZ, dP);
    // the fit's spectrum describes the original table and the start of training.
    auto& c = *run.embedding;
    c.fit["before_recovery"] = {
        {"reconstruction", reconstruction_json(c.reconstruction)},
        {"note", "reconstruction of the table before LoRA recovery; the eigenvalues and explained "
                 "variance here are the original table's and the fit's before training"}};
    c.reconstruction = measure_reconstruction(table, model.token_embedding());
    s.mean_cosine = c.reconstruction.mean_cosine;
}

// A table method: fit, store, account, put into the model (the original kept in
// `original` for the divergence), recover; the summary's part of it.
void fit_table(CompressionRun& run, const CompressionRequest& request, const MethodDescriptor& m,
               const RunInputs& in, const StagedProgress& bar, std::unique_ptr<LanguageModel>& original)
{
    auto& model = *run.model.model;
    const auto* dense = dense_table(&model.token_embedding());
    if (!dense)
        throw InputError(request.model + ": the token embedding is not a dense table (" +
                         model.token_embedding().kind() + "); use the original model");
    const torch::Tensor table = *dense; // a handle: the model drops its table next
    const CompressionSpec spec = embedding_spec(request, m, run.model, in.freq ? in.freq->split : nullptr);
    run.embedding = compress_table(table, spec, model.parameter_breakdown().total(),
                                   bar.stage("compress " + spec.method));
    if (request.positions)
        run.positions =
            compress_table(model.weights().at("wpe.weight"), spec, 0, bar.stage("compress positions"));
    account_table(run, request, store_run_factors(run, spec, table));
    if (request.divergence)
        original =
            std::make_unique<LanguageModel>(model.config(), model.weights(), model.shared_token_embedding(),
                                            "the original", model.shared_position_embedding());
    model.set_token_embedding(run.embedding->embedding);
    if (!in.training) // the dense table is freed at the end of this call (LoRA measures against it)
        model.drop_dense_token_table();
    if (run.positions)
        model.set_position_embedding(run.positions->embedding);
    record_frequency_text(run, request, in);
    RunSummary& s = run.summary;
    s.parameters = embedding_parameters(*run.embedding, m) + (run.positions ? " + positions" : "");
    s.params_before = run.embedding->accounting.params_before;
    s.params_after = run.embedding->accounting.params_after;
    if (const auto& a = run.embedding->accounting; a.bytes_after > 0)
        s.bytes_before = a.bytes_before, s.bytes_after = a.bytes_after;
    s.mean_cosine = run.embedding->reconstruction.mean_cosine;
    if (in.training)
        recover_table(run, request, *in.training, table, bar);
}

// The whole model as stored (issue 38): a Hugging Face input of one dtype, its
// compressed part's bytes replaced.
void record_model_bytes(CompressionRun& run, int64_t model_params_before)
{
    RunSummary& s = run.summary;
    const double bits = run.model.files.format == ModelFormat::HuggingFace
                            ? stored_bits_per_value(run.model.files.stored_dtype)
                            : 0.0;
    if (!(bits > 0 && std::isfinite(s.bytes_before) && std::isfinite(s.bytes_after)))
        return;
    s.model_bytes_before = static_cast<double>(model_params_before) * bits / 8;
    // A table method's export keeps the other weights at the input's dtype; flat's
    // writes every weight at the width the narrowed model holds them.
    s.model_bytes_after = run.flat
                              ? static_cast<double>(run.flat->model->parameter_breakdown().total() *
                                                    run.flat->model->weights().begin()->second.element_size())
                              : s.model_bytes_before - s.bytes_before + s.bytes_after;
    // gpt2's --positions: the export writes the position table's factors in place of
    // wpe.weight, so its bytes are replaced too (issue 62 item 5).
    if (run.positions && !run.flat) {
        const auto& config = run.model.model->config();
        s.model_bytes_after += written_factor_bytes(*run.positions, "wpe.") -
                               static_cast<double>(config.max_positions * config.hidden_size) * bits / 8;
    }
}

// The compressed model's perplexity (and bits per byte, divergence) against the original's.
void evaluate_run(CompressionRun& run, const CompressionRequest& request, const RunInputs& in,
                  PerplexityResult baseline, const LanguageModel& reference, const StagedProgress& bar)
{
    const EvalInput& eval = *in.eval;
    auto compressed =
        evaluate_perplexity(run.compressed_model(), eval.ids, eval.options, bar.stage("eval compressed"));
    if (run.model.tokenizer) { // bits per byte: comparable across tokenizations (issue 60)
        add_bits_per_byte(baseline, eval.ids, *run.model.tokenizer);
        add_bits_per_byte(compressed, eval.ids, *run.model.tokenizer);
    }
    run.evaluation = evaluation_json(request, eval, baseline, compressed);
    if (in.freq && !request.eval_text.empty()) {
        const auto cov =
            coverage_of(*in.freq->split, *run.model.tokenizer, read_text_file(request.eval_text));
        run.evaluation["coverage"] = {{"token_coverage", cov.token_coverage},
                                      {"line_coverage", cov.line_coverage},
                                      {"tokens", cov.tokens},
                                      {"lines", cov.lines}};
    }
    RunSummary& s = run.summary;
    s.ppl_original = baseline.ppl;
    s.ppl = compressed.ppl;
    s.delta_ln_ppl = std::log(compressed.ppl) - std::log(baseline.ppl);
    // TensorSLM Fig. 2a's trade-off: perplexity cost per share of the table removed.
    if (run.embedding && run.embedding->accounting.eta_emb > 0)
        run.evaluation["delta_ln_ppl_per_eta_emb"] = s.delta_ln_ppl / run.embedding->accounting.eta_emb;
    s.eval_tokens = compressed.tokens;
    s.bits_per_byte = compressed.bits_per_byte;
    s.bits_per_byte_original = baseline.bits_per_byte;
    if (!request.divergence)
        return;
    const auto d = evaluate_divergence(run.compressed_model(), reference, eval.ids, eval.options,
                                       bar.stage("divergence"));
    run.evaluation["divergence"] = divergence_json(d);
    run.evaluation["divergence"]["tokens"] = d.tokens;
    s.kl_mean = d.kl_mean;
    s.top1_agreement = d.top1_agreement;
    s.window_kl = d.window_kl_mean;
    s.window_top1 = d.window_top1;
}

// The zero-shot task on the compressed model, beside the original's on the same examples.
void run_task(CompressionRun& run, const CompressionRequest& request, const TaskData& task,
              const TaskResult& original, const StagedProgress& bar)
{
    const auto result = evaluate_task(run.compressed_model(), *run.model.tokenizer, task, bar.stage("task"));
    if (run.evaluation.is_null())
        run.evaluation = Json::object();
    run.evaluation["task"] = task_record(request, result, original);
    RunSummary& s = run.summary;
    s.task = request.task;
    s.task_accuracy = result.accuracy;
    s.task_accuracy_original = original.accuracy;
    s.task_n = result.n;
}

} // namespace

// Check, read the inputs, measure the original, fit, account, evaluate, record.
CompressionRun run_compression(const CompressionRequest& request, LoadedModel loaded,
                               const ExperimentProgressFn& progress)
{
    const auto start = std::chrono::steady_clock::now();
    check_request(request);
    const MethodDescriptor& m = method_descriptor(request.method);
    const bool is_flat = m.part == CompressedPart::AttentionValues;
    // Loaded: the stages' weights (below) need the inputs, read first.
    if (progress && !progress({"load", 1, 1, 0.0}))
        throw Cancelled();
    CompressionRun run;
    run.request = request;
    run.model = std::move(loaded);
    check_against_model(request, m, run.model);
    const RunInputs in = read_run_inputs(request, m, run.model);
    auto& model = *run.model.model;
    const StagedProgress bar(progress, stage_costs(request, m, model.config(), in.eval ? &*in.eval : nullptr,
                                                   in.training ? &in.training->options : nullptr,
                                                   in.calib_options, in.task ? task_tokens(*in.task) : 0));
    RunSummary& s = run.summary;
    s.method = m.name;
    s.part = is_flat ? "attention_values" : "token_embedding";
    s.host = host_name();
    s.model = request.model;
    s.eval_text = !request.eval_text.empty() ? request.eval_text : request.has_eval_ids ? "eval_ids" : "";
    s.ppl_original = s.ppl = s.delta_ln_ppl = kNaN;

    if (is_flat) {
        run.calibration = std::make_shared<Calibration>(
            calibrate(model, in.calib_ids, in.calib_options, bar.stage("calibrate")));
        run.extra["calibration_text"] = text_json(request.calib_text, in.calib_ids.size());
    }
    std::optional<PerplexityResult> baseline;
    if (in.eval)
        baseline =
            original_perplexity(request, model, in.eval->ids, in.eval->options, bar.stage("eval original"));
    std::optional<TaskResult> task_original; // before the compressed part replaces the original's
    if (in.task)
        task_original =
            original_task(request, model, *run.model.tokenizer, *in.task, bar.stage("task original"));

    std::unique_ptr<LanguageModel> original; // for the divergence (its weights are shared handles)
    const int64_t model_params_before = model.parameter_breakdown().total();
    if (is_flat)
        fit_flat(run, request, in, bar);
    else
        fit_table(run, request, m, in, bar, original);
    s.ratio = static_cast<double>(s.params_after) / static_cast<double>(s.params_before);
    record_model_bytes(run, model_params_before);
    if (baseline) // flat leaves `model` as it was: the reference
        evaluate_run(run, request, in, *baseline, original ? *original : model, bar);
    if (in.task)
        run_task(run, request, *in.task, *task_original, bar);
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return run;
}

Json run_json(const CompressionRun& run)
{
    Json j = {{"format", "embedlab-run"}, {"request", request_json(run.request)}};
    j["request"].erase("eval_ids"); // the ids can be long; the evaluation block names them
    if (run.embedding) {
        j["method"] = run.embedding->spec.method;
        j["spec"] = spec_json(run.embedding->spec);
        j["accounting"] = accounting_json(run.embedding->accounting);
        j["reconstruction"] = reconstruction_json(run.embedding->reconstruction);
        j["fit"] = run.embedding->fit;
        j["fit"]["seconds"] = run.embedding->fit_seconds; // as embedlab.json has it
    }
    if (run.flat) {
        j["method"] = "flat";
        j["model_params"] = flat_params_json(*run.flat);
        j["layers"] = flat_layers_json(*run.flat, false);
        j["calibration"] = calibration_json(*run.calibration);
    }
    for (const auto& [key, value] : run.extra.items())
        j[key] = value;
    if (!run.recovery.is_null())
        j["finetune"] = run.recovery;
    if (!run.evaluation.is_null())
        j["evaluation"] = run.evaluation;
    j["summary"] = summary_json(run.summary);
    return j;
}

void check_export_target(const fs::path& dir, bool overwrite, const std::vector<fs::path>& inputs)
{
    if (dir.empty())
        throw InputError("the output directory name is empty");
    // Replacing removes the old directory: only an empty one or what we wrote.
    check_replaceable_directory(dir, overwrite, "replace it, or choose another directory", inputs);
}

std::vector<fs::path> request_inputs(const CompressionRequest& r)
{
    std::vector<fs::path> inputs;
    for (const std::string* p : {&r.model, &r.tokenizer, &r.freq_text, &r.coverage_data, &r.calib_text,
                                 &r.train_text, &r.eval_text, &r.task_data})
        if (!p->empty())
            inputs.emplace_back(*p);
    return inputs;
}

Json export_run(const CompressionRun& run, const fs::path& dir, const ExportOptions& options,
                const ProgressFn& progress)
{
    auto inputs = request_inputs(run.request);
    inputs.push_back(run.model.files.path);
    check_export_target(dir, options.overwrite, inputs);
    create_parent_directories(dir);
    const bool lora = !run.recovery.is_null();
    if (options.dense && (run.flat || lora))
        throw InputError(dir.string() + (run.flat
                                             ? ": a dense copy does not apply to flat: model.safetensors "
                                               "already holds standard tensors at the narrowed shapes"
                                             : ": a LoRA run is written with its adapters stored beside "
                                               "the table, as finetune writes it; it has no dense/ export"));
    if (run.flat && run.model.files.format != ModelFormat::HuggingFace)
        throw InputError(run.request.model +
                         ": compressed models are written from Hugging Face directories, not " +
                         model_format_name(run.model.files.format) + " files");
    // Written inside our own temporary directory: a cancel stays possible until the commit.
    AtomicDirectory out(dir, options.overwrite);
    Json manifest;
    if (run.flat) {
        manifest = save_flat_model(run.model, *run.flat, *run.calibration, out.path(),
                                   {.overwrite = true,
                                    .evaluation = run.evaluation,
                                    .calibration_text = run.extra.value("calibration_text", Json())},
                                   progress);
    } else if (lora) {
        const auto base_dir = out.path() / "compressed";
        save_compressed_model(run.model, *run.embedding, base_dir, {.extra = run.extra});
        auto base = load_model(base_dir, {.need_tokenizer = false});
        if (auto adapters = run.model.model->shared_lora()) // the trained adapters on the table as stored
            attach_lora(*base.model, std::move(adapters));
        manifest = save_finetuned_model(
            base, *base.model, out.path(),
            {.overwrite = true, .lora = run.recovery["lora"], .finetune = run.recovery}, progress);
        // The intermediate directory went with the swap: record where the table came from instead.
        manifest["finetuned_from"] = {
            {"model", fs::absolute(run.model.files.path).lexically_normal().string()},
            {"compressed", run.summary.method + " " + run.summary.parameters},
            {"note", "compressed and fine-tuned in one run (experiment API)"}};
        // This run measured the recovered table against the original: not stale.
        manifest.erase("before_finetuning");
        manifest["reconstruction"] = reconstruction_json(run.embedding->reconstruction);
        manifest["fit"] = run.embedding->fit;
        if (!run.evaluation.is_null())
            manifest["evaluation"] = run.evaluation;
        write_file_atomic(out.path() / "embedlab.json", manifest.dump(1) + "\n");
    } else {
        SaveCompressedOptions save{.dense = options.dense, .overwrite = true, .evaluation = run.evaluation};
        save.positions = run.positions ? &*run.positions : nullptr;
        save.extra = run.extra;
        manifest = save_compressed_model(run.model, *run.embedding, out.path(), save, progress);
    }
    report_progress(progress, 1, 1);
    out.commit();
    return manifest;
}

} // namespace embedlab
