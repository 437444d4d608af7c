// The experiment API: one compression run (fit, optional LoRA recovery,
// evaluation) from a request, kept in memory, and its export. The CLI's compress
// and sweep, the workbench (local and remote), `embedlab-cli worker` and the demo
// all call these, so a number or a manifest field is produced in one place.
//
//   embedlab::CompressionRequest r{.model = "models/tinygpt2", .method = "pca", .rank = 32,
//                                  .eval_text = "text.txt"};
//   auto run = embedlab::run_compression(r, [](const embedlab::ExperimentProgress& p) {
//       return !stop_requested;       // false cancels: run_compression throws Cancelled
//   });
//   run.summary.delta_ln_ppl;                                  // the results-table row
//   embedlab::export_run(run, "out/tinygpt2-pca32", {.dense = true});  // no refit
//
// Thread safety: a run is independent of any other; one at a time per process is
// best (libtorch uses every core). The original model's perplexity is cached per
// model, evaluated ids and protocol for the process (thread-safe).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "embedlab/compress.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/model.hpp"
#include "embedlab/results.hpp"

namespace embedlab {

struct FlatResult;
struct Calibration;

// Where a run is: the stage ("load", "calibrate", "eval original", "compress pca",
// "compress positions", "train", "eval compressed", "write"), its own done/total,
// and the share of the whole run done, in [0, 1].
struct ExperimentProgress {
    std::string stage;
    int64_t done = 0, total = 0;
    double overall = 0;
};
using ExperimentProgressFn = std::function<bool(const ExperimentProgress&)>; // false: cancel

// A finished run, in memory: the model with its compressed part in place, what
// the fit produced, and the numbers. Movable, not copyable.
struct CompressionRun {
    CompressionRequest request;
    LoadedModel model; // the source's files; its LanguageModel runs the compressed model
    std::optional<CompressedEmbedding> embedding, positions;
    std::shared_ptr<const FlatResult> flat;
    std::shared_ptr<const Calibration> calibration;
    nlohmann::ordered_json extra;      // manifest fields: frequency_text, calibration text
    nlohmann::ordered_json recovery;   // LoRA: the training record (null without LoRA)
    nlohmann::ordered_json evaluation; // the manifest's "evaluation" block (null: none)
    RunSummary summary;
    // The model that evaluates: flat's narrowed model, else `model`.
    const LanguageModel& compressed_model() const;
};

// Loads the request's model, checks the request against it, fits, recovers,
// evaluates. InputError naming the file or field for anything that cannot run;
// Cancelled when progress returns false.
CompressionRun run_compression(const CompressionRequest& request, const ExperimentProgressFn& progress = {});
// The same on a model the caller has loaded (with request_load_options(request)):
// the CLI loads first to check its flags against the model, and loads only once.
CompressionRun run_compression(const CompressionRequest& request, LoadedModel model,
                               const ExperimentProgressFn& progress = {});
LoadOptions request_load_options(const CompressionRequest& request);

// The run's record without writing a model: method, spec, accounting,
// reconstruction, fit, evaluation and summary, with embedlab.json's field names.
nlohmann::ordered_json run_json(const CompressionRun& run);

struct ExportOptions {
    bool dense = false;     // also DIR/dense/, a plain Hugging Face directory (embedding methods)
    bool overwrite = false; // replace DIR if it is an EmbedLab model directory (embedlab.json)
};
// Writes the run's model to `dir` as `embedlab-cli compress --out` does, from
// memory (nothing is refitted): factors and embedlab.json; LoRA runs as finetune
// writes them (adapters stored beside the table); flat's narrowed tensors.
// Atomic: an error or a cancel leaves no directory, or the previous one.
// Returns embedlab.json as written.
nlohmann::ordered_json export_run(const CompressionRun& run, const std::filesystem::path& dir,
                                  const ExportOptions& options = {}, const ProgressFn& progress = {});

// Throws InputError unless `dir` is free, or (overwrite) a directory that holds
// only what EmbedLab wrote (check_replaceable_directory), and is none of `inputs`
// nor holds one. export_run checks it first (with the run's request_inputs);
// callers check it before a long run so that a taken name fails in a second.
void check_export_target(const std::filesystem::path& dir, bool overwrite,
                         const std::vector<std::filesystem::path>& inputs = {});

// Every file or directory a request reads: the model, its tokenizer and texts.
std::vector<std::filesystem::path> request_inputs(const CompressionRequest& request);

// The frequency text of the lle methods (METHODS 2): tokenized with the model's
// tokenizer, split into common and rare tokens (specials always common), recorded
// with its sha256. InputError naming the file for an empty text, one that is mostly
// the unknown token, or a split that cannot be made.
struct FrequencyText {
    std::filesystem::path path;
    std::string sha256;
    std::shared_ptr<const FrequencySplit> split;
    nlohmann::ordered_json json() const; // {path, sha256, tokens, distinct_seen, keep_ratio, common, rare}
};
// Ids the tokenizer marks special: always kept common.
std::vector<int64_t> special_token_ids(const Tokenizer& tokenizer);
FrequencyText read_frequency_text(const std::filesystem::path& file, const Tokenizer& tokenizer,
                                  int64_t vocab_size, double keep_ratio);

} // namespace embedlab
