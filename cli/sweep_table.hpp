// The rows of `sweep`, local or through Slurm: each row is read from a run's
// record (experiment.hpp run_json, which a worker's compress result carries), so
// both print the same table and JSON from the same fields.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "args.hpp"
#include "common.hpp"
#include "embedlab/slurm.hpp"

namespace embedlab::cli {

// params, ratio, explained variance, cosines, ppl, delta ln PPL, fit seconds,
// lle coverage, KL / top-1, from a run record. A member the record lacks is null in
// the row; a mistyped one throws nlohmann::json::exception.
Json sweep_row(const Json& record);
// InputError "record gives no number for the column ppl (null)" and the like when a
// row (from a record read from a file) lacks what sweep_print_row prints.
void check_sweep_row(const Json& row);
// A run's divergence (kl_mean, top1_agreement) and task columns, from its evaluation
// block, into `row` (every sweep's rows, flat's too).
void sweep_evaluation_columns(const Json& evaluation, Json& row);
// "pca rank 16", "tt shape 4x4x8, ranks 1,4,4,1", "lle keep 0.5, k 8, 1234 rare": the
// method and its TableMethod::parameters, which sweep_row keeps as "setting".
std::string sweep_setting(const Json& row);

// Prints the table header, a row, and the closing "original" line; or, with
// `json`, nothing until sweep_print_json.
void sweep_print_header();
void sweep_print_row(const Json& row, const std::string& suffix = "");
// The sweep's JSON: model, method, evaluation text and its baseline, rows.
Json sweep_json(const std::string& model, const Json& first_record, const Json& rows);
void sweep_print_original(const Json& sweep);

// Slurm (command_sweep_slurm.cpp). The options `--slurm` takes, with values.
const std::set<std::string>& slurm_valued_options();
SlurmOptions slurm_options(const Args& args);
// --sweep-dir, or ./embedlab-sweep-<date>-<time>; absolute.
std::filesystem::path sweep_dir_option(const Args& args);
// Polls until nothing is pending or running, a line on stderr at each change;
// Ctrl-C cancels the arrays (scancel) and returns false.
bool follow_slurm_sweep(const std::filesystem::path& dir, bool quiet, std::vector<SlurmTask>& tasks);

// Writes `jobs` into the sweep directory, submits them as one array, and (unless
// --no-wait: the directory is printed) follows them to the end and calls finish.
int run_on_slurm(
    const Args& args, const std::vector<Json>& jobs, const Json& info, const std::string& label,
    const std::function<int(const std::filesystem::path& dir, const std::vector<SlurmTask>& tasks)>& finish);

// sweep ... --slurm: one worker job per request as a Slurm job array (slurm.hpp).
int sweep_on_slurm(const Args& args, const std::vector<CompressionRequest>& requests,
                   const std::string& model);

} // namespace embedlab::cli
