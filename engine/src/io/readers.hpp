// The per-format readers behind read_model_files. Each returns a ModelFiles with
// canonical float32 weights checked against the config; read_model_files adds
// the NaN/Inf scan.
#pragma once

#include <filesystem>
#include <memory>

#include "embedlab/model_files.hpp"
#include "io/mapped_file.hpp"

namespace embedlab::io {

// config.json + model.safetensors, or + model.safetensors.index.json (sharded).
ModelFiles read_hf_directory(const std::filesystem::path& dir, WeightValues values = WeightValues::Load);

// GGUF v2/v3: llama, qwen2, qwen3 and gemma2 architectures.
ModelFiles read_gguf(const std::shared_ptr<MappedFile>& file);

// llama2.c legacy (v0) checkpoint.
ModelFiles read_llama2c(const std::shared_ptr<MappedFile>& file);

} // namespace embedlab::io
