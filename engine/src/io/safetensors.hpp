// Loading one safetensors file, with the bookkeeping the model readers need.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "embedlab/model_files.hpp"
#include "embedlab/weights.hpp"

namespace embedlab::io {

struct SafetensorsFile {
    WeightMap weights;                             // names as written in the file
    std::set<std::string> stored_types;            // dtypes of the loaded tensors, e.g. {"F16"}
    std::vector<std::string> skipped;              // "name (I64)": non-float tensors, never weights
    std::map<std::string, std::string> non_finite; // ShapesOnly: stored name -> "NaN in tensor NAME", ...
};

// Maps `file` once, validates its header and returns every float tensor as float32
// (ShapesOnly: as a meta tensor of its shape, its stored bits scanned for NaN/Inf).
SafetensorsFile load_safetensors_file(const std::filesystem::path& file,
                                      WeightValues values = WeightValues::Load);

} // namespace embedlab::io
