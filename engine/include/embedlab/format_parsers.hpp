// The pure parsers of model file headers: bytes or text in, validated structs
// out. No libtorch here, so the fuzz targets (fuzz/) build them with clang.
//
//   auto h = embedlab::parse_safetensors_header(bytes, size, "model.safetensors");
//   auto c = embedlab::parse_hf_config(text, "config.json");
//
// Thread safety: reentrant. Bad input throws InputError naming `label`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "embedlab/model_config.hpp"

namespace embedlab {

struct SafetensorsEntry {
    std::string name;
    std::string dtype; // as written: "F32", "F16", "BF16", ...
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0; // byte offsets relative to the data section
};
struct SafetensorsHeader {
    std::vector<SafetensorsEntry> entries; // sorted by begin
    std::map<std::string, std::string> metadata;
    uint64_t data_start = 0; // 8 + header length
};
// Validates the header of a whole safetensors file held in `bytes`: header length,
// JSON, dtypes, shape/byte-count agreement, offsets inside the data and not
// overlapping. `label` names the file in messages.
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, uint64_t size, const std::string& label);

// config.json -> ModelConfig; unknown model_type fails naming it.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& label);

} // namespace embedlab
