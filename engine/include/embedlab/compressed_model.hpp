// The compressed-model directory: what `embedlab-cli compress` writes and
// load_model() reads back.
//
//   auto src = embedlab::load_model("models/tinygpt2");
//   auto c = embedlab::compress_table(table, {.method = "pca", .rank = 64});
//   embedlab::save_compressed_model(src, c, "out/tinygpt2-pca64", {.dense = true});
//   auto back = embedlab::load_model("out/tinygpt2-pca64");   // factorised embedding
//
// Layout of DIR:
//   config.json, tokenizer and other non-weight files   copied from the source
//   model.safetensors   every weight except the embedding table, plus the
//                       method's factors under the table's prefix <p>, as its
//                       stored form declares them (stored_form.hpp; each built-in
//                       form beside its method in engine/src/methods/request_*.cpp),
//                       e.g. pca: <p>pca.mu [d], <p>pca.Z [V,k], <p>pca.P [k,d];
//                       tt: <p>tt.core0 .. core{N-1}; lle: <p>lle.common_ids, ...
//                       (<p> = "wte." for gpt2, "model.embed_tokens." for llama;
//                       a compressed gpt2 position table likewise under "wpe.")
//   embedlab.json       method, parameters, factor shapes, accounting,
//                       reconstruction, fit details, source files with sha256,
//                       versions, timestamps, evaluation results when run
//   adapters.safetensors  finetune without --merge: LoRA adapters "lora.<target>.A/B"
//                       (lora.hpp), described by embedlab.json's "lora" block
//   dense/              with --dense: a standard Hugging Face directory with the
//                       reconstructed table, loadable by any tool
// DIR is written as a sibling temporary directory and renamed into place, so a
// failure or cancel never leaves a half-written model.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "embedlab/compress.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct SaveCompressedOptions {
    bool dense = false;                // also write DIR/dense/
    bool overwrite = false;            // replace an existing DIR
    nlohmann::ordered_json evaluation; // stored under "evaluation" when not null
    // gpt2: the compressed position table, stored as wpe.<method>.* factors.
    const CompressedEmbedding* positions = nullptr;
    // More top-level manifest fields (e.g. "frequency_text" for lle methods).
    nlohmann::ordered_json extra;
};

// Returns the manifest as written. `source` must be a dense Hugging Face model.
nlohmann::ordered_json save_compressed_model(const LoadedModel& source, const CompressedEmbedding& compressed,
                                             const std::filesystem::path& out,
                                             const SaveCompressedOptions& options = {},
                                             const ProgressFn& progress = {});

// The embeddings a compressed directory describes: checks embedlab.json against
// the factor tensors (names, shapes, method parameters, finiteness) and fails
// naming the file and the disagreement. Consumes `factors`.
struct ManifestEmbeddings {
    std::shared_ptr<const TokenEmbedding> tokens;    // null: the table is a dense weight (flat)
    std::shared_ptr<const TokenEmbedding> positions; // null unless wpe was compressed
};
ManifestEmbeddings embeddings_from_manifest(const std::string& manifest_text, WeightMap& factors,
                                            const ModelConfig& config, const std::string& label);

// Stores c's float factors at c.spec.store (a factor whose rows the type's blocks do not
// divide stays float32, ids stay integers) and rebuilds c.embedding from them read back,
// so what is evaluated is what the directory holds; fills c.stored_tensors and
// c.stored_types. The bytes of the stored factors: values (at their types) and ids.
// `positions`: gpt2's wpe table rather than the token table.
struct StoredFactorBytes {
    int64_t values = 0, ids = 0;
};
StoredFactorBytes store_factors(CompressedEmbedding& c, const ModelConfig& config, bool positions = false);

// The factor tensors of a compressed embedding under `prefix`: its stored_tensors()
// with the prefix (see above). InputError for an embedding with no stored form (dense).
std::vector<std::pair<std::string, torch::Tensor>> embedding_factor_tensors(const TokenEmbedding& embedding,
                                                                            const std::string& prefix);

} // namespace embedlab
