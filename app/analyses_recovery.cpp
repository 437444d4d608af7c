// LoRA recovery (METHODS 1) of a workbench compression: the same engine calls
// as `embedlab-cli finetune`, with the workbench's fixed training settings.
#include <algorithm>
#include <filesystem>

#include "analyses_internal.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/finetune.hpp"
#include "embedlab/tokenizer.hpp"

namespace embedlab::app::detail {

namespace {

namespace fs = std::filesystem;

TrainOptions train_options(const CompressionRequest& request, const LanguageModel& model)
{
    return {.steps = request.lora_steps,
            .lr = 1e-3,
            .batch = 8,
            .seqlen = std::min<int64_t>(128, model.max_context()),
            .seed = 0};
}

bool same_file(const std::string& a, const std::string& b)
{
    std::error_code ea, eb;
    const auto ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
    return !ea && !eb && ca == cb;
}

} // namespace

RecoveryTraining recovery_training(const Tokenizer& tokenizer, const LanguageModel& model,
                                   const CompressionRequest& request, const std::string& eval_text,
                                   int64_t evaluated_ids)
{
    RecoveryTraining t;
    t.text = text_or_default(request.train_text);
    t.ids = tokenizer.encode(read_text_file(t.text));
    const auto options = train_options(request, model);
    const int64_t need = options.batch * options.seqlen + 1;
    if (same_file(t.text, eval_text)) {
        // Never train on a token the row's perplexity is measured on.
        const int64_t total = static_cast<int64_t>(t.ids.size());
        t.first_id = std::min(evaluated_ids, total);
        if (total - t.first_id < need)
            throw InputError(t.text + ": is also the evaluation text, and after its " +
                             std::to_string(t.first_id) + " evaluated ids only " +
                             std::to_string(total - t.first_id) + " of its " + std::to_string(total) +
                             " ids are left for LoRA training (one batch needs " + std::to_string(need) +
                             "); lower eval_tokens or choose another training text");
        t.ids.erase(t.ids.begin(), t.ids.begin() + t.first_id);
    }
    check_train_options(options, static_cast<int64_t>(t.ids.size()), model.max_context(), t.text);
    return t;
}

RecoveryResult recover_with_lora(LanguageModel& model, const RecoveryTraining& training,
                                 const CompressionRequest& request, const ProgressFn& progress)
{
    const LoraOptions lora{.rank = request.lora_rank, .alpha = 2.0 * static_cast<double>(request.lora_rank)};
    const Trainable trainable = prepare_recovery(model, lora, /*from_scratch=*/false);
    const auto options = train_options(request, model);
    const auto r = train_next_token(
        model, trainable.params, training.ids, options,
        [&](const TrainStep& s) { return !progress || progress(s.step, s.steps); }, training.text);
    RecoveryResult out;
    out.adapter_params = model.parameter_breakdown().adapters;
    out.initial_loss = r.loss_curve.front();
    out.final_loss = r.loss_curve.back();
    out.seconds = r.seconds;
    out.record = {
        {"mode", trainable.description["mode"]},
        {"method", model.token_embedding().kind()},
        {"trains", trainable.description["trains"]},
        {"frozen", trainable.description["frozen"]},
        {"lora", trainable.description["lora"]},
        {"training", training_json(r, training.text, sha256_file(training.text), training.ids.size())},
        {"by", "EmbedLab workbench (LoRA recovery of a results row)"}};
    out.record["training"]["ids_from"] = training.first_id; // the evaluated ids come before
    return out;
}

std::string recovery_parameters(const CompressionRequest& request)
{
    return " + LoRA r " + std::to_string(request.lora_rank) + ", " + std::to_string(request.lora_steps) +
           " steps";
}

} // namespace embedlab::app::detail
