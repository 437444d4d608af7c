// Training a small GPT-2-style model from scratch (issue 20 item 12): PETE as the
// paper runs it (METHODS.md 4), a Fourier embedding trained jointly with the
// transformer, against an ordinary learned table at the same training time.
//
//   auto tok = embedlab::load_tokenizer_from_directory(embedlab::default_model_path());
//   auto ids = tok->encode(embedlab::read_text_file("train.txt"));
//   embedlab::ScratchOptions o;
//   o.config = embedlab::scratch_config("tiny", tok->vocab_size());   // d 128, 4 layers
//   o.embedding = embedlab::parse_scratch_embedding("fourier:linear");
//   o.minutes = 5;                                                     // or o.steps = 600
//   auto r = embedlab::train_from_scratch(o, ids, [](const embedlab::ScratchStep& s) {
//       return !stop_requested; });                                    // false: Cancelled
//   embedlab::save_trained_model(r, "out/tiny-fourier", {.tokenizer_dir = embedlab::default_model_path()});
//   auto back = embedlab::load_model("out/tiny-fourier");              // eval, inspect, finetune
//
// Model: GPT-2 (pre-LayerNorm, learned positions, gelu_new MLP of 4 d, tied head).
//   tiny : d 128, 4 layers, 4 heads, 256 positions
//   small: d 256, 6 layers, 8 heads, 256 positions
// Embedding:
//   table          a learned V x d table, N(0, 0.02), also the tied output head.
//   fourier:linear PETE: E(p) = T(p) + MLP(T(p)) (fourier_embedding.hpp), MLP d -> d,
//   fourier:geglu  or GeGLU with hidden_ratio; no per-token parameters. The tied head
//                  multiplies the hidden states with all V rows rebuilt from the MLP at
//                  every step (the same head the fourier compressed model serves).
// Initialisation (from a generator seeded with `seed`, torch's global one untouched):
// linear weights N(0, 0.02), the attention and MLP output projections N(0, 0.02 /
// sqrt(2 layers)) (GPT-2), biases 0, LayerNorm weights 1; the Fourier MLP as
// torch::nn::Linear, U(+-1/sqrt(fan_in)).
// Steps: `batch` windows of seqlen + 1 ids whose starts come from
// std::mt19937_64(seed) (start = rng() % (n - seqlen)), mean next-token
// cross-entropy, gradients clipped to norm `grad_clip`, AdamW (0.9, 0.95, eps 1e-8)
// with weight decay on matrices only. Learning rate: linear warmup over `warmup`
// steps, constant until step max(warmup, 10), then cosine to min_lr_ratio lr at the
// planned last step. The plan is `steps`, or with only `minutes` the number of steps
// the first 10 took time for, fixed at step 10 (recorded as planned_steps); training
// stops at the plan or when the time is up, whichever comes first.
// --arch bert (issue 42, PETE's own setting): a BERT encoder (post-LayerNorm, learned
// positions and two segment rows, erf GELU MLP of 4 d, BertForMaskedLM's tied head)
// trained by masked-language modelling: each step's windows are `seqlen` ids framed
// [CLS] .. [SEP]; each of the seqlen positions is chosen with probability mask_rate
// (at least one per step), a chosen one becomes [MASK] 80%, a uniformly random id 10%
// and stays 10% (BERT, from the same generator); the loss is the mean cross-entropy
// over the chosen positions. Initialisation as BertPreTrainedModel: N(0, 0.02) for
// every matrix and table (the [PAD] row 0), biases 0, LayerNorm weights 1. Saved as a
// BertForMaskedLM directory with the WordPiece tokenizer's files; eval gives its
// pseudo-perplexity, task stsb its zero-shot similarity (mean pooling).
// Deterministic for a seed, a thread count and a number of steps: a time-limited
// run that completed its plan is replayed exactly by steps = planned_steps.
// A step runs in micro-batches of at most 1,024 tokens (gradients accumulate), so
// memory stays bounded and cancel is prompt.
// Thread safety: reentrant (no globals); the progress callback runs on the calling
// thread, before the first step, between micro-batches and after each step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/fourier_mlp.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

class FourierTokenEmbedding; // fourier_embedding.hpp

struct ScratchConfig {
    std::string name; // "tiny", "small" ("custom": any sizes, for tests)
    int64_t vocab = 0, dim = 0, layers = 0, heads = 0, positions = 0;
    std::string arch = "gpt2"; // "gpt2" (causal LM) or "bert" (masked-LM encoder)
};
// "tiny" or "small" for a tokenizer of `vocab` ids; InputError naming both otherwise
// (and for an arch other than gpt2 or bert).
ScratchConfig scratch_config(const std::string& name, int64_t vocab, const std::string& arch = "gpt2");
// The ModelConfig of a scratch config: GPT-2 (tied head, MLP width 4 d), or for bert
// the one its saved config.json reads as (BertForMaskedLM).
ModelConfig scratch_model_config(const ScratchConfig& config);

// The ids a masked-LM objective frames and masks with (a WordPiece tokenizer's).
struct MaskedLmTokens {
    int64_t cls = -1, sep = -1, mask = -1, pad = -1;
};

struct ScratchEmbedding {
    bool fourier = false;
    FourierMlp mlp = FourierMlp::Linear;
};
// "table", "fourier" (= fourier:linear), "fourier:linear", "fourier:geglu";
// InputError listing them otherwise.
ScratchEmbedding parse_scratch_embedding(const std::string& name);
std::string scratch_embedding_name(const ScratchEmbedding& embedding); // "table", "fourier:geglu", ...

