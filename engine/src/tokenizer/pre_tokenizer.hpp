// Pre-tokenizers of byte-level BPE: the GPT-2 and Llama 3 / Qwen2 regexes, written as
// scanners over code points (no std::regex: it is slow and has no Unicode classes),
// and the Hugging Face "Digits" splitter.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

namespace embedlab::tokenizer_impl {

// Splits text exactly as the GPT-2 pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does with findall: pieces cover the text, in order. Bytes that are not
// well-formed UTF-8 count as "other" characters (the third class).
std::vector<std::string_view> split_gpt2_pattern(std::string_view text);
// The same, one piece at a time (a long text needs no vector of all its pieces):
// the end of the piece that starts at `pos` (< text.size()).
size_t gpt2_piece_end(std::string_view text, size_t pos);

// Llama 3's pattern (Hugging Face's Split of Meta's tokenizer.json, llama.cpp's "llama-bpe")
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// and Qwen2's, the same with \p{N} (one digit) for \p{N}{1,3}: the end of the piece
// that starts at `pos` (< text.size()). `max_digits` is 3 or 1. The contractions fold
// ASCII case only, as llama.cpp's adaptation of the pattern does.
size_t llama3_piece_end(std::string_view text, size_t pos, int max_digits);

// Hugging Face Digits pre-tokenizer: numeric characters (\p{N}) become their
// own pieces, one per digit when `individual_digits`, else one per run.
std::vector<std::string_view> split_digits(std::string_view text, bool individual_digits);
// The same, calling `piece` for each piece in order.
void for_each_digit_split(std::string_view text, bool individual_digits,
                          const std::function<void(std::string_view)>& piece);

} // namespace embedlab::tokenizer_impl
