// The engine computations behind the workbench's views, as plain data (no
// libtorch, no Qt in this header). Each call loads the model it is given and
// runs synchronously with a progress callback; errors are thrown as
// embedlab::InputError with the engine's message.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/layout_2d.hpp"
#include "embedlab/results.hpp"

namespace embedlab::app {

// The token embedding's covariance spectrum and what PCA costs at each rank.
struct SpectrumResult {
    std::vector<double> eigenvalues, explained; // descending; cumulative share at k = 1..d
    std::vector<double> params_at_rank, flops_at_rank;
    double original_params = 0; // V d
};
SpectrumResult embedding_spectrum(const std::string& model, const ProgressFn& progress);

// FLAT-LLM importance on a calibration text and IPRS allocations at remaining
// ratios 0.1, 0.15, .., 1.0.
struct AllocationResult {
    int64_t d_head = 0;
    std::vector<double> scores;
    struct Allocation {
        double remaining = 0;
        std::vector<double> w;
        std::vector<int64_t> ranks;
    };
    std::vector<Allocation> allocations;
    double calibration_seconds = 0;
    // Per-head value spectra (METHODS 3): [layer * kv_heads + head], the
    // eigenvalues of C_h = sum Y_h^T Y_h over the calibration, descending, d_head each.
    int64_t kv_heads = 0;
    std::vector<std::vector<double>> head_spectra;
};
AllocationResult importance_allocations(const std::string& model, const std::string& text, int64_t samples,
                                        int64_t seqlen, const ProgressFn& progress);

std::string default_sample_text();
// SST-2's GLUE dev set in the project's shared data ("" if not found): the method
// panel's and the demo's task. $EMBEDLAB_SHARED_DIR/data/glue/SST-2/dev.tsv, else
// ../shared beside the checkout (resources/../../shared).
std::string sst2_dev_path();

// One compression of the model, evaluated on a text: what the results table and
// Pareto plot show (METHODS 0: ratio = after / before of the part compressed,
// delta ln PPL = ln PPL_compressed - ln PPL_original). The request is the
// engine's (experiment_request.hpp), complete on its own: model, method and its
// fields, the texts (the method panel fills the bundled sample text's path in for
// an empty text box), eval_text and eval_tokens; it is checked with
// embedlab::check_request and named with embedlab::describe_request.
//
// Where a request runs is not part of it: this computer, an ssh host (remote.hpp;
// the host runs `embedlab-cli worker`), or a Slurm cluster whose login node this is.
struct RunTarget {
    // An ssh host ("": this computer) with an optional ssh config file, the worker
    // on the host ("": embedlab-cli on its PATH) and its cache directory ("":
    // ~/.cache/embedlab), as remote run's --remote-cli / --remote-dir.
    std::string host, ssh_config, remote_cli, remote_dir;
    // Or a Slurm cluster: one job array task with these sbatch options ("": the
    // cluster's defaults), as sweep --slurm runs them.
    bool slurm = false;
    std::string slurm_partition, slurm_time;
    int slurm_array_limit = 0;

