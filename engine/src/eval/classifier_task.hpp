// A sequence classifier on a labelled GLUE task (sst2, cola, mrpc, ...): the class its
// head picks for each example's own text (or pair), against the dataset's label
// (tasks.hpp), with cola's Matthews correlation and mrpc's and qqp's F1.
#pragma once

#include "embedlab/tasks.hpp"

namespace embedlab::detail {

// The model's label ids for the dataset's labels 0..n-1: by name when the model's
// id2label names them as the dataset does (sst2: negative, positive; any case),
// else by position when the model's labels are the default LABEL_i; InputError
// when the counts differ or the names do not match.
std::vector<int64_t> classifier_label_map(const ModelConfig& config, const TaskData& data);

// Matthews' correlation of a 2 x 2 confusion matrix (label 1 positive); 0 when a
// row or column is empty, as scikit-learn's matthews_corrcoef.
double binary_mcc(int64_t tp, int64_t fp, int64_t fn, int64_t tn);

// F1 of label 1: 2 tp / (2 tp + fp + fn); 0 when tp is 0 (scikit-learn's zero_division).
double binary_f1(int64_t tp, int64_t fp, int64_t fn);

// GLUE's headline metric of a result: "mcc" (cola), "f1" (mrpc, qqp; accuracy beside it),
// else "accuracy"; task_json's and the compress manifest's "metric".
const char* headline_metric(const TaskResult& r);
double headline_value(const TaskResult& r);

TaskResult evaluate_classifier_task(const LanguageModel& model, const Tokenizer& tokenizer,
                                    const TaskData& data, const ProgressFn& progress);

} // namespace embedlab::detail
