// What every EmbedLab compressed-model directory shares, whatever the method:
// the copied support files, provenance of the source, versions, timestamps.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedlab/model.hpp"

namespace embedlab::detail {

constexpr int kManifestFormatVersion = 1;

// config.json, tokenizer files, generation_config.json, README ...: everything but weights.
void copy_support_files(const std::filesystem::path& from, const std::filesystem::path& to);
std::string utc_now(); // ISO 8601, UTC
nlohmann::ordered_json manifest_versions();
// {path, format, architecture, stored_dtype, files: [{file, bytes, sha256}]}
nlohmann::ordered_json source_json(const LoadedModel& source);
// Compressed models are written from uncompressed Hugging Face directories.
void require_original_hf_source(const LoadedModel& source);

} // namespace embedlab::detail
