// Reading model files: Hugging Face directories (config.json + safetensors,
// single or sharded), GGUF v3 and llama2.c checkpoints.
//
//   embedlab::ModelFiles mf = embedlab::read_model_files("models/tinygpt2-f16");
//   mf.config.vocab_size;                       // 50257
//   mf.weights.at("wte.weight");                // float32 [50257, 128]
//
// Files are memory-mapped and read once; F16/BF16 are converted to float32.
// Every declared size is checked against the file before any allocation.
// Thread safety: functions are reentrant; the result is a plain value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "embedlab/format_parsers.hpp"
#include "embedlab/model_config.hpp"
#include "embedlab/vocab.hpp"
#include "embedlab/weights.hpp"

namespace embedlab {

enum class ModelFormat { HuggingFace, GGUF, Llama2c };

inline const char* model_format_name(ModelFormat f)
{
    switch (f) {
    case ModelFormat::HuggingFace:
        return "huggingface";
    case ModelFormat::GGUF:
        return "gguf";
    case ModelFormat::Llama2c:
        return "llama2c";
    }
    return "?";
}

struct ModelFiles {
    ModelFormat format = ModelFormat::HuggingFace;
    std::filesystem::path path;               // what the user named
    std::vector<std::filesystem::path> files; // every weight file read
    ModelConfig config;
    WeightMap weights;        // canonical names, float32, contiguous
    std::string stored_dtype; // "F32", "F16", "BF16", a GGUF type name ("Q4_K") or "mixed"
    // GGUF: the stored type(s) of each tensor kind, as llama.cpp names both
    // ("attn_q.weight" -> "Q4_K", or "Q4_K x1 + Q6_K x1" when layers differ).
    std::map<std::string, std::string> tensor_types_by_kind;
    std::optional<ScoredVocab> embedded_vocab; // GGUF only
    std::vector<std::string> warnings;         // e.g. "NaN in tensor h.0.attn.c_attn.weight"
    std::vector<std::string> notes;            // information, not a problem (inspect prints it)
    // An EmbedLab compressed directory: embedlab.json's text, and the tensors
    // that replace the embedding (names under its prefix, e.g. "wte.pca.Z").
    std::string embedlab_manifest;
    WeightMap embedding_factors;
};

// What a reader makes of the stored weights. ShapesOnly: a Hugging Face
// directory's weights are meta tensors (shapes, no values) for callers that only
// count them (inspect): nothing is converted to float32, and the NaN/Inf scan
// reads the stored bits, naming tensors as the file does. Such weights cannot run
// a forward pass. GGUF, llama2.c and compressed directories load values either way.
enum class WeightValues { Load, ShapesOnly };

// How the token table's values are stored: GGUF's token_embd.weight type ("Q6_K"),
// else the model's one dtype ("BF16"); "" when the file mixes dtypes.
std::string token_embedding_stored_type(const ModelFiles& files);

// MODEL is a directory, a .gguf file or a .bin (llama2.c) file.
ModelFiles read_model_files(const std::filesystem::path& model, WeightValues values = WeightValues::Load);

// Lower-level pieces (safetensors header, config.json) are in format_parsers.hpp.

// Loads every tensor of one safetensors file as float32 (zero-copy for aligned F32).
WeightMap load_safetensors(const std::filesystem::path& file);

} // namespace embedlab
