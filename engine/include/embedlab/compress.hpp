// Compressing a token-embedding table by name of method, with the numbers every
// result carries: accounting (METHODS 0), reconstruction error, fit details.
//
//   embedlab::CompressionSpec spec{.method = "pca", .rank = 64};
//   auto c = embedlab::compress_table(table, spec, model_params, progress);
//   c.reconstruction.mean_cosine;    // how close the rows stay
//   model.set_token_embedding(c.embedding);
//
// Thread safety: reentrant; results are plain values (the embedding is immutable).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/accounting.hpp"
#include "embedlab/error.hpp"
#include "embedlab/model.hpp"
#include "embedlab/partial_sparse.hpp"

namespace embedlab {

// Every method's parameters; which ones apply depends on `method`.
struct CompressionSpec {
    std::string method;         // "pca", "svd", "tt", "tucker", "lle", "lle-unk", "lle-pca" or "fourier"
    int64_t rank = 0;           // pca, svd: 1..d
    std::vector<int64_t> shape; // tt, tucker: factors of d
    std::vector<int64_t> ranks; // tt: r_0..r_N (empty: from eps); tucker: r_1..r_N
    double eps = 0;             // tt: accuracy in (0, 1) when ranks are empty
    bool uniform_ranks = false; // tt eps: one rank set for all tokens (else each token its own)
    // lle, lle-unk, lle-pca (METHODS 2): the common/rare split and its options.
    std::shared_ptr<const FrequencySplit> split;
    int64_t k = 0;       // lle: neighbours; lle-pca: basis size
    double reg = 1e-3;   // lle regulariser
    int64_t unk_id = -1; // lle-unk fallback row (-1: mean of V_C)
    KnnOptions knn;      // lle: the neighbour search (exact, or ivf with its lists)
    // fourier (METHODS 4): the MLP and its AdamW fit to the table's rows.
    std::string mlp = "linear"; // "linear" or "geglu"
    double hidden_ratio = 0.25; // geglu hidden size / d
    bool norm = false;          // RMSNorm after the residual
    std::string loss = "mse";   // "mse" or "cosine"
    int64_t steps = 0;
    double lr = 1e-3;
    int64_t batch = 4096; // ids per step
    double weight_decay = 0.01;
    uint64_t seed = 0;
    std::string type;                       // quant (issue 38): the ggml block type, "q4_k"
    std::string store;                      // the factors' stored type (CompressionRequest::store); "": f32
    int64_t codebooks = 32, codewords = 16; // aq: M, K
    double clip = 0.001;                    // aq: the gradients' global norm bound (0: none)
    int64_t holdout = 640;                  // aq: held-out rows picking the checkpoint (0: last step)
    // A registered method's own fields (MethodField), each given or at its default: {"name": value}.
    nlohmann::ordered_json method_fields = nlohmann::ordered_json::object();
};

// Methods compress_table knows (registered ones too), for messages and the CLI.
std::vector<std::string> compression_methods();

struct ReconstructionMetrics {
    double relative_frobenius = 0; // ||E - E_hat||_F / ||E||_F
    double mean_cosine = 0;        // over rows; a zero row against a zero row counts 1
    double worst_cosine = 0;
    int64_t worst_row = -1;
};

// Compares `original` [V, d] with the compressed embedding's rows, block by block.
ReconstructionMetrics measure_reconstruction(const torch::Tensor& original, const TokenEmbedding& compressed,
                                             const ProgressFn& progress = {});

struct CompressedEmbedding {
    CompressionSpec spec; // as run (tt eps: ranks filled in)
    std::shared_ptr<const TokenEmbedding> embedding;
    EmbeddingAccounting accounting;
    ReconstructionMetrics reconstruction;
    nlohmann::ordered_json fit; // method details: spectrum, explained variance, TT ranks
    double fit_seconds = 0, total_seconds = 0;
    // spec.store set (store_factors, compressed_model.hpp): the factors stored at a ggml
    // type, as the directory holds them (uint8 [rows, row bytes]) under their full names,
    // and each one's type; `embedding` is built from them read back.
    bool factors_stored = false;
    std::vector<std::pair<std::string, torch::Tensor>> stored_tensors;
    nlohmann::ordered_json stored_types = nlohmann::ordered_json::object();
};

// model_params: whole-model parameter count for eta (0: the table alone).
CompressedEmbedding compress_table(const torch::Tensor& table, const CompressionSpec& spec,
                                   int64_t model_params = 0, const ProgressFn& progress = {});

// JSON views used by embedlab.json and the CLI (field names are a contract).
nlohmann::ordered_json spec_json(const CompressionSpec& spec);
// With the energy options the accounting was computed with (a.energy_options).
nlohmann::ordered_json accounting_json(const EmbeddingAccounting& a);
nlohmann::ordered_json reconstruction_json(const ReconstructionMetrics& r);
// lle's neighbour search: {"kind": "exact", "seconds"} or {"kind": "ivf", "nlist", "nprobe",
// "recall_at_k", "recall_sample", "kmeans_iterations", "seconds", "recall_seconds"}.
nlohmann::ordered_json knn_json(const KnnReport& r);

} // namespace embedlab
