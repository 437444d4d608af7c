// The engine computations behind the workbench's views, as plain data (no
// libtorch, no Qt in this header). Each call loads the model it is given and
// runs synchronously with a progress callback; errors are thrown as
// embedlab::InputError with the engine's message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
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
// delta ln PPL = ln PPL_compressed - ln PPL_original).
struct CompressionRequest {
    // Token embedding: "pca", "svd", "tt", "lle", "fourier"; attention values: "flat".
    std::string method;
    int64_t rank = 0; // pca, svd: 1..d
    double eps = 0;   // tt: accuracy in (0, 1); the shape is the most balanced 3-factor one of d
    // lle (METHODS 2): the keep_ratio most frequent tokens of the frequency text
    // stay as rows; every other row is rebuilt from its k nearest common rows.
    double keep_ratio = 0.5;
    int64_t k = 8;
    // fourier (METHODS 4): "linear" or "geglu" MLP, fitted by `steps` AdamW steps.
    std::string mlp = "linear";
    int64_t steps = 300;
    // flat (METHODS 3): average remaining value rank ratio in (0, 1], "iprs" or
    // "uniform" allocation, calibration windows on the calibration text.
    double remaining = 0.5;
    // Or (> 0): the share of the decoder's weights to keep (remaining_for_target), with
    // the MLPs compressed too unless no_mlp, as `compress --target-ratio` (issue 36).
    double target_ratio = 0;
    bool no_mlp = false;
    std::string allocation = "iprs";
    int64_t samples = 32, seqlen = 128;
    // LoRA recovery (METHODS 1) of a compressed embedding: adapters of rank
    // lora_rank trained for lora_steps on the training text (0: off). When the
    // training text is the evaluation text, training uses only the ids after
    // the evaluated ones, so no evaluated token is trained on.
    int64_t lora_rank = 0, lora_steps = 100;
    // Texts; empty means the bundled sample text (default_sample_text()).
    std::string frequency_text, calibration_text, train_text;
    // Perplexity on the evaluation text's first `eval_tokens` ids (0: all). The tied
    // head of a 50k vocabulary makes every token cost V d multiply-adds; the original
    // model's perplexity is computed once per model, text, length and host.
    int64_t eval_tokens = 4096;
    // Also measure KL(P_original || P_compressed) and top-1 agreement on the same tokens.
    bool divergence = false;
    // A zero-shot task after the evaluation (tasks.hpp): "sst2" or "mc" ("": none), its
    // file, and its first task_limit examples (0: all); the original's accuracy beside it.
    std::string task, task_data;
    int64_t task_limit = 0;
    // For export_compressed: the text the row was evaluated on ("" = the bundled
    // sample text), which a LoRA row's retraining must leave out as the row did.
    // compress_and_evaluate takes its evaluation text as an argument instead.
    std::string eval_text;
    // Where it runs: empty for this computer, else an ssh host (remote.hpp; the
    // host runs `embedlab-cli worker`), with an optional ssh config file.
    std::string host, ssh_config;
    // The worker on the host ("": embedlab-cli on its PATH) and its cache
    // directory ("": ~/.cache/embedlab), as remote run's --remote-cli / --remote-dir.
    std::string remote_cli, remote_dir;
    // Or on a Slurm cluster (this machine a login node): one job array task, with
    // these sbatch options ("": the cluster's defaults), as sweep --slurm runs them.
    bool slurm = false;
    std::string slurm_partition, slurm_time;
    int slurm_array_limit = 0;
};
// A row of the results table: the engine's summary of a run (results.hpp).
using CompressionRun = embedlab::RunSummary;
// The request in a few words, e.g. "lle keep 0.5, k 8 + LoRA r 8, 100 steps on pi".
std::string describe_request(const CompressionRequest& request);
// Throws InputError naming the field for a request that cannot run (rank out of
// range, unknown method, remote with a method the worker does not run, ...);
// d is the model's hidden size. Cheap: the GUI checks before queueing.
void check_request(const CompressionRequest& request, int64_t d);
// What a job is doing beyond its progress ("Slurm 12: pending"), for the job list.
using StatusFn = std::function<void(const std::string& status)>;
CompressionRun compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                     const std::string& text, const ProgressFn& progress,
                                     const StatusFn& status = {});

// Writes the compressed model of `request` (what a results row ran) to `out_dir` in
// the CLI's `compress` layout (config, tokenizer, model.safetensors with the
// factors, embedlab.json); with `dense` also out_dir/dense/, a plain Hugging Face
// directory with the reconstructed table. The fit is recomputed: pca, svd and tt
// are deterministic. Written through the engine's AtomicDirectory: an error or a
// cancel (progress returning false, up to the last moment) leaves no directory,
// or the previous one when replacing. An existing out_dir is an InputError unless
// `overwrite` and it holds an embedlab.json (so only a model is ever replaced).
// Returns the method and parameters written, e.g. "pca rank 16".
std::string export_compressed(const std::string& model, const CompressionRequest& request,
                              const std::string& out_dir, bool dense, bool overwrite,
                              const ProgressFn& progress);

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
};
inline constexpr int64_t kTensorTrainCandidateRows = 16384;
TensorTrainResult tensor_train_candidates(const std::string& model, const std::vector<double>& eps,
                                          int max_shapes, const ProgressFn& progress,
                                          int64_t max_rows = kTensorTrainCandidateRows);

// A default eps for the method panel's tt that compresses this model's table: the
// smallest of 0.3, 0.4, .., 0.9 whose per-token TT (the balanced 3-factor shape,
// as a request without a shape gets) stores at most 0.9 of the values on an evenly
// spaced sample of at most 4096 rows (a margin for the full table); 0.9 when none
// does. eps 0.3, the old default, stored 1.4-1.6x tinygpt2's table.
struct TensorTrainDefault {
    bool applies = false; // false for a model whose table is already compressed
    double eps = 0.9;
    double sample_ratio = 0; // the ratio measured on the sample at that eps
    int64_t sample_rows = 0;
};
TensorTrainDefault compressing_tt_eps(const std::string& model, const ProgressFn& progress);

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
};
NeighbourGraphResult neighbour_graph(const std::string& model, const std::string& text, double keep_ratio,
                                     int64_t k, const ProgressFn& progress);

} // namespace embedlab::app
