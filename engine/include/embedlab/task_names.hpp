// The tasks EmbedLab scores, by name (torch-free: request validation and the parsers'
// target use it; tasks.hpp reads and evaluates them).
//
//   if (!embedlab::is_known_task(name)) throw InputError("tasks: " + std::string(embedlab::task_names));
//
// Thread safety: constant data and pure functions.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

namespace embedlab {

// The tasks read_task_data knows, for messages and usage lines.
inline constexpr const char* task_names = "sst2, mc, stsb, cola, mrpc, qqp, mnli, mnli-mm, qnli, rte, wnli";

// GLUE's labelled classification tasks: sst2, cola, mrpc, qqp, mnli (dev_matched),
// mnli-mm (dev_mismatched), qnli, rte, wnli. A sequence classifier answers them with its
// head; only sst2 is also scored zero-shot by a decoder's log-likelihood.
inline bool is_classification_task(std::string_view task)
{
    constexpr std::array<std::string_view, 9> names{"sst2",    "cola", "mrpc", "qqp", "mnli",
                                                    "mnli-mm", "qnli", "rte",  "wnli"};
    return std::find(names.begin(), names.end(), task) != names.end();
}

// Whether read_task_data, read_sentence_pairs (stsb) or task_texts know `task`.
inline bool is_known_task(std::string_view task)
{
    return is_classification_task(task) || task == "mc" || task == "stsb";
}

} // namespace embedlab
