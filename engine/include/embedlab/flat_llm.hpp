// FLAT-LLM (METHODS.md 3): calibrate on a text, score each decoder layer's
// importance, allocate value ranks with IPRS, and absorb head-wise PCA bases
// of the value outputs into W_v / W_o (optionally Nystrom-compress the MLPs).
//
//   auto lm = embedlab::load_model("models/tinyllama");
//   auto ids = lm.tokenizer->encode(text);
//   auto cal = embedlab::calibrate(*lm.model, ids, {.samples = 64, .seqlen = 128});
//   auto flat = embedlab::flat_compress(*lm.model, cal, {.remaining = 0.5});
//   flat.model->logits(window);            // runs with narrowed value heads
//
// Calibration memory does not grow with the number of samples: covariances
// are summed in float64 window batch by window batch. Nor does it grow with the
// number of layers for the MLP (issue 20 item 7: 31 GB of d_int x d_int float64
// for Llama-2-7B): when every layer's MLP covariance would exceed
// CalibrationOptions::mlp_covariance_budget, calibrate() collects none of them and
// flat_compress() sums them group of layers by group (as many layers as fit the
// budget, at least one), consuming each group before the next, with one more
// forward pass over the calibration windows per group.
// Thread safety: reentrant; calibrate() runs forward passes, which already use
// every core, so run one at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct CalibrationOptions {
    int64_t samples = 64; // windows
    int64_t seqlen = 128; // tokens per window
    uint64_t seed = 0;
    bool mlp = false;  // also collect the MLP down-projection covariance (Nystrom)
    int64_t batch = 8; // windows per forward pass
    // Bytes of float64 MLP covariance (sum of d_int^2 * 8 over the layers) held at
    // once. Models within it (gpt2: 0.9 GB, SmolLM2-360M: 1.7 GB, every bundled
    // model) get them all from the one calibration pass, as before; larger ones
    // (Llama-2-7B: 0.97 GB per layer) pay one forward pass per group of layers in
    // flat_compress instead of the memory. Positive; below one layer: one layer.
    int64_t mlp_covariance_budget = int64_t{2} << 30;
};

// `samples` distinct window starts in [0, n_tokens - seqlen], drawn uniformly
// with a seeded mt19937_64 (the same on every platform), ascending. Throws
// InputError when the text cannot give that many windows.
std::vector<int64_t> calibration_window_starts(int64_t n_tokens, int64_t samples, int64_t seqlen,
                                               uint64_t seed);

struct LayerCalibration {
    double importance = 0;                       // mean arccos(clamp(cos(x_in, x_out), 0, 1)) / pi
    double importance_eq9 = 0;                   // the paper's eq. 9: arccos(mean clamped cosine) / pi
    int64_t nan_cosines = 0;                     // tokens whose cosine was NaN (counted as cosine 0.5)
    std::vector<torch::Tensor> value_covariance; // per KV head, [vd, vd] float64, sum Y^T Y
    torch::Tensor mlp_covariance; // [f, f] float64, sum a^T a (options.mlp, within the budget; else
                                  // undefined and flat_compress collects it from `windows`)
};

struct Calibration {
    CalibrationOptions options;
    std::vector<int64_t> starts;
    torch::Tensor windows; // [samples, seqlen] int64 token ids, for the MLP passes of flat_compress
    int64_t tokens = 0;    // samples * seqlen
    double seconds = 0;
    std::vector<LayerCalibration> layers;
    std::vector<double> scores() const; // importance per layer
};

// The longest calibration window: learned positions, or the trained context.
int64_t calibration_context(const LanguageModel& model);

// Throws InputError for a seqlen beyond the model's context, too short a text,
// a budget that is not positive, or a model without per-head value projections
// in the expected layout.
Calibration calibrate(const LanguageModel& model, const std::vector<int32_t>& ids,
                      const CalibrationOptions& options, const ProgressFn& progress = {});

