// The torch-free half of reading a compressed model's embedlab.json: which
// method each table uses and, through its stored form (stored_form.hpp), its
// parameters (checked) and the factor tensors it needs with their expected
// shapes; and the recorded file digests. The
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

#include "embedlab/stored_form.hpp"

namespace embedlab::detail {

constexpr int kManifestFormatVersion = 1;

using embedlab::TensorShape;

// What config.json says about the tables the manifest describes.
struct ManifestDims {
    int64_t vocab = 0, max_positions = 0, dim = 0;
    bool has_position_table = false; // gpt2's learned wpe
    std::string architecture;        // for messages
    std::string token_prefix;        // "wte." or "embed_tokens."
};

// One table's method, its checked parameters and the tensors its stored form needs
// (stored_form.hpp).
using embedlab::TableLayout;

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
