#include "embedlab/finetune.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>

#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>

#include "embedlab/json_members.hpp"
#include "methods/loss_check.hpp"
#include "methods/micro_batch.hpp"
#include "methods/training_memory.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

void check_train_options(const TrainOptions& o, int64_t text_ids, int64_t max_context,
                         const std::string& label)
{
    if (o.steps < 1)
        throw InputError("finetune: steps must be at least 1, got " + std::to_string(o.steps));
    if (!(o.lr > 0) || !std::isfinite(o.lr))
        throw InputError("finetune: the learning rate must be a positive number, got " +
                         std::to_string(o.lr));
    if (o.batch < 1 || o.seqlen < 1)
        throw InputError("finetune: batch and seqlen must be at least 1, got " + std::to_string(o.batch) +
                         " and " + std::to_string(o.seqlen));
    if (o.seqlen > max_context)
        throw InputError("finetune: seqlen " + std::to_string(o.seqlen) + " exceeds the model's " +
                         std::to_string(max_context) + " positions");
    if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
        throw InputError("finetune: weight decay must be 0 or more, got " + std::to_string(o.weight_decay));
    if (o.warmup < 0)
        throw InputError("finetune: warmup must be 0 or more, got " + std::to_string(o.warmup));
    const int64_t need = o.batch * o.seqlen + 1;
    if (text_ids < need)
        throw InputError(label + ": " + std::to_string(text_ids) + " tokens is shorter than one batch (" +
                         std::to_string(o.batch) + " x " + std::to_string(o.seqlen) + " + 1 = " +
                         std::to_string(need) + " tokens); use a longer text or a smaller --batch/--seqlen");
}

double finetune_memory_estimate(const LanguageModel& model, const TrainOptions& o, int64_t trained_parameters)
{
    const auto& c = model.config();
    return methods::training_step_bytes(
        {.trained = trained_parameters,
         .frozen = model.parameter_breakdown().total(),
         .windows = methods::micro_windows(o.batch, o.seqlen, c.num_layers, c.hidden_size, c.vocab_size),
         .seqlen = o.seqlen,
         .layers = c.num_layers,
         .dim = c.hidden_size,
         .heads = c.num_heads,
         .vocab = c.vocab_size,
         .batch = o.batch});
}

void check_finetune_memory(const LanguageModel& model, const TrainOptions& o, int64_t trained_parameters,
                           double available)
{
    methods::check_training_memory("finetune", o.batch, o.seqlen,
                                   finetune_memory_estimate(model, o, trained_parameters),
                                   available > 0 ? available : methods::available_memory_bytes());
}

namespace {

// One step's loss with its gradients accumulated over micro-batches (a single
// micro-batch is the whole-batch mean itself); `alive` is asked between passes.
torch::Tensor accumulate_step(const LanguageModel& model, const torch::Tensor& batch, int64_t seqlen,
                              const std::function<bool()>& alive)
{
    const auto& c = model.config();
    const int64_t windows = batch.size(0);
    const int64_t micro = methods::micro_windows(windows, seqlen, c.num_layers, c.hidden_size, c.vocab_size);
    torch::Tensor total;
    for (int64_t at = 0; at < windows; at += micro) {
        const auto part = batch.narrow(0, at, std::min(micro, windows - at));
        const auto logits = model.training_logits(part.narrow(1, 0, seqlen));
        const auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                               part.narrow(1, 1, seqlen).reshape({-1}));
        const double share =
            part.size(0) == windows ? 1.0 : static_cast<double>(part.size(0)) / static_cast<double>(windows);
        methods::backward_share(loss, share, total, alive);
    }
    return total;
}

} // namespace

