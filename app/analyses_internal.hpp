// What the analyses' .cpp files share (libtorch inside; never included by Qt code).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyses.hpp"
#include "embedlab/error.hpp"

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

// Throws InputError unless out_dir is free, or (with overwrite) an EmbedLab model
// directory that may be replaced.
void check_replaceable(const std::string& out_dir, bool overwrite);

// The request's text, or the bundled sample text when it is empty.
std::string text_or_default(const std::string& text);

// The most balanced 3-factor shape of d (tt's shape in the workbench): smallest
// largest factor, then largest smallest factor (8x8x12 for 768, 4x4x8 for 128).
// InputError naming `label` when d has none.
std::vector<int64_t> balanced_shape(int64_t d, const std::string& label);

// analyses_flat.cpp: method "flat" (METHODS 3) on this computer.
CompressionRun flat_compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                          const std::string& text, const ProgressFn& progress);
std::string flat_export(const std::string& model, const CompressionRequest& request,
                        const std::string& out_dir, bool dense, bool overwrite, const ProgressFn& progress);

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

// analyses_embedding.cpp: an embedding request (pca, svd, tt, lle, fourier) as the
// engine's spec, checked against the model (lle splits on the frequency text, so
// `lm` needs its tokenizer then); and the row's parameters text for the fit.
CompressionSpec embedding_spec(const CompressionRequest& request, const LoadedModel& lm,
                               const std::string& label);
std::string parameters_text(const CompressedEmbedding& c);

// analyses_recovery.cpp: LoRA recovery (METHODS 1) of a model whose token table is
// compressed: adapters of rank request.lora_rank (alpha 2 rank) on q, k, v, o, the
// MLP and the embedding, trained for request.lora_steps next-token steps (batch 8,
// seqlen min(128, context), lr 1e-3, seed 0) on request.train_text. When that is
// the evaluation text (same canonical path), only its ids after the first
// `evaluated_ids` are trained on; too few left for one batch is an InputError.
struct RecoveryTraining {
    std::vector<int32_t> ids; // what is trained on
    std::string text;         // the training text's path
    int64_t first_id = 0;     // ids[0] is the text's id number first_id
};
RecoveryTraining recovery_training(const Tokenizer& tokenizer, const LanguageModel& model,
                                   const CompressionRequest& request, const std::string& eval_text,
                                   int64_t evaluated_ids);
struct RecoveryResult {
    int64_t adapter_params = 0; // stored beside the table (not merged)
    double initial_loss = 0, final_loss = 0, seconds = 0;
    nlohmann::ordered_json record; // what an export stores under "finetune"
};
// Attaches and trains the adapters in place; progress returning false: Cancelled.
RecoveryResult recover_with_lora(LanguageModel& model, const RecoveryTraining& training,
                                 const CompressionRequest& request, const ProgressFn& progress);
// " + LoRA r 8, 100 steps": what a LoRA row adds to its parameters text.
std::string recovery_parameters(const CompressionRequest& request);

} // namespace embedlab::app::detail