    bool local() const { return !slurm && host.empty(); }
};
// The target as JSON (fields that differ from the defaults; {} for this computer)
// and back (InputError naming a mistyped field), for sessions and settings.
nlohmann::ordered_json target_json(const RunTarget& target);
RunTarget target_from_json(const nlohmann::ordered_json& json);

// A request and its target in a few words, for the job list and the demo's
// progress lines: describe_request's, plus " on HOST" or " on Slurm".
std::string describe_run(const CompressionRequest& request, const RunTarget& target = {});
// embedlab::request_from_json for a request stored without a model (the method
// panel's choice in settings and sessions: the model is the window's): "model"
// may be missing or empty, and stays empty. The same checks and InputErrors.
CompressionRequest stored_request_from_json(const nlohmann::ordered_json& json);

// What a job is doing beyond its progress ("Slurm 12: pending"), for the job list.
using StatusFn = std::function<void(const std::string& status)>;
// Runs `request` on `target`: locally run_compression (experiment.hpp), remotely
// the same "compress" job. The row is the engine's summary of the run (results.hpp): an
// encoder with a masked-LM head and an evaluation text has its pseudo-perplexity there.
RunSummary compress_and_evaluate(const CompressionRequest& request, const RunTarget& target = {},
                                 const ProgressFn& progress = {}, const StatusFn& status = {});

// A chain (pipeline_request.hpp, issue 60: trim, then one method, then its store) as one job,
// from its JSON request (the method panel's chainJson() with the model filled in), checked
// first as the CLI's --then checks it (check_trim_options, check_pipeline_request against the
// model's config: InputError before any work). Locally run_pipeline with no output (the record
// only); on an ssh host the same "compress" job with its "pipeline" list (the runner uploads
// the files its steps name); on Slurm a one-task array. The row is the chain's (method
// "chain" after trim, parameters its label: "trim 0.999 → pca rank 32 → q8_0").
RunSummary compress_chain_and_evaluate(const nlohmann::ordered_json& pipeline, const RunTarget& target = {},
                                       const ProgressFn& progress = {}, const StatusFn& status = {});
// The checks alone (what compress_chain_and_evaluate does first), for a refusal before queueing.
void check_chain(const nlohmann::ordered_json& pipeline);

// Writes the compressed model of `request` (what a results row ran, locally) to
// `out_dir` in the CLI's `compress` layout (config, tokenizer, model.safetensors
// with the factors, embedlab.json); with `dense` also out_dir/dense/, a plain Hugging
// Face directory with the reconstructed table. A row still in memory is written as
// it is; an older one is fitted again (every method is seeded). Written through the
// engine's AtomicDirectory: an error or a cancel (progress returning false, up to
// the last moment) leaves no directory, or the previous one when replacing. An
// existing out_dir is an InputError unless `overwrite` and it holds an embedlab.json
// (so only a model is ever replaced). Returns the method and parameters written,
// e.g. "pca rank 16".
std::string export_compressed(const CompressionRequest& request, const std::string& out_dir, bool dense,
                              bool overwrite, const ProgressFn& progress);
// A chain's row exported (issue 60): its pipeline request (compress_chain_and_evaluate's) run
// again here into `out_dir` (every step is seeded), as `embedlab-cli compress ... --then` writes
// it: run_pipeline's checks first (an existing out_dir as export_compressed), the output only
// once every step finished (a cancel leaves none, or the previous one). Returns the chain's label.
std::string export_chain(const nlohmann::ordered_json& pipeline, const std::string& out_dir, bool dense,
                         bool overwrite, const ProgressFn& progress);

// Writes bytes to `path` through the engine's atomic file output (temp + rename).
void write_file(const std::string& path, const std::string& bytes);

// TT candidates for the embedding (METHODS 5): every 2- and 3-factor shape of d
// (at most `max_shapes`), each fitted at every eps, with the energy model of the
// original table, the TT and the equal-size SVD. A table of more than `max_rows`
// rows (0: no limit) is fitted on `max_rows` evenly spaced rows: every token's TT
// is fitted on its own, so the sample's error and cosine estimate the table's, and
// the counts are the sample's per-token ranks spread over all V tokens (each token
// takes its nearest sampled row's ranks). 16,384 rows keep a 150k vocabulary's
// candidates at seconds instead of minutes.
struct TensorTrainCandidate {
    std::vector<int64_t> shape, ranks; // ranks: the cores' (each position's largest)
    std::vector<double> mean_ranks;    // r_1..r_{N-1} averaged over tokens (each keeps its own)
    double eps = 0, ratio = 0, relative_error = 0, mean_cosine = 0;
    int64_t params_after = 0, svd_rank = 0;
    double energy_original = 0, energy_tt = 0, energy_svd = 0; // nu + tau terms, eqs. 2-5 (nu 5, tau 1)
    // The same model's counts, so a view can re-weigh them: energy = nu * accesses + tau * operations.
    double accesses_original = 0, accesses_tt = 0, accesses_svd = 0;
    double operations_original = 0, operations_tt = 0, operations_svd = 0;
};
struct TensorTrainResult {
    int64_t vocab = 0, dim = 0;
    int64_t fitted_rows = 0; // == vocab unless the candidates are estimates from a sample
    std::vector<TensorTrainCandidate> candidates;
    int64_t chosen = -1; // the candidate of `chosen_eps` at the balanced shape (-1: none asked)
};
inline constexpr int64_t kTensorTrainCandidateRows = 16384;
// chosen_eps > 0 (the method panel's tt eps): that eps joins the grid, the balanced
// shape (tt's when a request gives none) the shapes, and `chosen` names their candidate.
TensorTrainResult tensor_train_candidates(const std::string& model, const std::vector<double>& eps,
                                          int max_shapes, const ProgressFn& progress,
                                          int64_t max_rows = kTensorTrainCandidateRows,
                                          double chosen_eps = 0);

// The default base.method picks from this model's table (picks_default_from_table,
// default_from_table in table_method.hpp: tt's eps), or nullopt when the method picks
// none or the model's table is already compressed.
std::optional<TableDefault> table_default(const std::string& model, const CompressionRequest& base,
                                          const ProgressFn& progress);

// The Fourier token map (METHODS 4) for ids [first, end): the features T, the
// original rows of a dense model and, when `model` is a fourier directory or
// `fourier_dir` names one, MLP(T) and E. Matrices are row-major [end - first, d].
struct FourierMapResult {
    int64_t vocab = 0, dim = 0, first = 0, end = 0;
    struct Matrix {
        std::string name;
        std::vector<double> values, neighbour; // neighbour: cosine of rows p, p+1
    };
    std::vector<Matrix> matrices;
    std::vector<std::string> tokens;
    std::string note;
};
FourierMapResult fourier_map(const std::string& model, const std::string& fourier_dir, int64_t first,
                             int64_t end, const ProgressFn& progress);

// The LLE neighbour graph (METHODS 2): common/rare split from a frequency text,
// every row projected on the table's first two principal components, and for
// each rare token its k common neighbours, LLE weights and reconstruction cosine.
struct NeighbourGraphResult {
    int64_t vocab = 0, k = 0;
    double keep_ratio = 0;
    std::vector<double> x, y;             // all V rows, PC 1 and 2
    std::vector<int64_t> common, rare;    // ids
    std::vector<int64_t> neighbours;      // [rare, k] common ids, best first
    std::vector<double> weights;          // [rare, k] LLE alpha
    std::vector<double> neighbour_cosine; // [rare, k] cos(rare row, neighbour row)
    std::vector<double> cosine;           // [rare] cosine of rebuilt to original row
    std::vector<double> histogram;        // counts of `cosine` in 40 bins over [hist_lo, 1]
    double hist_lo = 0;
    std::vector<std::string> tokens; // V texts (empty without a tokenizer)
    std::vector<double> frequency;   // [V] occurrences in the frequency text
};
NeighbourGraphResult neighbour_graph(const std::string& model, const std::string& text, double keep_ratio,
                                     int64_t k, const ProgressFn& progress);
// The same table's t-SNE map (layout_2d.hpp): every row, a random sample of
// options.sample rows laid out on their first options.pca_dims principal components.
TsneResult neighbour_layout(const std::string& model, const TsneOptions& options, const ProgressFn& progress);

} // namespace embedlab::app