struct ScratchOptions {
    ScratchConfig config;
    ScratchEmbedding embedding;
    double hidden_ratio = 0.25; // fourier:geglu hidden size / d
    bool norm = true;           // fourier: RMSNorm after the residual (METHODS 4's option)
    double norm_scale = 0.02;   // its weight's initial value: rows start at RMS 0.02, as the table
    double minutes = 0;         // time budget; 0: `steps` alone
    int64_t steps = 0;          // 0: as many as `minutes` allow (planned at step 10)
    double lr = 1e-3;
    double min_lr_ratio = 0.1;
    int64_t warmup = 50;
    int64_t batch = 8;    // windows per step
    int64_t seqlen = 128; // predicted tokens per window
    double weight_decay = 0.1;
    double grad_clip = 1.0; // 0: none
    uint64_t seed = 0;
    std::string objective;   // "clm" (gpt2) or "mlm" (bert); empty: the arch's
    double mask_rate = 0.15; // mlm: the share of positions predicted
    MaskedLmTokens special;  // mlm: required
};
// The objective `options` trains: its own, else the arch's.
std::string scratch_objective(const ScratchOptions& options);

struct ScratchStep {
    int64_t step = 0, planned_steps = 0; // planned_steps 0 until it is fixed
    double loss = 0, lr = 0;
    double seconds = 0;           // since training started
    double tokens_per_second = 0; // trained tokens per second so far
    // A report before the first step or between micro-batches (at least once a second
    // when a step is long): step counts the finished steps, loss is the last one's.
    bool partial = false;
};
// Returning false cancels: train_from_scratch throws Cancelled.
using ScratchProgressFn = std::function<bool(const ScratchStep&)>;

struct ScratchResult {
    ScratchOptions options;
    std::unique_ptr<LanguageModel> model; // trained; plain tensors, no autograd state
    // model's token table when options.embedding.fourier (null for a learned table).
    std::shared_ptr<const FourierTokenEmbedding> fourier;
    std::vector<double> loss_curve; // every step's batch loss
    int64_t steps = 0, planned_steps = 0;
    int64_t tokens = 0; // batch x seqlen x steps
    double seconds = 0; // training steps only
    double tokens_per_second = 0;
    std::string stopped_by; // "steps" (the plan finished) or "time"
    int64_t embedding_parameters = 0, total_parameters = 0;
    int64_t threads = 0;
};

// InputError for an unknown config, vocab < 2, minutes < 0 or not finite, neither
// minutes nor steps > 0, steps < 0, lr not positive, batch/seqlen < 1, seqlen beyond
// the positions, warmup < 0, weight decay/grad_clip < 0, min_lr_ratio outside [0, 1],
// hidden_ratio outside (0, 64], or a text shorter than one batch (batch x seqlen + 1
// ids; an empty text says so); for bert: an objective other than mlm, mask_rate
// outside (0, 1], special ids missing or outside the vocabulary, seqlen + 2 beyond the
// positions (gpt2: an objective other than clm).
void check_scratch_options(const ScratchOptions& options, int64_t text_ids);

// Peak bytes of a training step (weights, AdamW state, one micro-batch's
// activations); check_scratch_memory: InputError "train: batch B x seqlen T needs
// about X GB (estimate), this machine has Y GB available; lower --batch or --seqlen"
// above 90% of `available` (0: this machine's). train_from_scratch checks too.
double scratch_memory_estimate(const ScratchOptions& options);
void check_scratch_memory(const ScratchOptions& options, double available = 0);

ScratchResult train_from_scratch(const ScratchOptions& options, std::span<const int32_t> ids,
                                 const ScratchProgressFn& progress = {});

// The "training" record of train's JSON and the saved directory (field names are a
// contract): config, embedding, options, steps, planned_steps, stopped_by, tokens,
// seconds, tokens_per_second, threads, embedding_parameters, total_parameters,
// initial_loss, final_loss, loss_curve (at most 500 points, evenly spaced).
nlohmann::ordered_json scratch_training_json(const ScratchResult& result);

struct SaveTrainedOptions {
    std::filesystem::path tokenizer_dir; // tokenizer files copied from here (required)
    bool overwrite = false;
    nlohmann::ordered_json extra; // more fields for training.json (text, evaluation)
};

// Writes DIR atomically (a sibling temporary, renamed; nothing left on error or
// Cancelled): config.json (gpt2, tied; bert: BertForMaskedLM), the tokenizer files
// (tokenizer.json, vocab.json, merges.txt, vocab.txt, tokenizer_config.json,
// special_tokens_map.json when present), training.json (scratch_training_json + extra), and
// model.safetensors:
//   table  : every weight, wte.weight included (an ordinary Hugging Face directory)
//   fourier: every weight but the table, plus the MLP as its factors (gpt2:
//            wte.fourier.*, bert: embeddings.word_embeddings.fourier.*) and
//            embedlab.json (method fourier, "trained_from_scratch": true), the layout
//            compress --method fourier writes, so load_model serves E from the MLP.
// Returns training.json's content. InputError for a missing tokenizer directory or
// an existing DIR without overwrite.
nlohmann::ordered_json save_trained_model(const ScratchResult& result, const std::filesystem::path& out,
                                          const SaveTrainedOptions& options, const ProgressFn& progress = {});

} // namespace embedlab
