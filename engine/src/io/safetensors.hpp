// Loading one safetensors file, with the bookkeeping the model readers need.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "embedlab/weights.hpp"

namespace embedlab::io {

struct SafetensorsFile {
    WeightMap weights;                  // names as written in the file
    std::set<std::string> stored_types; // dtypes of the loaded tensors, e.g. {"F16"}
    std::vector<std::string> skipped;   // "name (I64)": non-float tensors, never weights
};

// Maps `file` once, validates its header and returns every float tensor as float32.
SafetensorsFile load_safetensors_file(const std::filesystem::path& file);

} // namespace embedlab::io
