// Results of compression runs as a table: one RunSummary per run (what the
// experiment API returns, what a worker job reports, what the workbench's table
// and Pareto plot show), the Pareto front, and the results files (CSV and JSON)
// that the workbench exports, the demo writes and `figure pareto` reads.
// Torch-free and Qt-free.
//
//   std::vector<embedlab::RunSummary> rows = ...;
//   write_file_atomic("results.csv", embedlab::results_csv(rows));
//   auto front = embedlab::pareto_front(rows);        // indices, by ascending ratio
//   auto back = embedlab::results_from_csv(text);     // NaN stays NaN
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedlab {

// One run (METHODS 0: ratio = after / before of the part compressed; delta ln PPL =
// ln PPL_compressed - ln PPL_original, TensorSLM eq. 12). Numbers that do not apply
// are NaN (JSON null, an empty CSV field).
struct RunSummary {
    std::string method, parameters; // parameters e.g. "rank 32", "shape 4x4x8, eps 0.3, ranks 1,4,6,1"
    std::string part; // "token_embedding" | "attention_values" | "attention_values_and_mlp" (flat with MLP)
    int64_t params_before = 0, params_after = 0;
    double ratio = 0, ppl_original = 0, ppl = 0, delta_ln_ppl = 0, mean_cosine = 0, seconds = 0;
    int64_t eval_tokens = 0; // scored tokens (0: no evaluation)
    std::string host;        // the machine that ran it
    std::string model;       // the model as given
    std::string eval_text;   // the evaluation text ("" without one; "eval_ids" for token ids)
    // Divergence from the original (request.divergence); NaN when not measured.
    double kl_mean = std::numeric_limits<double>::quiet_NaN();
    double top1_agreement = std::numeric_limits<double>::quiet_NaN();
    // The same per evaluation window (METHODS 0 windows, in order), for the per-window
    // plot; empty when not measured. In JSON as arrays, not in the CSV file.
    std::vector<double> window_kl, window_top1;
    // A zero-shot task (request.task, tasks.hpp): its name ("" none), accuracy on
    // task_n examples, and the original model's accuracy on the same examples.
    std::string task;
    double task_accuracy = std::numeric_limits<double>::quiet_NaN();
    double task_accuracy_original = std::numeric_limits<double>::quiet_NaN();
    int64_t task_n = 0;
    // The compressed part's bytes as stored, before and after (accounting.storage; issue
    // 38: what a quantised baseline is compared at); NaN when the input's storage is not
    // known (a Hugging Face model of mixed dtypes) or the part is flat's.
    double bytes_before = std::numeric_limits<double>::quiet_NaN();
    double bytes_after = std::numeric_limits<double>::quiet_NaN();
    // The whole model's weights as stored, before and after: the input's bytes with the
    // compressed part's replaced (NaN as above).
    double model_bytes_before = std::numeric_limits<double>::quiet_NaN();
    double model_bytes_after = std::numeric_limits<double>::quiet_NaN();
    // Bits per byte of the evaluation, compressed and original (issue 60: comparable
    // across tokenizations, unlike perplexity); NaN without a tokenizer or evaluation.
    double bits_per_byte = std::numeric_limits<double>::quiet_NaN();
    double bits_per_byte_original = std::numeric_limits<double>::quiet_NaN();
};
nlohmann::ordered_json summary_json(const RunSummary& s);
RunSummary summary_from_json(const nlohmann::ordered_json& j); // InputError naming a missing field

// The rows no other row dominates (a row dominates another when its ratio and
// delta ln PPL are both no larger and one is smaller; lower is better for both),
// by ascending ratio, then delta ln PPL, then index. Exact duplicates are all on
// the front. Rows whose ratio, ppl or delta ln PPL is not finite are left out.
std::vector<int> pareto_front(const std::vector<RunSummary>& rows);
// One front per group of rows that may be compared: the same model, compressed
// part (a flat run's ratio is of the attention values, not of the embedding) and
// evaluation text. Groups in order of their first row; each as pareto_front
// orders it, with indices into `rows`.
struct ParetoGroup {
    std::string model, part, eval_text;
    std::vector<int> rows;  // every row of the group
    std::vector<int> front; // its Pareto front
};
std::vector<ParetoGroup> pareto_fronts(const std::vector<RunSummary>& rows);

// The results files. CSV columns: method, parameters, params (stored values after),
// ratio, ppl, delta_ln_ppl, cosine, seconds, host, then part, params_before,
// ppl_original, eval_tokens, model, eval_text, kl_mean, top1_agreement, task, task_accuracy,
// task_accuracy_original, task_n (RFC 4180 quoting). JSON: {"results": [{the same keys, and
// window_kl, window_top1 when measured}]}. Numbers at full precision.
std::string results_csv(const std::vector<RunSummary>& rows);
std::string results_json(const std::vector<RunSummary>& rows);
// Inverses; files with only the first nine, fifteen or seventeen columns (older exports) read too.
// InputError for text that is not such a file.
std::vector<RunSummary> results_from_csv(const std::string& csv);

// RFC 4180 records (quoted fields may hold commas, doubled quotes and newlines):
// what results_from_csv reads, for any CSV the project writes.
std::vector<std::vector<std::string>> csv_records(const std::string& csv);
std::vector<RunSummary> results_from_json(const std::string& json);

} // namespace embedlab
