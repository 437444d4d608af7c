// Byte-level BPE (GPT-2 and its Hugging Face descendants): the description a
// loader fills in, and the factory of the tokenizer built from it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "embedlab/tokenizer.hpp"

namespace embedlab::tokenizer_impl {

struct AddedToken {
    int32_t id = 0;
    std::string content; // plain text, not byte-level encoded
    bool special = false;
};

// The regex a byte-level BPE splits text with (pre_tokenizer.hpp): GPT-2's (ByteLevel's
// own), or Llama 3's or Qwen2's (a Split before a ByteLevel without its regex).
enum class SplitPattern { gpt2, llama3, qwen2 };

struct ByteLevelBpeSpec {
    std::filesystem::path source;        // named in error messages
    std::filesystem::path merges_source; // the merges file, if it is another file
    // (byte-level token text, id); ids need not be dense.
    std::vector<std::pair<std::string, int32_t>> vocab;
    // Merges in priority order: the first merges first.
    std::vector<std::pair<std::string, std::string>> merges;
    std::vector<AddedToken> added_tokens;

    bool add_prefix_space = false; // ByteLevel(add_prefix_space)
    bool use_regex = true;         // split with `pattern` (ByteLevel(use_regex): GPT-2's)
    SplitPattern pattern = SplitPattern::gpt2;
    bool split_digits = false;      // a Digits pre-tokenizer runs first
    bool individual_digits = false; // ... and isolates every digit
    bool ignore_merges = false;     // BPE(ignore_merges): whole words in the vocab win
    bool nfc = false;               // NFC normalizer
    // Special ids the source names (GGUF's tokenizer.ggml.*_token_id); when unset,
    // BOS/EOS are the special added tokens of the usual names, and there is no unk.
    std::optional<int32_t> bos_id, eos_id, unk_id;
};

std::unique_ptr<Tokenizer> make_byte_level_bpe(ByteLevelBpeSpec spec);

// GPT-2's reversible byte -> printable code point table (bytes_to_unicode()).
int32_t byte_to_code_point(unsigned char byte);
// Its inverse; -1 for code points outside the table.
int byte_from_code_point(int32_t cp);

} // namespace embedlab::tokenizer_impl
