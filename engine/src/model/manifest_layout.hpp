// The torch-free half of reading a compressed model's embedlab.json: which
// method each table uses, its parameters (checked), the factor tensors the
// method needs with their expected shapes, and the recorded file digests. The
// tensors themselves are matched in compressed_model.cpp; keeping this half free
// of libtorch lets the fuzzer (fuzz/fuzz_manifest.cpp) reach every check.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedlab::detail {

constexpr int kManifestFormatVersion = 1;

using TensorShape = std::vector<int64_t>;

// What config.json says about the tables the manifest describes.
struct ManifestDims {
    int64_t vocab = 0, max_positions = 0, dim = 0;
    bool has_position_table = false; // gpt2's learned wpe
    std::string architecture;        // for messages
    std::string token_prefix;        // "wte." or "embed_tokens."
};

// One table's method, parameters and the factor tensors it consumes, in order.
// What a stored table is: a registry method's factors (experiment_request.hpp),
// or lrf, the low-rank factors finetune --from-scratch trains.
enum class TableKind { PCA, SVD, LRF, TT, Tucker, LLE, LLEUnk, LLEPCA, Fourier, Quant, AQ };

struct TableLayout {
    std::string method; // the manifest's: a registry method, or lrf
    std::string stored; // its stored_as (the tensors' prefix): pca svd lrf tt tucker lle lle-unk lle-pca
                        // fourier quant
    TableKind kind = TableKind::PCA;
    std::string prefix;
    int64_t rows = 0, dim = 0;
    int64_t rank = 0;                        // pca, svd, lrf
    std::vector<int64_t> tt_shape, tt_ranks; // tt (per token: the largest); tucker
    bool tt_per_token = false;               // tt: tt.token_ranks stored
    bool tt_packed = false;               // tt per token: tt.packed_core<k> (issue 36), not padded tt.core<k>
    bool rare_ids_stored = false;         // lle*: <m>.rare_ids stored (before issue 36; now derived)
    int64_t common = 0, rare = 0, k = 0;  // lle*
    double reg = 0;                       // lle
    std::string mlp;                      // fourier: linear | geglu
    bool norm = false;                    // fourier
    int64_t hidden = 0;                   // fourier geglu
    std::string quant_type;               // quant: "q4_k"
    int64_t codebooks = 0, codewords = 0; // aq: M, K
    std::vector<std::pair<std::string, TensorShape>> tensors; // full name -> shape
    std::vector<std::string> index_tensors; // those holding ids or ranks (integers, never quantised)
    // Tensors stored at a ggml type (compress --store, issue 38): full name -> type
    // ("q8_0"). Their file tensor is uint8 [numel / last, row bytes of last]; the shape
    // above is the float32 tensor they dequantise to. Absent: float32 as listed.
    std::map<std::string, std::string> stored_types;
};

struct ManifestLayout {
    bool flat = false; // FLAT-LLM: no embedding factors at all
    std::optional<TableLayout> tokens, positions;
    std::map<std::string, TensorShape> listed; // every "factor_tensors" entry
};

// A JSON integer from a file, or InputError("<where>: <what> must be an integer").
// nlohmann's get<int64_t>() casts a float such as 1e58 unchecked (undefined
// behaviour) and truncates 2.5 to 2, so untrusted files go through these.
int64_t json_integer(const nlohmann::json& v, const std::string& what, const std::string& where);
std::vector<int64_t> json_integers(const nlohmann::json& v, const std::string& what,
                                   const std::string& where);

// One table block (the manifest's top level or its "positions"): its method, checked
// parameters and tensors. InputError naming `where`.
TableLayout parse_table_layout(const nlohmann::json& block, const std::string& prefix, int64_t rows,
                               int64_t d, const std::string& where);

// Throws InputError("<label>/embedlab.json: <problem>").
ManifestLayout parse_manifest_layout(const std::string& manifest_text, const ManifestDims& dims,
                                     const std::string& label);

// "weights_files": [{file, sha256}]; empty when the manifest records none. File
// names must be plain names inside the directory. Throws InputError naming `where`.
struct WeightsFileRecord {
    std::string file, sha256;
    int64_t bytes = -1; // the file's size as written; -1 where the manifest records none
};
std::vector<WeightsFileRecord> parse_weights_files(const std::string& manifest_text,
                                                   const std::string& where);

// FLAT-LLM's per-layer widths ("value_head_dims", "mlp_widths"); empty when absent.
struct LayerDims {
    std::vector<int64_t> value_head_dims, mlp_widths;
};
LayerDims parse_layer_dims(const std::string& manifest_text, const std::string& label);

} // namespace embedlab::detail
