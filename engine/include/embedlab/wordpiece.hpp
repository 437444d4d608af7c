// WordPiece tokenizers (BERT, DistilBERT, MiniLM / sentence-transformers), encoding
// exactly as Hugging Face tokenizers' BertNormalizer + BertPreTokenizer + WordPiece.
//
//   auto tok = embedlab::load_wordpiece_vocab("models/minilm/vocab.txt");
//   std::vector<int32_t> ids = tok->encode("Hello, world!");   // no [CLS]/[SEP]
//   ids.insert(ids.begin(), *tok->cls_id());
//   ids.push_back(*tok->sep_id());
//
// load_tokenizer_from_directory() picks these loaders for a directory holding a
// WordPiece tokenizer.json or a lone vocab.txt.
//
// Thread safety: a tokenizer is immutable once made; encode/decode are const and
// safe to call from several threads. Loaders throw InputError "<file>: <problem>".
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedlab/tokenizer.hpp"

namespace embedlab {

// A token matched whole in the raw text before normalisation (Hugging Face's
// added tokens with normalized=false; the special tokens of BERT).
struct WordPieceAddedToken {
    std::string content;
    int32_t id = 0;
    bool special = true;
    bool lstrip = false; // swallows the whitespace before it
    bool rstrip = false; // swallows the whitespace after it
};

struct WordPieceOptions {
    bool clean_text = true;
    bool handle_chinese_chars = true;
    std::optional<bool> strip_accents; // nullopt: follows lowercase, as Hugging Face
    bool lowercase = true;
    std::string unk_token = "[UNK]";
    std::string continuing_subword_prefix = "##";
    int max_input_chars_per_word = 100;
    std::string cls_token = "[CLS]", sep_token = "[SEP]", pad_token = "[PAD]", mask_token = "[MASK]";
    // Empty: the five tokens above that are in the vocabulary, as BertTokenizerFast
    // registers them. Otherwise exactly these (tokenizer.json's added_tokens).
    std::vector<WordPieceAddedToken> added_tokens;
    bool decode_cleanup = true; // the WordPiece decoder's cleanup (" ." -> ".", ...)
    // sentence-transformers' max_seq_length: the most ids an encoder's framed input
    // holds, [CLS] and [SEP] included (frame_texts truncates to it, encoder.hpp); 0: none.
    int64_t max_length = 0;
};

// vocab.txt (one token per line, id = line number) and, when it is beside it,
// tokenizer_config.json (do_lower_case, strip_accents, tokenize_chinese_chars and
// the special tokens), read as BertTokenizerFast would. Both loaders take
// sentence_bert_config.json's max_seq_length into options.max_length when that file
// is beside the vocabulary (a sentence-transformers model directory).
std::unique_ptr<Tokenizer> load_wordpiece_vocab(const std::filesystem::path& vocab_txt);

// A parsed tokenizer.json whose model.type is "WordPiece"; `source` names it in
// messages, and a tokenizer_config.json beside it names [MASK] and [PAD]. Refuses
// (naming the type) normalizers and pre-tokenizers it does not reproduce.
std::unique_ptr<Tokenizer> load_wordpiece_tokenizer_json(const nlohmann::json& json,
                                                         const std::filesystem::path& source);

// A tokenizer over `vocab` (id = index); `source` names the vocabulary in messages.
// Throws InputError when the vocabulary is empty or lacks options.unk_token.
std::unique_ptr<Tokenizer> make_wordpiece_tokenizer(std::vector<std::string> vocab, WordPieceOptions options,
                                                    std::string source);

// A WordPiece tokenizer's options.max_length; nullopt when it has none or the
// tokenizer is no WordPiece one.
std::optional<int64_t> wordpiece_max_length(const Tokenizer& tokenizer);

// llama.cpp's converter stores a BERT vocabulary with word-initial pieces prefixed by
// U+2581 and "##" stripped from continuations, control tokens unchanged: this gives
// vocab.txt's form back. With `gguf_types` (tokenizer.ggml.token_type), type 3
// (control) marks the tokens kept as they are; without it, unprefixed tokens of the
// form "[...]" are taken as control tokens.
std::vector<std::string> wordpiece_vocab_from_gguf_tokens(const std::vector<std::string>& gguf_tokens,
                                                          const std::vector<int32_t>& gguf_types = {});

} // namespace embedlab
