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

struct ByteLevelBpeSpec {
    std::filesystem::path source;        // named in error messages
    std::filesystem::path merges_source; // the merges file, if it is another file
    // (byte-level token text, id); ids need not be dense.
    std::vector<std::pair<std::string, int32_t>> vocab;
    // Merges in priority order: the first merges first.
    std::vector<std::pair<std::string, std::string>> merges;
    std::vector<AddedToken> added_tokens;

    bool add_prefix_space = false;  // ByteLevel(add_prefix_space)
    bool use_regex = true;          // ByteLevel(use_regex): split with the GPT-2 pattern
    bool split_digits = false;      // a Digits pre-tokenizer runs first
    bool individual_digits = false; // ... and isolates every digit
    bool ignore_merges = false;     // BPE(ignore_merges): whole words in the vocab win
    bool nfc = false;               // NFC normalizer
};

std::unique_ptr<Tokenizer> make_byte_level_bpe(ByteLevelBpeSpec spec);

// GPT-2's reversible byte -> printable code point table (bytes_to_unicode()).
int32_t byte_to_code_point(unsigned char byte);
// Its inverse; -1 for code points outside the table.
int byte_from_code_point(int32_t cp);

} // namespace embedlab::tokenizer_impl
