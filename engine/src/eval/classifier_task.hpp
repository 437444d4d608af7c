// A sequence classifier on a labelled task (sst2): the class its head picks for
// each example's own text, against the dataset's label (tasks.hpp).
#pragma once

#include "embedlab/tasks.hpp"

namespace embedlab::detail {

// The model's label ids for the dataset's labels 0..n-1: by name when the model's
// id2label names them as the dataset does (sst2: negative, positive; any case),
// else by position when the model's labels are the default LABEL_i; InputError
// when the counts differ or the names do not match.
std::vector<int64_t> classifier_label_map(const ModelConfig& config, const TaskData& data);

TaskResult evaluate_classifier_task(const LanguageModel& model, const Tokenizer& tokenizer,
                                    const TaskData& data, const ProgressFn& progress);

} // namespace embedlab::detail
