// The tokenizer half of vocabulary trimming (trim.hpp): what a model directory's
// tokenizer files say about each id, which ids every trimmed tokenizer keeps, and
// the files rewritten for a kept set. Torch-free.
//
//   auto vocab = tokenizer_impl::read_trim_vocabulary(dir);      // refuses other families
//   auto kept = tokenizer_impl::close_over_parts(vocab, seeds);   // + what builds them
//   for (auto& [name, bytes] : tokenizer_impl::trimmed_tokenizer_files(dir, vocab, kept)) ...
//
// Thread safety: plain functions over values; nothing here writes a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace embedlab::tokenizer_impl {

enum class TrimFamily { ByteLevelBpe, WordPiece, SentencePieceBpe };

// "byte-level BPE", "WordPiece", "SentencePiece BPE".
const char* trim_family_name(TrimFamily family);

struct TrimVocabulary {
    TrimFamily family = TrimFamily::ByteLevelBpe;
    // Token text by id as the files spell it (byte-level form for BPE, "##" pieces for
    // WordPiece, "▁" pieces for SentencePiece); empty for an id no token has.
    std::vector<std::string> tokens;
    // Tokens needed to encode any text: byte-level BPE's 256 byte tokens, WordPiece's
    // unk and single characters (plain and "##"), SentencePiece's byte pieces, unk and
    // control pieces; and every added token. Sorted, unique.
    std::vector<int32_t> required;
    // parts[id]: the tokens `id` is merged from (every merge or split that makes it), so
    // a kept token's merge path is kept with it.
    std::vector<std::vector<int32_t>> parts;
    // The tokenizer files trim rewrites, as found in the directory ("tokenizer.json",
    // "vocab.json", "merges.txt", "vocab.txt", "tokenizer.model", "tokenizer_config.json").
    std::vector<std::string> files;
    // units[id]: what token_units returns; continuation[id]: a WordPiece "##" piece.
    std::vector<int64_t> units;
    std::vector<uint8_t> continuation;
};

// The vocabulary of `dir`'s tokenizer, read from the same file the engine's
// load_tokenizer_from_directory picks. InputError naming the file for a family trim
// cannot rewrite (a Llama-style tokenizer.json beside tokenizer.model, Unigram).
TrimVocabulary read_trim_vocabulary(const std::filesystem::path& dir);

// `seeds` and, recursively, the parts they are built from; sorted, unique.
std::vector<int32_t> close_over_parts(const TrimVocabulary& vocab, const std::vector<int32_t>& seeds);

// The units a token covers in the text, for aligning two encodings of one text:
// bytes (BPE, SentencePiece: a "▁" is one space, a byte piece one byte, a control
// piece none) or, for WordPiece, characters of its word without the "##" prefix.
int64_t token_units(const TrimVocabulary& vocab, int32_t id);
// WordPiece: whether the token continues a word ("##" piece).
bool continues_word(const TrimVocabulary& vocab, int32_t id);

// The files of vocab.files (name, new bytes), cut to `kept` (sorted ids) with ids
// renumbered 0..K-1 in the old order: BPE merges whose result or either part is
// dropped are removed; ids inside the files (added tokens, post-processor,
// padding, tokenizer_config.json's added_tokens_decoder) are renumbered.
std::vector<std::pair<std::string, std::string>> trimmed_tokenizer_files(const std::filesystem::path& dir,
                                                                         const TrimVocabulary& vocab,
                                                                         const std::vector<int32_t>& kept);

} // namespace embedlab::tokenizer_impl
