// What every EmbedLab compressed-model directory shares, whatever the method:
// the copied support files, provenance of the source, versions, timestamps.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/model.hpp"
#include "model/manifest_layout.hpp"

namespace embedlab::detail {

// config.json, tokenizer files, generation_config.json, README ...: everything but weights.
void copy_support_files(const std::filesystem::path& from, const std::filesystem::path& to);
std::string utc_now(); // ISO 8601, UTC
nlohmann::ordered_json manifest_versions();
// {path, format, architecture, stored_dtype, files: [{file, bytes, sha256}]}
nlohmann::ordered_json source_json(const LoadedModel& source);
// [{file, bytes, sha256}] of files in `dir` (what embedlab.json records as
// "weights_files", so a load can verify them).
nlohmann::ordered_json file_digests(const std::filesystem::path& dir, const std::vector<std::string>& names);
// Checks the "weights_files" digests of a compressed directory's manifest
// against the files; throws InputError naming the file on a mismatch, when the
// manifest lists none, or when a file in `weights_read` (what the loader read)
// is not listed.
void verify_weights_files(const std::string& manifest_text, const std::filesystem::path& dir,
                          const std::vector<std::filesystem::path>& weights_read);
// Compressed models are written from uncompressed Hugging Face directories.
void require_original_hf_source(const LoadedModel& source);

} // namespace embedlab::detail
