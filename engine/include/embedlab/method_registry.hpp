// The registry of compression methods: one row per method, naming what it compresses
// and what it needs. It sits with the methods, below the job layer: methods/ and
// model/ read it without including job/ (experiment_request.hpp re-exports it).
//
//   const auto& m = embedlab::method_descriptor("lle");  // InputError for an unknown name
//   m.needs_frequency_text;                              // true
//   embedlab::find_method("lrf");                        // nullptr: a stored kind, not a method
//
// Torch-free. Thread safety: the registry is built once and never changes.
#pragma once

#include <string>
#include <vector>

namespace embedlab {

// Every method EmbedLab runs, by what it compresses (METHODS.md 1-5).
enum class Method { PCA, SVD, TT, Tucker, LLE, LLEUnk, LLEPCA, Fourier, Flat };
enum class CompressedPart { TokenEmbedding, AttentionValues };

struct MethodDescriptor {
    Method id;
    const char* name;    // as on the command line and in JSON: "pca", "lle-unk", ...
    CompressedPart part; // what the ratio of a run is of
    const char* summary;
    bool needs_frequency_text = false; // lle family: common/rare split
    bool needs_calibration_text = false;
    bool tied_head_from_factors = false; // the tied output head is served from the factors
    bool positions = false;              // can also compress gpt2's position table
    bool lora = false;                   // can be followed by LoRA recovery
    bool remote = true;                  // runs as a worker job on a remote host
    // flat: a decoder target ratio (target_ratio) also compresses the MLP unless the
    // request says no_mlp; the CLI, the job API and the GUI share this default.
    bool target_compresses_mlp = false;
};

// The registry: one row per method, in the order help texts list them.
const std::vector<MethodDescriptor>& method_registry();
// InputError "unknown method 'x' (pca, svd, ...)" for a name not in the registry.
const MethodDescriptor& method_descriptor(const std::string& name);
const MethodDescriptor& method_descriptor(Method id);
// The registry row of `name`, or null (stored kinds such as "lrf" are not methods).
const MethodDescriptor* find_method(const std::string& name);
// "pca, svd, tt, ..." for messages.
std::string method_names(const char* separator = ", ");

} // namespace embedlab
