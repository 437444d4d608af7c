// Reading byte-level BPE descriptions from GPT-2 files and Hugging Face
// tokenizer.json.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level_bpe.hpp"

namespace embedlab::tokenizer_impl {

// The spec of a tokenizer.json already parsed from `file`; InputError naming
// `file` when it is not a byte-level BPE this engine reproduces exactly.
ByteLevelBpeSpec parse_hf_tokenizer_json(const nlohmann::json& root, const std::filesystem::path& file);

// The spec GPT-2's vocab.json + merges.txt describe (load_gpt2_bpe's, and what vocabulary
// trimming rewrites); InputError naming the file at fault.
ByteLevelBpeSpec gpt2_files_spec(const std::filesystem::path& vocab_json,
                                 const std::filesystem::path& merges_txt);

// merges.txt's lines in order, '\r' stripped and empty lines skipped: `version` is true
// for a first line "#version ...", which is no merge (the loader skips it, trimming keeps it).
void for_each_merges_line(std::string_view text,
                          const std::function<void(std::string_view line, bool version)>& visit);

} // namespace embedlab::tokenizer_impl
