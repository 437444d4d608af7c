// Fine-tuning an encoder into a sequence classifier (the LLE paper's setting: a
// DistilBERT fine-tuned on a GLUE task), and writing it as a Hugging Face directory.
//
//   auto base = embedlab::load_model("distilbert-mlm");
//   auto data = embedlab::read_task_data("sst2", "train.tsv");   // or rte, mnli, ... (pairs)
//   auto texts = embedlab::labelled_texts(data);
//   auto model = embedlab::with_classification_head(*base.model, texts.label_names, /*seed=*/0);
//   auto r = embedlab::train_classifier(*model, *base.tokenizer, texts, {.steps = 300});
//   embedlab::save_classifier(base, *model, "out/sst2-classifier", {.training = ...});
//
// Steps: `batch` examples drawn uniformly with std::mt19937_64(seed) (index =
// rng() % n), framed [CLS] text [SEP] (encoder.hpp); loss = mean cross-entropy of
// the head's logits; AdamW (betas 0.9, 0.999, eps 1e-8, no weight decay) on the head
// at `lr` and, when body_lr > 0, on every other weight (token table included) at
// body_lr. Updated in place: the model is the trained model when the call returns.
// A step runs in micro-batches of rows (gradients accumulate), reporting between
// them (TrainStep::partial), so cancel is prompt at any batch.
//
// Thread safety: one training run per model at a time; progress runs on the
// calling thread.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/finetune.hpp"
#include "embedlab/model.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/tasks.hpp"

