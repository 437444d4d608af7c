// The description a WordPiece loader fills in (vocab.txt, tokenizer.json), and
// the factory of the tokenizer built from it. Public entry points: wordpiece.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "embedlab/wordpiece.hpp"

namespace embedlab::tokenizer_impl {

// Normalizer steps, applied in order. Bert is BertNormalizer with the options'
// clean_text / handle_chinese_chars / strip_accents / lowercase.
enum class WordPieceNorm { Bert, Lowercase, StripAccents, Nfd, Nfkd, Nfc, Nfkc };
// Pre-tokenizer: BertPreTokenizer (whitespace and each punctuation character),
// WhitespaceSplit, or none (each added-token-free segment is one word).
enum class WordPieceSplit { Bert, Whitespace, None };

struct WordPieceSpec {
    std::string source; // named in messages
    // Model vocabulary, id = index ("" for an id no token has).
    std::vector<std::string> vocab;
    WordPieceOptions options;
    std::vector<WordPieceNorm> normalizer{WordPieceNorm::Bert};
    WordPieceSplit pre_tokenizer = WordPieceSplit::Bert;
    // From a post-processor; otherwise options.cls_token / sep_token are looked up.
    std::optional<int32_t> cls_id, sep_id;
};

std::unique_ptr<Tokenizer> make_wordpiece(WordPieceSpec spec);

} // namespace embedlab::tokenizer_impl
