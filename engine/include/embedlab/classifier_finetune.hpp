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
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/finetune.hpp"
#include "embedlab/model.hpp"
#include "embedlab/tasks.hpp"

namespace embedlab {

struct LabelledTexts {
    std::vector<std::string> texts;
    std::vector<std::string> pairs;       // a pair task's second texts (as many as texts); else empty
    std::vector<int64_t> labels;          // index into label_names
    std::vector<std::string> label_names; // sst2: negative, positive; regression: LABEL_0
    std::vector<double> targets;          // regression (stsb): the gold score per text; else empty
    std::string source;
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

} // namespace embedlab
