// Zero-shot tasks scored by log-likelihood as lm-evaluation-harness scores them,
// and STS-B by the similarity of mean-pooled hidden states.
//
//   auto lm = embedlab::load_model("models/tinyllama");
//   auto data = embedlab::read_task_data("sst2", "glue/SST-2/dev.tsv", {.limit = 100});
//   embedlab::TaskResult r = embedlab::evaluate_task(*lm.model, *lm.tokenizer, data);
//   // r.accuracy, r.accuracy_norm, r.examples[i].choice, r.examples[i].loglik
//
// Scoring a choice (the harness's loglikelihood request): trailing spaces of the
// context move to the front of the continuation; whole = encode(context +
// continuation), context_ids = encode(context), continuation_ids =
// whole[len(context_ids):]; the model reads (context_ids + continuation_ids)
// without its last token, cut from the left to the model's context; the score is
// the summed log-probability of continuation_ids (log-softmax in float64). acc
// takes the best score; acc_norm the best score per character (code point) of
// the continuation. No BOS is added (the perplexity protocol's convention).
//
// STS-B: each sentence is encoded alone (no BOS), run through the model, and its
// final hidden states (after the final norm: the output head's input) are
// averaged over its tokens; a pair's similarity is the cosine of the two means.
// Reported: Spearman's rank correlation (average ranks for ties) and Pearson's
// correlation of those cosines with the gold scores. Encoders: each sentence is
// framed [CLS] .. [SEP] and pooled the model's own way (encoder.hpp); a sequence
// classifier with one label (STS-B's regression head) scores each pair framed
// [CLS] a [SEP] b [SEP] itself, and that score replaces the cosine.
//
// Sequence classifiers (encoder_head Classification) answer sst2 and GLUE's other
// classification tasks with their head (pairs framed [CLS] a [SEP] b [SEP]):
// each sentence framed [CLS] .. [SEP], the class with the highest logit, the
// model's id2label matched to the task's labels by name (or LABEL_i by position);
// loglik holds the log-softmax of the matched classes. Other encoders refuse
// sst2 and mc (they give no next-token log-likelihood).
//
// Thread safety: reentrant; the progress callback runs on the calling thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"
#include "embedlab/task_names.hpp"
#include "embedlab/tokenizer.hpp"