// Algorithm 1 (IPRS): w in [0,1]^L with sum w = L * remaining, proportional to
// the scores where not clipped at 1. All-zero scores share the budget equally.
// remaining in (0, 1]; scores finite and >= 0.
std::vector<double> iprs_allocation(const std::vector<double>& scores, double remaining);
// The paper's ablation: w_l = remaining in every layer.
std::vector<double> uniform_allocation(size_t layers, double remaining);
// The reference's compute_rank.py conversion from a whole-decoder target (the
// share of the decoder's projection weights kept: Q, K, V, O and the MLP
// matrices) to the average remaining rank ratio r of the parts FLAT-LLM narrows:
// V and O, and the MLP when `mlp` (Q and K are never compressed):
//   r = (target (P_qk + P_vo + P_mlp) - P_qk [- P_mlp without mlp]) / (P_vo [+ P_mlp]).
// InputError naming the reachable targets when r falls outside (0, 1].
double remaining_for_target(const ModelConfig& config, double target, bool mlp);
// r_l = max(1, floor(w_l * d)).
std::vector<int64_t> ranks_from_ratios(const std::vector<double>& w, int64_t d);

// Descending eigenpairs of a symmetric covariance [n, n] (float64 LAPACK).
struct EigenBasis {
    torch::Tensor eigenvalues;  // [n] float64, descending
    torch::Tensor eigenvectors; // [n, n] float64, column i pairs with eigenvalue i
};
EigenBasis eigen_basis(const torch::Tensor& covariance);

// The optional MLP step (METHODS 3): from the down-projection input covariance C
// [f, f], the m channels of largest ridge leverage diag(C (C + lambda I)^-1) and the
// Nystrom map C_SS^-1 C_S: [m, f] (float64). InputError naming `layer` when C_SS is
// singular or its condition number, from its eigenvalues, is kNystromMaxCondition
// or more: the solve would corrupt W_down.
constexpr double kNystromMaxCondition = 1e12;
struct MlpSelection {
    torch::Tensor keep;       // [m] int64, ascending channel ids
    torch::Tensor projection; // [m, f] float64: C_SS^-1 C_S:
    double leverage_kept = 1;
    double condition = 1; // of C_SS (1 when every channel is kept)
};
MlpSelection nystrom_selection(const torch::Tensor& C, int64_t m, double lambda, const std::string& layer,
                               int64_t tokens);

// Where each layer's covariances come from (issue 36 item 2). Sequential, as the
// reference's prune_flatllm: layer by layer, from a forward pass of the model whose
// earlier layers are already compressed (layers < l compressed, layer l itself not
// yet), so each layer is fitted to the inputs the compressed layers before it give.
// Parallel: every covariance from the one calibration pass over the uncompressed
// model (EmbedLab before issue 36). The importance scores, and so the ranks, come
// from the uncompressed pass either way. Sequential costs one forward pass per layer
// (layer 0's values come with the calibration), each through the layers up to it:
// about L / 2 times the calibration pass (L with FlatMlpCalibration::AfterAttention).
enum class FlatCalibration { Sequential, Parallel };
const char* flat_calibration_name(FlatCalibration c);            // "sequential" | "parallel"
FlatCalibration parse_flat_calibration(const std::string& name); // InputError otherwise

// Sequential calibration's MLP covariance of layer l (issue 62). Reference, as
// prune_flatllm: from the same pass as layer l's value covariances, layer l still
// uncompressed. AfterAttention (EmbedLab before issue 62): from a pass of its own
// after layer l's attention is narrowed, so the MLP is fitted to the inputs the
// narrowed attention gives it; one more pass per layer. Parallel ignores it.
enum class FlatMlpCalibration { Reference, AfterAttention };
const char* flat_mlp_calibration_name(FlatMlpCalibration c);            // "reference" | "after_attention"
FlatMlpCalibration parse_flat_mlp_calibration(const std::string& name); // InputError otherwise

enum class RankAllocation { IPRS, Uniform };
const char* rank_allocation_name(RankAllocation a);
RankAllocation parse_rank_allocation(const std::string& name); // "iprs" | "uniform"

struct FlatOptions {
    double remaining = 0.5; // average remaining rank ratio 1 - s, in (0, 1]
    RankAllocation allocation = RankAllocation::IPRS;
    bool mlp = false;        // Nystrom MLP compression (needs a calibration with mlp)
    double mlp_lambda = 1.0; // ridge of the leverage scores
    double target_ratio = 0; // recorded only: the decoder target `remaining` came from
    FlatCalibration calibration = FlatCalibration::Sequential;
    FlatMlpCalibration mlp_calibration = FlatMlpCalibration::Reference; // sequential, with mlp
};