namespace embedlab {

struct LabelledTexts {
    std::vector<std::string> texts;
    std::vector<std::string> pairs;       // a pair task's second texts (as many as texts); else empty
    std::vector<int64_t> labels;          // index into label_names
    std::vector<std::string> label_names; // sst2: negative, positive; regression: LABEL_0
    std::vector<double> targets;          // regression (stsb): the gold score per text; else empty
    std::string source;
    std::string task; // the GLUE task read ("sst2", .., "stsb"): which metric scores it
};

// A GLUE classification task's sentences (or pairs) and labels, with the task's own
// label names (tasks.hpp); InputError for mc or stsb.
LabelledTexts labelled_texts(const TaskData& data);
// STS-B as regression (Hugging Face's num_labels 1, problem_type "regression"): the
// pairs and their gold scores, one head output named LABEL_0. InputError for fewer than
// 2 pairs.
LabelledTexts regression_pairs(const std::vector<SentencePair>& pairs, const std::string& source);

struct ClassifierTrainOptions {
    int64_t steps = 300;
    int64_t batch = 16;
    double lr = 1e-3;   // the head
    double body_lr = 0; // > 0: the body trains too
    uint64_t seed = 0;
    // The LLE paper's protocol (Hugging Face Trainer's, issue 62 item 6): epochs > 0 trains
    // that many shuffled passes (each example once a pass, the last batch of a pass shorter)
    // instead of `steps` draws; a linear schedule decays every group's rate to 0 at the last
    // step after `warmup` steps rising from 0.
    int64_t epochs = 0;
    bool linear_schedule = false;
    int64_t warmup = 0;
};
// The steps `options` trains on n examples: epochs x ceil(n / batch), or its steps.
int64_t classifier_steps(const ClassifierTrainOptions& options, int64_t n);
// The rate factor at step s (1-based) of `total`: 1 without a schedule; with one, s / warmup
// during the warm-up, then (total - s + 1) / (total - warmup) down to 1 / (total - warmup).
double classifier_rate_factor(const ClassifierTrainOptions& options, int64_t step, int64_t total);

// `base`'s encoder body (a masked-LM head dropped) with a fresh head for `labels`:
// distilbert pre_classifier + classifier, bert its pooler (kept, or fresh) +
// classifier; N(0, 0.02) weights and zero biases from `seed`. InputError for a
// decoder or a compressed token table.
std::unique_ptr<LanguageModel>
with_classification_head(const LanguageModel& base, const std::vector<std::string>& labels, uint64_t seed);

// Cross-entropy over the labels, or with targets (regression) the mean squared error
// of the single head output. InputError for steps, batch < 1, lr not positive,
// body_lr < 0, fewer than 2 examples, a label outside the head, targets on a head of
// more than one output. progress may cancel (Cancelled).
TrainResult train_classifier(LanguageModel& model, const Tokenizer& tokenizer, const LabelledTexts& data,
                             const ClassifierTrainOptions& options, const TrainProgressFn& progress = {});

// A Hugging Face directory transformers loads as …ForSequenceClassification:
// config.json from `source`'s with the architecture, id2label / label2id and
// num_labels set (one label: problem_type "regression"), the weights under their own names, the tokenizer
// files copied, and `record` (the training) in embedlab.json. Atomic; `overwrite` replaces only what EmbedLab
// wrote.
void save_classifier(const LoadedModel& source, const LanguageModel& model, const std::filesystem::path& out,
                     bool overwrite, const nlohmann::ordered_json& record);

// ---- The LLE paper's evaluation protocol (Tamura et al., sections 3.1-3.3; issue 62 item 6) ----
//
//   ClassifierProtocolOptions o{.train = {.batch = 32, .lr = 2e-5, .body_lr = 2e-5, .epochs = 3,
//                                         .linear_schedule = true},
//                               .trials = 3, .select_k = true,
//                               .settings = {{.method = "lle", .keep_ratio = 0.5, .ks = {1, 2, 3, 4, 5}}}};
//   auto r = embedlab::run_classifier_protocol(*base.model, *base.tokenizer, train, test, o);
//   embedlab::protocol_json(r);  // seeds, split, V_C, per setting and k: the scores, mean, std
//
// Each trial fine-tunes a fresh head (seed = train.seed + trial) on the training examples (with
// select_k: the 90 % left after validation_split), scores it on `test` (the paper's "original"
// row), then for every setting compresses the trained token table with the lle family (V_C from
// the training text, METHODS 2), scores the compressed model on the validation split (select_k)
// and on `test`, and restores the table. k is chosen after all trials: the candidate with the
// best mean validation score (ties: the first listed). Scores are GLUE's headline metric
// (accuracy, cola MCC, mrpc/qqp F1, stsb Spearman of the regression head).

// The paper's held-out split (section 3.1): the indices 0..n-1 shuffled by Fisher-Yates from
// the top with std::mt19937_64(seed) (swap i with rng() % (i + 1)), the first
// ceil(fraction n) of them validation, the rest training; both listed ascending. InputError
// when a side would be empty or the training side under 2 examples.
struct ValidationSplit {
    std::vector<int64_t> train, validation;
    uint64_t seed = 42;
    double fraction = 0.1;
};
ValidationSplit validation_split(int64_t n, double fraction = 0.1, uint64_t seed = 42);
// The examples at `indices` (in that order), labels and pairs kept.
LabelledTexts subset(const LabelledTexts& data, const std::vector<int64_t>& indices);

// The token ids V_C is counted from (the paper's section 2.1: "the training data tokenized
// with the target PLM's tokenizer"): each example's text, then its pair, encoded alone (no
// [CLS]/[SEP]: special tokens are in V_C anyway), concatenated. InputError when none encodes.
std::vector<int32_t> training_token_ids(const Tokenizer& tokenizer, const LabelledTexts& data);
// V_C from those ids (split_by_frequency, the tokenizer's special tokens kept common).
FrequencySplit training_frequency_split(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                                        int64_t vocab_size, double keep_ratio);

// Mean and the sample standard deviation (n - 1 in the denominator; 0 for one value) of
// trial scores. InputError for no values.
struct MeanStd {
    double mean = 0, std = 0;
    int64_t n = 0;
};
MeanStd mean_and_std(const std::vector<double>& values);

// GLUE's headline score of a classifier on labelled examples: {metric, value}; "accuracy"
// (sst2, ..), "mcc" (cola), "f1" (mrpc, qqp), "spearman" (stsb's regression head).
struct ClassifierScore {
    std::string metric;
    double value = 0;
};
ClassifierScore score_classifier(const LanguageModel& model, const Tokenizer& tokenizer,
                                 const LabelledTexts& data);

struct ProtocolSetting {
    std::string method = "lle"; // lle, lle-unk or lle-pca
    double keep_ratio = 1.0;    // r(V_C)
    std::vector<int64_t> ks;    // candidates (several: chosen on the validation split); lle-unk: {0}
};

struct ClassifierProtocolOptions {
    ClassifierTrainOptions train;
    int64_t trials = 3;    // the paper's three fine-tuning trials; 1..100
    bool select_k = false; // hold out validation_split(validation_fraction, split_seed) of the training data
    double validation_fraction = 0.1;
    uint64_t split_seed = 42;
    std::vector<ProtocolSetting> settings; // none: only the fine-tuned ("original") scores
    double reg = 1e-3;                     // lle's regulariser (METHODS 2)
    // V_C's source: these ids (a --freq-text); none: training_token_ids of the training examples.
    std::optional<std::vector<int32_t>> frequency_ids;
};

struct ProtocolScores {
    std::vector<double> validation, test; // one per trial (validation: with select_k)
};

struct ProtocolSettingResult {
    ProtocolSetting setting;
    int64_t common = 0, rare = 0;          // |V_C|, |V_R|
    std::vector<ProtocolScores> per_k;     // aligned with setting.ks
    std::vector<int64_t> embedding_params; // per k: the compressed table's stored values
    std::vector<double> rare_cosine;       // per k: mean rare-row cosine over the trials
    size_t chosen = 0;                     // index into setting.ks
};

struct ClassifierProtocolResult {
    std::vector<uint64_t> seeds;
    std::optional<ValidationSplit> split;
    int64_t train_examples = 0, test_examples = 0;
    std::string metric;
    std::vector<TrainResult> training; // per trial
    ProtocolScores original;           // the fine-tuned classifiers, uncompressed
    int64_t frequency_tokens = 0, frequency_distinct = 0;
    bool frequency_from_training = true;
    std::vector<ProtocolSettingResult> settings;
    std::unique_ptr<LanguageModel> first_model; // the first trial's classifier (dense), to save
    double seconds = 0;
};

// InputError for trials outside 1..100, a setting with an unknown method, a keep ratio outside
// (0, 1], no k (lle, lle-pca), a k of lle-unk, a training set too small to split (select_k), or
// the errors of the calls above; std::logic_error for several k without select_k.
// progress(done, total) counts training steps and scorings; returning false cancels (Cancelled).
ClassifierProtocolResult run_classifier_protocol(const LanguageModel& base, const Tokenizer& tokenizer,
                                                 const LabelledTexts& train, const LabelledTexts& test,
                                                 const ClassifierProtocolOptions& options,
                                                 const ProgressFn& progress = {});

// {trials, seeds, std, metric, train_examples, test_examples, [split], [common_vocabulary],
//  original: {test: {values, mean, std}, [validation]}, settings: [{method, keep_ratio, common,
//  rare, k, k_candidates, k_chosen_by, test, [validation], per_k: [...]}], training: [...]}.
nlohmann::ordered_json protocol_json(const ClassifierProtocolResult& r);
// {values, mean, std} of one list of trial scores.
nlohmann::ordered_json trial_scores_json(const std::vector<double>& values);

} // namespace embedlab