TrainResult train_next_token(const LanguageModel& model, const std::vector<torch::Tensor>& params,
                             std::span<const int32_t> ids, const TrainOptions& o,
                             const TrainProgressFn& progress, const std::string& label)
{
    const auto t0 = std::chrono::steady_clock::now();
    const auto n = static_cast<int64_t>(ids.size());
    check_train_options(o, n, model.max_context(), label);
    if (params.empty())
        throw InputError("finetune: nothing to train (no adapters or factors selected)");
    TrainResult r;
    r.options = o;
    for (const auto& p : params)
        r.trainable_parameters += p.numel();
    check_finetune_memory(model, o, r.trainable_parameters);
    // Between steps and passes: the finished steps so far (the caller may cancel).
    auto alive = [&] {
        const double last = r.loss_curve.empty() ? 0 : r.loss_curve.back();
        return !progress || progress({static_cast<int64_t>(r.loss_curve.size()), o.steps, last,
                                      r.tokens_per_second, true});
    };
    if (!alive())
        throw Cancelled();
    // Callers may hold InferenceMode (as the evaluation paths do); training needs autograd.
    c10::InferenceMode no_inference(false);
    torch::AutoGradMode grad(true);

    using torch::optim::AdamWOptions;
    torch::optim::AdamW optimizer(params, AdamWOptions(o.lr).weight_decay(o.weight_decay));
    std::mt19937_64 rng(o.seed);
    const int64_t span = o.seqlen + 1;
    const auto starts = static_cast<uint64_t>(n - o.seqlen); // window starts 0 .. n - span
    std::vector<int64_t> window(static_cast<size_t>(o.batch * span));
    r.loss_curve.reserve(static_cast<size_t>(o.steps));
    const auto train_start = std::chrono::steady_clock::now();
    for (int64_t step = 1; step <= o.steps; ++step) {
        for (int64_t b = 0; b < o.batch; ++b) {
            const auto start = static_cast<int64_t>(rng() % starts);
            for (int64_t i = 0; i < span; ++i)
                window[static_cast<size_t>(b * span + i)] = ids[static_cast<size_t>(start + i)];
        }
        const auto batch = torch::from_blob(window.data(), {o.batch, span}, torch::kLong).clone();
        if (o.warmup > 0)
            for (auto& group : optimizer.param_groups())
                static_cast<AdamWOptions&>(group.options())
                    .lr(o.lr * std::min(1.0, static_cast<double>(step) / static_cast<double>(o.warmup)));
        optimizer.zero_grad();
        const auto loss = accumulate_step(model, batch, o.seqlen, alive);
        optimizer.step();
        const double value = methods::finite_loss(loss, "finetune", step);
        r.loss_curve.push_back(value);
        r.tokens += o.batch * o.seqlen;
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - train_start).count();
        r.tokens_per_second = elapsed > 0 ? static_cast<double>(r.tokens) / elapsed : 0;
        if (progress && !progress({step, o.steps, value, r.tokens_per_second}))
            throw Cancelled();
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

namespace {

// Tensors made under InferenceMode (an in-process fit) cannot be saved for
// backward; the model gets ordinary copies of them.
void copy_inference_tensors(LanguageModel& model)
{
    c10::InferenceMode no_inference(false);
    std::vector<std::string> names;
    for (const auto& [name, t] : model.weights())
        if (t.is_inference())
            names.push_back(name);
    for (const auto& name : names)
        model.set_weight(name, model.weights().at(name).clone());
    if (const auto* pos = dense_table(model.position_embedding()))
        if (pos->is_inference())
            model.set_position_embedding(std::make_shared<DenseTokenEmbedding>(pos->clone()));
    const auto& table = model.token_embedding();
    if (auto f = table.low_rank_factors())
        if (f->Z.is_inference() || f->P.is_inference() || f->mu.is_inference()) {
            f->mu = f->mu.clone();
            f->Z = f->Z.clone();
            f->P = f->P.clone();
            model.set_token_embedding(table.with_low_rank_factors(*f));
        }
}

// LoRA adapters on options.targets, attached to `model`: their tensors join
// t.params and `trains` names them. Returns their JSON with the targets and seed.
Json attach_trainable_lora(LanguageModel& model, const LoraOptions& options, Trainable& t, Json& trains)
{
    const auto adapters = make_lora_adapters(model, options);
    attach_lora(model, adapters);
    for (const auto& p : adapters->trainable())
        t.params.push_back(p);
    if (!adapters->adapters.empty())
        trains.push_back("LoRA adapters on " + Json(options.targets).dump());
    Json j = adapters->json();
    j["targets"] = options.targets;
    j["seed"] = options.seed;
    return j;
}

int64_t parameter_count(const std::vector<torch::Tensor>& params)
{
    int64_t count = 0;
    for (const auto& p : params)
        count += p.numel();
    return count;
}

} // namespace

Trainable prepare_recovery(LanguageModel& model, const LoraOptions& lora, bool from_scratch)
{
    if (model.lora())
        throw InputError("finetune: the model already has LoRA adapters; merge them first (--merge)");
    if (dense_table(&model.token_embedding()))
        throw InputError("finetune: the token embedding is dense; recovery fine-tuning starts from a "
                         "compressed model (embedlab-cli compress)");
    copy_inference_tensors(model);
    Trainable t;
    LoraOptions options = lora;
    Json trains = Json::array();
    if (from_scratch) {
        const auto& table = model.token_embedding();
        const auto factors = table.low_rank_factors();
        if (!factors || !factors->fitted)
            throw InputError("finetune: --from-scratch (lrf) replaces a pca or svd table, not " +
                             table.kind());
        const auto fresh =
            random_low_rank_embedding(table.vocab_size(), table.dim(), factors->Z.size(1), lora.seed + 1);
        model.set_token_embedding(fresh);
        const auto f = *fresh->low_rank_factors();
        t.params = {f.Z, f.P};
        trains.push_back("embedding factors Z, P (in full, from random initialisation)");
        options.targets.erase("embedding");
    }
    const Json lora_json = attach_trainable_lora(model, options, t, trains);
    t.description = {
        {"mode", from_scratch ? "lrf" : "lora"},
        {"trains", trains},
        {"frozen", "every base weight" + std::string(from_scratch ? "" : " and embedding factor")},
        {"trainable_parameters", parameter_count(t.params)},
        {"lora", lora_json}};
    return t;
}

Trainable prepare_fourier_mlp_recovery(LanguageModel& model, const LoraOptions& lora)
{
    if (model.lora())
        throw InputError("finetune: the model already has LoRA adapters; merge them first (--merge)");
    const auto shared = model.token_embedding().trainable_shared_weights();
    if (!shared)
        throw InputError("finetune: training the Fourier MLP needs a fourier table, not " +
                         model.token_embedding().kind());
    copy_inference_tensors(model);
    c10::InferenceMode no_inference(false);
    model.set_token_embedding(shared->embedding);
    Trainable t;
    t.params = shared->tensors; // the tensors the model now holds
    Json trains = Json::array();
    trains.push_back(shared->description + " in full: no per-token parameters");
    LoraOptions options = lora;
    options.targets.erase("embedding");
    Json lora_json;
    if (!options.targets.empty())
        lora_json = attach_trainable_lora(model, options, t, trains);
    t.description = {{"mode", "fourier-mlp"},
                     {"trains", trains},
                     {"frozen", "every base weight"},
                     {"trainable_parameters", parameter_count(t.params)},
                     {"lora", lora_json}};
    return t;
}

nlohmann::ordered_json training_json(const TrainResult& r, const std::string& text,
                                     const std::string& text_sha256, size_t text_tokens)
{
    nlohmann::ordered_json j;
    EMBEDLAB_JSON_MEMBERS(j, r.options, steps, lr, batch, seqlen, seed, weight_decay, warmup);
    j["optimizer"] = "AdamW (0.9, 0.999, eps 1e-8)";
    j["text"] = std::filesystem::absolute(text).lexically_normal().string();
    j["text_sha256"] = text_sha256;
    j["text_tokens"] = text_tokens;
    EMBEDLAB_JSON_MEMBERS(j, r, tokens, seconds, tokens_per_second, trainable_parameters);
    methods::put_loss_summary(j, r.loss_curve);
    j["loss_curve"] = r.loss_curve;
    return j;
}

} // namespace embedlab