struct FlatLayerReport {
    double importance = 0;
    double normalised = 0;    // importance / sum of importances
    double w = 0;             // remaining rank ratio
    int64_t rank = 0;         // value dimension kept per head
    double dropped_share = 0; // dropped eigenvalue energy / total, over the layer's heads
    std::vector<std::vector<double>> head_spectra; // per KV head, descending
    int64_t mlp_width = 0;                         // channels kept (= intermediate size without mlp)
    double mlp_leverage_kept = 1;                  // share of the ridge leverage the kept channels hold
};

struct FlatResult {
    FlatOptions options;
    std::vector<FlatLayerReport> layers;
    std::unique_ptr<LanguageModel> model; // the compressed model, ready to run
    ParameterBreakdown before, after;
    // With options.mlp: the forward passes over the calibration windows that summed
    // MLP covariances (1: all came with the calibration; more: groups within the
    // calibration's mlp_covariance_budget, each pass run by flat_compress; sequential:
    // one per layer, layer 0's the calibration's own when it holds it), and the most
    // float64 covariance bytes held at once. 0 without mlp.
    // Sequential calibration: the forward passes flat_compress ran (values and MLP), in
    // total: L - 1 (+1 for layer 0's MLP unless the calibration holds it), or
    // (L - 1) + L with FlatMlpCalibration::AfterAttention and mlp.
    int64_t mlp_calibration_passes = 0;
    int64_t mlp_covariance_peak_bytes = 0;
    int64_t sequential_passes = 0;
    double seconds = 0;
};

// `model` must be uncompressed in its attention (no value_head_dims yet), and
// the model the calibration ran on. progress(windows done, total) advances over
// the MLP covariance passes, when the calibration's budget calls for any (none
// otherwise); false cancels (Cancelled) between window batches.
FlatResult flat_compress(const LanguageModel& model, const Calibration& calibration,
                         const FlatOptions& options, const ProgressFn& progress = {});

// The parameters of the part FLAT-LLM compresses (METHODS 0: every ratio is of the
// part compressed): the value projections (weights, and their bias where the model
// has one) and the output projection weights; with `mlp` also the MLP's widening
// projections (up and gate, or gpt2's c_fc, with their biases) and the down
// projection's weight. The output and down biases are never changed, so not counted.
int64_t flat_compressed_params(const LanguageModel& model, bool mlp);

// JSON shared by the CLI and embedlab.json.
// {samples, seqlen, seed, tokens, seconds, nan_cosines (per layer)}
nlohmann::ordered_json calibration_json(const Calibration& calibration);
// Per layer: importance, normalised, w, rank, dropped_share, mlp_width,
// mlp_leverage_kept, head_spectra (with_spectra).
nlohmann::ordered_json flat_layers_json(const FlatResult& result, bool with_spectra = true);
// {before, after, ratio, attention_before, attention_after, mlp_before, mlp_after,
//  decoder_before, decoder_after, decoder_ratio} (decoder: attention + MLP), and
// conventions: {ranks: kFlatRankConvention}
nlohmann::ordered_json flat_params_json(const FlatResult& result);
// How a layer's ratio w becomes its rank, where METHODS 3's floor departs (issue 62 item 7).
inline constexpr const char* kFlatRankConvention =
    "r_l = max(1, floor(w_l d_head + 1e-9)) (METHODS 3: floor(w_l d_head)); the 1e-9 keeps a w_l d_head "
    "that is a whole number up to rounding (IPRS's sums) from flooring one below; the MLP's m_l the same "
    "with d_int";

// A FLAT-LLM directory: the support files, model.safetensors with every
// tensor under its standard name (v/o projections, and MLPs with --mlp, at
// their narrowed shapes), and embedlab.json with value_head_dims (and
// mlp_widths), per-layer reports, calibration and provenance. load_model()
// runs it directly. Written atomically like every compressed model.
struct SaveFlatOptions {
    bool overwrite = false;
    nlohmann::ordered_json evaluation;       // stored when not null
    nlohmann::ordered_json calibration_text; // {path, sha256, tokens}
};
nlohmann::ordered_json save_flat_model(const LoadedModel& source, const FlatResult& flat,
                                       const Calibration& calibration, const std::filesystem::path& out,
                                       const SaveFlatOptions& options = {}, const ProgressFn& progress = {});

} // namespace embedlab