namespace embedlab {

struct TaskExample {
    std::string context;
    std::vector<std::string> continuations; // delimiter included: " negative", " positive"
    int64_t label = 0;                      // index into continuations
    std::string text;      // the dataset's own text (sst2: the sentence; mc: context and choices)
    std::string text_pair; // a pair task's second text (mrpc, qqp, mnli, qnli, rte, wnli); else empty
};

struct TaskData {
    std::string task;   // "sst2", "mc", or a GLUE classification task (is_classification_task)
    std::string source; // the file read
    std::vector<TaskExample> examples;
};

struct TaskReadOptions {
    int64_t limit = 0; // first N examples; 0: all
};

// "sst2": a GLUE SST-2 TSV whose header names a `sentence` (or `text`) and a
// `label` column (0 negative, 1 positive); context "{sentence}\nQuestion: Is this
// sentence positive or negative?\nAnswer:", continuations " negative", " positive".
// "mc": JSONL, one {"context": "...", "choices": ["...", ...], "label": i} per line
// (PIQA, ARC, HellaSwag in this shape); continuations " " + choice.
// GLUE's other classification tasks, from their own TSV layouts (columns found by
// the header's names; tabs only, no quoting): cola (no header: source, label,
// original label, sentence; a header naming sentence and label is read too), mrpc
// (#1 String, #2 String, Quality), qqp (question1, question2, is_duplicate), mnli
// and mnli-mm (sentence1, sentence2, gold_label), qnli (question, sentence, label),
// rte and wnli (sentence1, sentence2, label). Labels in the Hugging Face datasets'
// order, as continuations " name": cola unacceptable/acceptable, mrpc
// not_equivalent/equivalent, qqp not_duplicate/duplicate, mnli entailment/neutral/
// contradiction, qnli and rte entailment/not_entailment, wnli not_entailment/
// entailment; numeric labels (cola, mrpc, qqp, wnli) index that list, named ones
// (mnli, qnli, rte) must be one of it. No context: only a classifier's head reads them.
// InputError naming the file and the line for a missing column, an empty file, a
// label outside the choices, a malformed line.
TaskData read_task_data(const std::string& task, const std::filesystem::path& file,
                        const TaskReadOptions& options = {});

// Each example's own text, as the LLE paper counts coverage per example (Tables 5
// and 6): sst2 the sentence, mc the context and its choices, stsb both sentences,
// space-joined. InputError as read_task_data / read_sentence_pairs.
std::vector<std::string> task_texts(const std::string& task, const std::filesystem::path& file,
                                    const TaskReadOptions& options = {});

struct TaskExampleResult {
    int64_t label = 0;
    int64_t choice = 0;      // argmax of loglik
    int64_t choice_norm = 0; // argmax of loglik / continuation characters
    std::vector<double> loglik;
    std::vector<int64_t> continuation_tokens;
    // Per choice: every continuation token is the model's argmax at its position (the
    // harness's is_greedy, as its loglikelihood request returns it).
    std::vector<bool> greedy;
    bool truncated = false; // the context was cut from the left to fit
};

struct TaskResult {
    std::string task;
    int64_t n = 0;
    double accuracy = 0;
    double accuracy_norm = 0;
    // GLUE's own metric beside accuracy: cola Matthews' correlation, mrpc and qqp the F1
    // of label 1 (0 when undefined, as scikit-learn); NaN for other tasks.
    double mcc = std::numeric_limits<double>::quiet_NaN();
    double f1 = std::numeric_limits<double>::quiet_NaN();
    std::vector<TaskExampleResult> examples;
    double seconds = 0;
    std::string protocol; // how it was scored, in words (task_json's "protocol")
};

// InputError for an example whose context encodes to nothing or whose
// continuation does not fit the model's context. progress(examples done, total).
TaskResult evaluate_task(const LanguageModel& model, const Tokenizer& tokenizer, const TaskData& data,
                         const ProgressFn& progress = {});

// {task, n, accuracy, accuracy_norm, [mcc], [f1], metric, metric_value, seconds, protocol}:
// what `task --json` says; metric names GLUE's headline (mcc, f1 or accuracy).
nlohmann::ordered_json task_json(const TaskResult& r);

// Share of examples on which two runs of the same data chose the same continuation.
double choice_agreement(const TaskResult& a, const TaskResult& b);

struct SentencePair {
    std::string first, second;
    double score = 0; // gold similarity (STS-B: 0 to 5)
};

// A GLUE STS-B TSV (header with sentence1, sentence2, score).
std::vector<SentencePair> read_sentence_pairs(const std::filesystem::path& file,
                                              const TaskReadOptions& options = {});

struct SimilarityResult {
    int64_t n = 0;
    double spearman = 0;
    double pearson = 0;
    std::vector<double> cosines; // per pair, in file order (a regression head: its scores)
    double seconds = 0;
    std::string protocol;     // how the sentences were pooled, in words
    torch::Tensor embeddings; // [2 n, d] float64 pooled sentences: every first sentence, then every second
};

// Retrieval agreement of two embeddings of the same sentences (rows): for each row,
// the share of its k nearest other rows by cosine that both give, averaged over rows
// (1: the same neighbours). InputError for different row counts or k >= rows.
double retrieval_agreement(const torch::Tensor& a, const torch::Tensor& b, int64_t k = 10);

SimilarityResult evaluate_similarity(const LanguageModel& model, const Tokenizer& tokenizer,
                                     const std::vector<SentencePair>& pairs, const ProgressFn& progress = {});

// {task: "stsb", n, spearman, pearson, seconds, protocol}: what `task stsb --json` says.
nlohmann::ordered_json similarity_json(const SimilarityResult& r);

// Spearman's rank correlation (average ranks for ties); 0 when either side is constant.
double spearman_correlation(const std::vector<double>& x, const std::vector<double>& y);
double pearson_correlation(const std::vector<double>& x, const std::vector<double>& y);

} // namespace embedlab
