// Loading a model for generation (embedlab-cli generate, bench generate) with the
// matrices of an f16/bf16 Hugging Face model or GGUF kept in half precision as stored:
// each generated token then reads half the bytes, and the products accumulate in
// float32 (model/half_products.hpp). Evaluation keeps load_model's float32 weights.
// Usage: auto lm = load_model_for_generation(dir, {}, parse_generation_weights("half"));
// Thread safety: as load_model (the half setting is the calling thread's own).
#pragma once

#include <filesystem>
#include <string>

#include "embedlab/model.hpp"

namespace embedlab {

// Half: f16/bf16 matrices (safetensors, GGUF F16/BF16) stay as stored (float32 models,
// quantised GGUF tensors, llama2.c and EmbedLab's compressed directories load as
// load_model loads them); F32: all float32.
enum class GenerationWeights { Half, F32 };

// "half" or "f32"; InputError naming `field` (the CLI's flag, Python's keyword) otherwise.
GenerationWeights parse_generation_weights(const std::string& text, const std::string& field = "--weights");

LoadedModel load_model_for_generation(const std::filesystem::path& model, const LoadOptions& options,
                                      GenerationWeights weights);

// Whether any of the model's weights are f16/bf16 (kept as stored by the above).
bool holds_half_weights(const LanguageModel& model);

} // namespace embedlab
