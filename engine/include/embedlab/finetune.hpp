// Recovery fine-tuning of a compressed model (METHODS.md 1): a seeded, cancellable
// next-token training loop over windows of a text, and the finetuned directory.
//
//   auto lm = embedlab::load_model("out/tinygpt2-pca16");
//   auto ids = lm.tokenizer->encode(embedlab::read_text_file("train.txt"));
//   auto trainable = embedlab::prepare_recovery(*lm.model, {.rank = 32, .alpha = 64}, false);
//   auto r = embedlab::train_next_token(*lm.model, trainable.params, ids, {.steps = 200},
//       [](const embedlab::TrainStep& s) { return !stop_requested; });   // false: Cancelled
//   embedlab::merge_lora(*lm.model);                        // optional (lora.hpp)
//   embedlab::save_finetuned_model(lm, *lm.model, "out/pca16-lora", {.finetune = record});
//
// Steps: batch windows of seqlen + 1 ids, each starting at a uniform position drawn
// from std::mt19937_64(seed) (start = rng() % (n - seqlen)); loss = mean next-token
// cross-entropy over batch x seqlen targets; AdamW (betas 0.9, 0.999, eps 1e-8) with
// weight decay on the adapters' and factors' matrices; the learning rate rises
// linearly over `warmup` steps, then stays. Parameters are updated in place, so the
// model that holds them is the trained model when the call returns; a cancel leaves
// them at the last finished step. A step runs in micro-batches of at most 1,024
// tokens (gradients accumulate), so memory stays bounded and cancel is prompt.
// Thread safety: one training run per model at a time; the progress callback runs
// on the calling thread (a GUI engine thread can run the whole call).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/lora.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct TrainOptions {
    int64_t steps = 0;
    double lr = 1e-3;
    int64_t batch = 8;    // windows per step
    int64_t seqlen = 128; // predicted tokens per window
    uint64_t seed = 0;
    double weight_decay = 0;
    int64_t warmup = 0;
};

struct TrainStep {
    int64_t step = 0, steps = 0;  // 1-based
    double loss = 0;              // this step's batch loss
    double tokens_per_second = 0; // trained tokens (batch x seqlen) per second so far
    // A report before the first step or between micro-batches (at least once a second
    // when a step is long): step counts the finished steps, loss is the last one's.
    bool partial = false;
};
// Returning false cancels: train_next_token throws Cancelled.
using TrainProgressFn = std::function<bool(const TrainStep&)>;

struct TrainResult {
    TrainOptions options;
    std::vector<double> loss_curve; // every step
    std::vector<double> lr_curve;   // every step's rate (classifier fine-tuning: the head's)
    int64_t tokens = 0;             // batch x seqlen x steps
    double seconds = 0;
    double tokens_per_second = 0;
    int64_t trainable_parameters = 0;
};

// InputError ("<label>: ...") for steps < 1, lr not a positive number, batch or
// seqlen < 1, seqlen beyond the model's positions, weight decay or warmup < 0, or a
// text of fewer than batch x seqlen + 1 ids (shorter than one batch).
void check_train_options(const TrainOptions& options, int64_t text_ids, int64_t max_context,
                         const std::string& label);

// The "training" record of finetune's JSON and embedlab.json (field names are a
// contract): the options, the text (absolute path, sha256, its token count), and
// the result with its loss curve.
nlohmann::ordered_json training_json(const TrainResult& result, const std::string& text,
                                     const std::string& text_sha256, size_t text_tokens);

// Peak bytes of a training step of `model` (weights, AdamW state for
// `trained_parameters`, the activations of one micro-batch). check_finetune_memory:
// InputError "finetune: batch B x seqlen T needs about X GB (estimate), this machine
// has Y GB available; lower --batch or --seqlen" above 90% of `available` bytes
// (0: this machine's MemAvailable, cgroup and RLIMIT_AS limits). train_next_token checks too.
double finetune_memory_estimate(const LanguageModel& model, const TrainOptions& options,
                                int64_t trained_parameters);
void check_finetune_memory(const LanguageModel& model, const TrainOptions& options,
                           int64_t trained_parameters = 0, double available = 0);

TrainResult train_next_token(const LanguageModel& model, const std::vector<torch::Tensor>& params,
                             std::span<const int32_t> ids, const TrainOptions& options,
                             const TrainProgressFn& progress = {},
                             const std::string& label = "training text");

struct Trainable {
    std::vector<torch::Tensor> params;
    nlohmann::ordered_json description; // {mode, trains: [...], parameters, lora: {...}}
};

// Makes `model` (whose token table is compressed) ready to train: base tensors that
// were made under InferenceMode are copied, then
//   from_scratch = false: fresh adapters on lora.targets (attach_lora); the adapters train.
//   from_scratch = true : the pca/svd factors are replaced by random lrf factors of the
//                         same rank (random_low_rank_embedding, seed lora.seed + 1) that
//                         train in full, with adapters on the linear targets (the
//                         "embedding" target is dropped: its factors train directly).
// InputError for a dense table, a model that already has adapters, or from_scratch
// on a table that is not pca/svd.
Trainable prepare_recovery(LanguageModel& model, const LoraOptions& lora, bool from_scratch);

// PETE's own recovery (METHODS.md 4, issue 20 item 12): the fourier table's MLP
// (w_in, b_in, and w_out, b_out / norm when present) trains in full by LM loss, so
// the embedding keeps its MLP-only parameters (no V x r row adapter, which
// prepare_recovery would add); the targets other than "embedding" get LoRA
// adapters as for lora ("embedding" alone: the MLP only). description.mode is
// "fourier-mlp". InputError when the table is not fourier or adapters are attached.
Trainable prepare_fourier_mlp_recovery(LanguageModel& model, const LoraOptions& lora);

struct SaveFinetunedOptions {
    bool overwrite = false;
    nlohmann::ordered_json lora;     // the adapters' json() before a merge (null: none)
    nlohmann::ordered_json finetune; // training record, stored under "finetune"
};

// Writes `model` (trained from `source`, a compressed directory as loaded) as a
// compressed directory: support files and embedlab.json from the source, updated
// factor tensors (lrf when the table was trained from scratch), and either
//   model.lora() attached: DIR/adapters.safetensors + "lora": {.., "merged": false}
//   merged (no adapters left): "lora": {.., "merged": true}, nothing extra to load.
// Every weights file's sha256 is recorded. Atomic like save_compressed_model.
nlohmann::ordered_json save_finetuned_model(const LoadedModel& source, const LanguageModel& model,
                                            const std::filesystem::path& out,
                                            const SaveFinetunedOptions& options,
                                            const ProgressFn& progress = {});

} // namespace embedlab
