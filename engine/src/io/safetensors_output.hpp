// write_safetensors (file_output.hpp) with some tensors stored at another dtype,
// converted one at a time while writing, so a model written at its input's f16 or
// bf16 never needs a whole converted copy beside its float32 weights. Internal.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "embedlab/error.hpp"

namespace embedlab::io {

// stored_dtypes: tensor name -> the dtype written (float16 or bfloat16 of a float32
// tensor); the rest as write_safetensors writes them.
void write_safetensors_as(const std::filesystem::path& path,
                          const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                          const std::map<std::string, torch::ScalarType>& stored_dtypes,
                          const std::map<std::string, std::string>& metadata = {},
                          const ProgressFn& progress = {});

} // namespace embedlab::io
