// The tokenizer over a ScoredVocab, shared by llama2.c tokenizer.bin, GGUF
// vocabularies and SentencePiece .model files. Two merge styles:
//  - llama2c: run.c's encode (unknown code points become byte tokens before
//    merging; spaces follow the vocabulary's convention, ' ' or '▁');
//  - sentencepiece: libsentencepiece's BPE model (normalizer, user-defined
//    symbols, byte fallback after merging, unused-piece resegmentation).
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "embedlab/tokenizer.hpp"

namespace embedlab::tokenizer_impl {

// SentencePiece / GGUF token types.
enum TokenType : int32_t {
    type_normal = 1,
    type_unknown = 2,
    type_control = 3,
    type_user_defined = 4,
    type_unused = 5,
    type_byte = 6,
};

struct ScoredEncoderOptions {
    enum class Style { llama2c, sentencepiece };
    Style style = Style::llama2c;
    // sentencepiece style only (the NormalizerSpec / TrainerSpec fields):
    bool byte_fallback = true;
    bool remove_extra_whitespaces = false;
    bool escape_whitespaces = true;
    bool whitespace_as_suffix = false;
    std::string unk_surface = " \xE2\x81\x87 "; // " ⁇ ", what decode shows for <unk>
};

class ScoredVocabTokenizer final : public Tokenizer {
public:
    ScoredVocabTokenizer(ScoredVocab vocab, std::string kind, std::string source,
                         ScoredEncoderOptions options);

    std::vector<int32_t> encode(std::string_view text) const override;
    std::string decode(std::span<const int32_t> ids) const override;
    std::string token_text(int32_t id) const override;
    int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.tokens.size()); }
    std::string kind() const override { return kind_; }
    bool is_special(int32_t id) const override;
    std::optional<int32_t> unk_id() const override { return optional_id(vocab_.unk_id); }
    std::optional<int32_t> bos_id() const override { return optional_id(vocab_.bos_id); }
    std::optional<int32_t> eos_id() const override { return optional_id(vocab_.eos_id); }
    std::optional<GgufVocabulary> gguf_vocabulary(std::string* why_not) const override;

private:
    static std::optional<int32_t> optional_id(int32_t id)
    {
        return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
    }
    int32_t type_of(int32_t id) const;
    void check_id(int32_t id) const;
    int byte_of(int32_t id) const; // the byte a byte token stands for, or -1
    [[noreturn]] void throw_no_byte_token(unsigned char byte) const;

    std::vector<int32_t> encode_llama2c(std::string_view text) const;
    void merge_llama2c(std::string_view prepared, std::vector<int32_t>& ids) const;
    std::vector<int32_t> encode_sentencepiece(std::string_view text) const;
    void merge_sentencepiece(std::string_view normalized, std::vector<int32_t>& ids) const;
    // Calls merge on consecutive pieces of `all` cut just before a space that
    // follows a non-space, when no merge can cross such a cut: long lines then cost memory per piece, not per
    // line.
    template <class Merge> void in_pieces(std::string_view all, const Merge& merge) const;
    std::string normalize_sentencepiece(std::string_view text) const;
    size_t user_defined_match(std::string_view rest) const;

    ScoredVocab vocab_;
    std::string kind_;
    std::string source_;
    ScoredEncoderOptions options_;
    std::string space_; // how the vocabulary writes a space: " " or "▁"
    // Every token holds space_ only in a leading run, so no merge crosses the
    // boundary between a non-space and a space: the text is merged piece by piece.
    bool cut_before_space_ = false;

    // Views into vocab_.tokens, which never changes after construction.
    std::unordered_map<std::string_view, int32_t> token_ids_; // any token; first id wins
    std::unordered_map<std::string_view, int32_t> merge_ids_; // tokens a merge may produce
    std::vector<std::string_view> user_defined_;              // longest first
    std::array<int32_t, 256> byte_ids_{};                     // byte-fallback token, or -1
};

template <class Merge> void ScoredVocabTokenizer::in_pieces(std::string_view all, const Merge& merge) const
{
    // Long enough that the cuts cost nothing; short enough that the merge's
    // symbols and queue stay a few MB (a 52 MB line took 3.9 GB in one piece).
    constexpr size_t piece_bytes = size_t{1} << 16;
    size_t begin = 0;
    while (begin < all.size()) {
        size_t end = all.size();
        if (cut_before_space_ && end - begin > 2 * piece_bytes) {
            // Before a space that follows a non-space (a run of spaces may merge).
            size_t at = all.find(space_, begin + piece_bytes);
            while (at != std::string_view::npos &&
                   all.compare(at - space_.size(), space_.size(), space_) == 0)
                at = all.find(space_, at + space_.size());
            end = std::min(end, at);
        }
        merge(all.substr(begin, end - begin));
        begin = end;
    }
}

} // namespace embedlab::tokenizer_impl
