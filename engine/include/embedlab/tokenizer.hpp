// Tokenizers: GPT-2 byte-level BPE, SentencePiece, WordPiece, llama2.c tokenizer.bin
// and GGUF embedded vocabularies, behind one interface.
//
//   auto tok = embedlab::load_tokenizer_from_directory("models/tinygpt2");
//   std::vector<int32_t> ids = tok->encode("Once upon a time");   // no BOS added
//
// Thread safety: encode/decode are const and safe to call from several threads
// on one tokenizer. Loaders throw InputError naming the file and the problem.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embedlab/vocab.hpp"

namespace embedlab {

class Tokenizer {
public:
    virtual ~Tokenizer() = default;

    // Ids of the whole text, exactly as the reference implementation gives them,
    // without BOS/EOS. Empty text gives no ids.
    virtual std::vector<int32_t> encode(std::string_view text) const = 0;
    virtual std::string decode(std::span<const int32_t> ids) const = 0;

    // The token as a readable string (for views and `neighbours` output).
    virtual std::string token_text(int32_t id) const = 0;
    virtual int64_t vocab_size() const = 0;
    // "gpt2-bpe", "sentencepiece", "llama2c", "gguf-llama"
    virtual std::string kind() const = 0;
    virtual bool is_special(int32_t id) const = 0;
    virtual std::optional<int32_t> unk_id() const = 0;
    virtual std::optional<int32_t> bos_id() const = 0;
    virtual std::optional<int32_t> eos_id() const = 0;
    // An encoder's framing tokens (WordPiece: [CLS] and [SEP] wrap an input or a
    // pair, [MASK] for masked-LM scoring, [PAD] for batches); nullopt for decoders.
    virtual std::optional<int32_t> cls_id() const { return std::nullopt; }
    virtual std::optional<int32_t> sep_id() const { return std::nullopt; }
    virtual std::optional<int32_t> mask_id() const { return std::nullopt; }
    virtual std::optional<int32_t> pad_id() const { return std::nullopt; }
    // The vocabulary for a GGUF export; nullopt when llama.cpp could not
    // reproduce this tokenizer (`why_not` then says why).
    virtual std::optional<GgufVocabulary> gguf_vocabulary(std::string* why_not = nullptr) const
    {
        if (why_not)
            *why_not = kind() + " tokenizers cannot be written to GGUF";
        return std::nullopt;
    }
};

// GPT-2 byte-level BPE from vocab.json + merges.txt.
std::unique_ptr<Tokenizer> load_gpt2_bpe(const std::filesystem::path& vocab_json,
                                         const std::filesystem::path& merges_txt);
// Hugging Face tokenizer.json with model.type "BPE" and a ByteLevel pre-tokenizer.
std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::filesystem::path& tokenizer_json);
// SentencePiece tokenizer.model (BPE models, identity normalizer), read natively
// and encoded as libsentencepiece does. libsentencepiece itself cannot be linked:
// Debian's build exports a bundled protobuf that collides with libtorch's and
// crashes the process before main().
std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file);
// llama2.c tokenizer.bin; vocab_size comes from the checkpoint header.
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::filesystem::path& tokenizer_bin,
                                                  int64_t vocab_size);
// Score-merge (SentencePiece BPE) encoder over a vocabulary read from a file;
// `source` names that file in messages.
std::unique_ptr<Tokenizer> make_scored_vocab_tokenizer(ScoredVocab vocab, std::string kind,
                                                       const std::string& source);

// WordPiece (BERT, DistilBERT, MiniLM): wordpiece.hpp.

// Picks the tokenizer of a Hugging Face model directory: tokenizer.json (byte-level
// BPE or WordPiece), else vocab.json + merges.txt, else vocab.txt (WordPiece), else
// tokenizer.model. Throws InputError naming the
// directory if none is there.
std::unique_ptr<Tokenizer> load_tokenizer_from_directory(const std::filesystem::path& dir);

} // namespace embedlab
