// Pre-tokenizers of byte-level BPE: the GPT-2 regex, written as a scanner
// over code points (no std::regex: it is slow and has no Unicode classes), and
// the Hugging Face "Digits" splitter.
#pragma once

#include <string_view>
#include <vector>

namespace embedlab::tokenizer_impl {

// Splits text exactly as the GPT-2 pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does with findall: pieces cover the text, in order. Bytes that are not
// well-formed UTF-8 count as "other" characters (the third class).
std::vector<std::string_view> split_gpt2_pattern(std::string_view text);

// Hugging Face Digits pre-tokenizer: numeric characters (\p{N}) become their
// own pieces, one per digit when `individual_digits`, else one per run.
std::vector<std::string_view> split_digits(std::string_view text, bool individual_digits);

} // namespace embedlab::tokenizer_impl
