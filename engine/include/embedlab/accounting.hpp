// What a compressed embedding costs and saves, from sizes alone (METHODS.md 0, 1, 5).
//
//   auto a = embedlab::account_low_rank(embedlab::LowRankKind::PCA, 50257, 768, 128);
//   a.params_after;        // 6,532,736 (the paper's Table II: 6.53M)
//   a.flops_per_token;     // 13,065,472 (13.06M): the tied head's, as the paper counts
//   a.flops_lookup;        // 197,376: one token's row, 2 d k + d
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embedlab {

// TensorSLM energy model (METHODS 5, eqs. 2-5) for a text of `tokens` tokens.
struct EnergyOptions {
    double nu = 5.0;     // cost of one memory access
    double tau = 1.0;    // cost of one arithmetic operation (nu / tau = 5: paper, Appendix F)
    int64_t tokens = 50; // l
    std::string device;  // a Table 1 preset (energy_devices()), or "" for nu and tau as given
};
// TensorSLM Table 1's energy ranges per device (pJ per float32): memory access nu,
// arithmetic tau (the union of its add and multiply ranges). A preset evaluates at the
// ranges' midpoints and reports omega at the two corners that bound it (omega depends
// on tau / nu only, monotonically).
struct EnergyDevice {
    const char* name; // "raspberry-pi-5", "a100-server"
    const char* description;
    double nu_low, nu_high, tau_low, tau_high;
};
const std::vector<EnergyDevice>& energy_devices();
// nullptr when unknown.
const EnergyDevice* find_energy_device(const std::string& name);
// "raspberry-pi-5, a100-server", for messages.
std::string energy_device_names();
// The device's midpoints; InputError listing the devices when the name is unknown.
EnergyOptions energy_options_for_device(const std::string& name, int64_t tokens = 50);

struct EnergyEstimate {
    double original_nu = 0, original_tau = 0;
    double compressed_nu = 0, compressed_tau = 0;
    double omega = 0; // (compressed_nu + compressed_tau) / (original_nu + original_tau)
    // With a device preset: omega over the device's ranges (0 without one).
    double omega_low = 0, omega_high = 0;
};

struct EmbeddingAccounting {
    std::string method;
    int64_t vocab = 0, dim = 0;
    int64_t params_before = 0; // V d
    int64_t params_after = 0;  // stored values of the compressed table
    double ratio = 0;          // after / before
    double eta_emb = 0;        // (before - after) / before, the token table alone
    // TensorSLM F.3 counts the (uncompressed) position table in eta_emb's denominator:
    // (before - after) / (before + position_params). Equal to eta_emb without one.
    int64_t position_params = 0;
    double eta_emb_with_positions = 0;
    // Whole model, when its parameter count is known (else the table alone).
    int64_t model_params_before = 0, model_params_after = 0;
    double eta = 0; // (|M0| - |Mc|) / |Mc|
    // FLOPs per token, lookup and head counted apart (issue 20): the lookup builds one
    // row from the stored values (dense: 0, a read); a tied head multiplies the hidden
    // state with every row, rebuilt from the stored values where the method must.
    int64_t flops_lookup = 0;
    int64_t flops_head = 0;            // tied head; dense: 2 V d
    bool tied_head = true;             // untied: the head is not compressed, a token pays its lookup
    int64_t flops_per_token = 0;       // tied ? flops_head (the papers' count) : flops_lookup
    int64_t flops_per_token_dense = 0; // tied ? 2 V d : 0
    // The dense baseline under both conventions, named (issue 36 item 4): the PCA
    // paper's Table II counts the dense lookup as 0 FLOPs (a read); EmbedLab's
    // flops_per_token_dense counts the tied head, 2 V d. Never compare one with the other.
    int64_t flops_dense_lookup = 0;    // 0: a row is read
    int64_t flops_dense_with_head = 0; // 2 V d: the tied head's product with every row
    EnergyEstimate energy;
    EnergyOptions energy_options; // what `energy` was computed with
    // Storage (issue 19): the table's bits per value as the input stored it ("Q6_K":
    // 6.5625) and the compressed model's (its factors are written as float32), so a
    // ratio of values is never read as one of bytes: a quantised table compressed to a
    // quarter of its values in float32 can take more bytes than it did. Unknown (0,
    // stored_type_before "") for a Hugging Face model of mixed dtypes.
    std::string stored_type_before;
    double bits_per_value_before = 0, bits_per_value_after = 0;
    double bytes_before = 0, bytes_after = 0; // the token table's alone
    double bytes_ratio = 0;                   // after / before
    // Stored indices among params_after (issue 36: each counts as one value, METHODS 0,
    // but takes its own width on disk): tt's per-token ranks (int32), lle's common ids
    // and neighbour ids (int16 when V <= 32768, else int32). bytes_after = the other
    // values at bits_per_value_after + index_bytes: the bytes of the written tensors.
    int64_t index_values = 0, index_bytes = 0;
    // low rank
    int64_t rank = 0;
    // tensor train
    std::vector<int64_t> shape, ranks; // per-token ranks: ranks holds each position's largest
    int64_t params_per_token = 0;      // per-token ranks: the mean, rounded
    double eta_ttd = 0;                // d / params_per_token - 1 (the unrounded mean)
    // Per-token ranks (TensorSLM eq. 14): each token stores its own cores plus its
    // N - 1 rank values; mean_ranks are r_1..r_{N-1} averaged over tokens.
    bool per_token_ranks = false;
    std::vector<double> mean_ranks;
    double mean_params_per_token = 0;
    // The N I r^2 term of eqs. 3-4 (r the largest rank; with per-token ranks, the
    // mean over tokens of each token's own), which the energy model uses: the paper's
    // complexity, r_max^2 sum I_k, not what is stored.
    double energy_size = 0;
    // The same model with the values actually stored per token (sum r_{k-1} I_k r_k,
    // per-token: the mean), named apart (issue 36 item 4).
    double energy_size_stored = 0;
    EnergyEstimate energy_stored;
    int64_t svd_equal_size_rank = 0;
    EnergyEstimate svd_equal_size_energy;
    // tucker (TensorSLM's Tucker baseline, METHODS 5): each row tensorised as for tt,
    // factors U_k [I_k, r_k] shared by all tokens, a core of prod r_k values per token.
    std::vector<int64_t> tucker_shape, tucker_ranks;
    int64_t core_values_per_token = 0; // prod r_k
    int64_t factor_values = 0;         // sum I_k r_k
    // aq (additive quantisation, issue 38): M codebooks of K codewords, log2 K bits a code.
    int64_t aq_codebooks = 0, aq_codewords = 0, aq_code_bits_per_token = 0;
};

// LRF: a low-rank factorised table trained from random initialisation (lora.hpp),
// stored like SVD (no mean).
enum class LowRankKind { PCA, SVD, LRF };

// PCA: V k + d k + d values (mean included), SVD and LRF: V k + d k. Rank 1..d.
EmbeddingAccounting account_low_rank(LowRankKind kind, int64_t vocab, int64_t dim, int64_t rank,
                                     const EnergyOptions& energy = {}, int64_t model_params = 0);

// Per-token tensor train: shape with product d, ranks r_0..r_N with r_0 = r_N = 1
// and r_k <= min(prod_{j<=k} I_j, prod_{j>k} I_j).
EmbeddingAccounting account_tensor_train(int64_t vocab, const std::vector<int64_t>& shape,
                                         const std::vector<int64_t>& ranks, const EnergyOptions& energy = {},
                                         int64_t model_params = 0);

// Per-token ranks: token_ranks row-major [vocab, N - 1], each token's r_1..r_{N-1}.
EmbeddingAccounting account_tensor_train_per_token(int64_t vocab, const std::vector<int64_t>& shape,
                                                   const std::vector<int32_t>& token_ranks,
                                                   const EnergyOptions& energy = {},
                                                   int64_t model_params = 0);

// The model's side of the accounting, once the table's is known: whether the head is
// tied (flops_per_token and its dense counterpart follow) and the size of its learned
// position table (eta_emb_with_positions).
void apply_model_context(EmbeddingAccounting& a, bool tied_head, int64_t position_params);

// Bits a stored value takes in a dtype or ggml type ("F32" 32, "BF16" 16, "Q8_0" 8.5,
// "Q4_K" 4.5, "Q6_K" 6.5625: block bytes x 8 / values per block); 0 when unknown.
double stored_bits_per_value(const std::string& type);

// Fills the storage fields from the input table's stored type (unknown: left 0) and
// the bits of a value of the compressed model (float32 factors: 32).
void apply_storage(EmbeddingAccounting& a, const std::string& stored_type_before,
                   double bits_per_value_after = 32);

// Recomputes the energy estimates (pca, svd, tt; others have none) with other options.
void apply_energy(EmbeddingAccounting& a, const EnergyOptions& energy);

// Throws InputError naming the problem (product != d, wrong rank count, cap exceeded).
void check_tt_shape_and_ranks(int64_t dim, const std::vector<int64_t>& shape,
                              const std::vector<int64_t>& ranks);
// The largest ranks the caps allow for a shape (TT-SVD at full accuracy).
std::vector<int64_t> tt_rank_caps(const std::vector<int64_t>& shape);
// Every ordered factorisation of d into n factors >= 2 (768 -> 8x8x12, 4x4x6x8, ...).
std::vector<std::vector<int64_t>> tt_shapes(int64_t dim, int n);
// The most balanced 3-factor shape of d (tt's shape when the request gives none):
// smallest largest factor, then largest smallest (8x8x12 for 768, 4x4x8 for 128).
// InputError "<label>: d = .. has no 3-factor shape" for a d with none.
std::vector<int64_t> balanced_tt_shape(int64_t d, const std::string& label);

// Tucker (METHODS 5's optional baseline): shape I_1..I_N with product d and one rank
// per mode, 1 <= r_k <= I_k (no boundary ranks, unlike tt). InputError naming the problem.
void check_tucker_shape_and_ranks(int64_t dim, const std::vector<int64_t>& shape,
                                  const std::vector<int64_t>& ranks);
// Stored values V prod r_k + sum I_k r_k. FLOPs: a lookup is the core's multi-mode
// product with U_1..U_N (modes in order); the tied head projects the hidden state onto
// the factors (h x_k U_k^T) and takes one dot product of prod r_k with every token's
// core, as TuckerTokenEmbedding::project computes it. No energy model (eqs. 2-5 model
// tt and svd only).
EmbeddingAccounting account_tucker(int64_t vocab, const std::vector<int64_t>& shape,
                                   const std::vector<int64_t>& ranks, int64_t model_params = 0);
// aq: M K d codebook values and V M codes (index values, stored packed at log2 K bits:
// V ceil(M log2 K / 8) bytes). Lookup: M d additions (counted as flops, M d); tied head:
// every row rebuilt, then 2 V d.
EmbeddingAccounting account_aq(int64_t vocab, int64_t dim, int64_t codebooks, int64_t codewords,
                               int64_t model_params = 0);

// Energy of the dense table and of a rank-k SVD (eqs. 2 and 5), and of a TT with
// cores counted as r x I_k x r, r the largest rank, as eqs. 3-4 assume.
EnergyEstimate svd_energy(int64_t vocab, int64_t dim, int64_t rank, const EnergyOptions& o);
EnergyEstimate tt_energy(int64_t vocab, int64_t dim, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& ranks, const EnergyOptions& o);
// The same from the N I r^2 term itself (EmbeddingAccounting::energy_size).
EnergyEstimate tt_energy(int64_t vocab, int64_t dim, double energy_size, const EnergyOptions& o);

} // namespace embedlab
