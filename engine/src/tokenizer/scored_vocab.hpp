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
#include "tokenizer/windowed_merge.hpp"

namespace embedlab::tokenizer_impl {

struct SentencePieceScratch; // sentencepiece_encode.cpp

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
    // Merge `text` alone, appending its ids and (if `starts`) where each final
    // symbol starts (windowed_merge.hpp).
    void merge_llama2c(std::string_view text, std::vector<int32_t>& ids,
                       std::vector<SymbolStart>* starts) const;
    std::vector<int32_t> encode_sentencepiece(std::string_view text) const;
    // Merges `text` alone as merge_llama2c does; `scratch` holds the buffers and the
    // word cache of one encode (sentencepiece_encode.cpp).
    void merge_sentencepiece(std::string_view text, std::vector<int32_t>& ids,
                             std::vector<SymbolStart>* starts, SentencePieceScratch& scratch) const;
    // libsentencepiece's merge of `text` as one run of symbols (starts' offsets plus `base`).
    void merge_sentencepiece_run(std::string_view text, size_t base, std::vector<int32_t>& ids,
                                 std::vector<SymbolStart>* starts, SentencePieceScratch& scratch) const;
    // Appends the ids of one word (a span no merge crosses), from the cache when it is there.
    void merge_sentencepiece_word(std::string_view word, std::vector<int32_t>& ids,
                                  SentencePieceScratch& scratch) const;
    // The ids of `all` merged by `merge`, window by window when it is long
    // (windowed_merge.hpp): the merge's symbols and queue cost memory per window.
    template <class Merge> std::vector<int32_t> in_windows(std::string_view all, const Merge& merge) const;
    // Whether cutting `all` at p (merging [begin, p) alone) is provably exact.
    CutTest cut_test(std::string_view all, size_t begin, size_t p) const;
    size_t user_defined_match(std::string_view rest) const;

    ScoredVocab vocab_;
    std::string kind_;
    std::string source_;
    ScoredEncoderOptions options_;
    std::string space_; // how the vocabulary writes a space: " " or "▁"
    // Every token holds space_ only in a leading run, so no merge crosses the
    // boundary between a non-space and a space: the text is merged piece by piece.
    bool cut_before_space_ = false;
    // Some piece has type "unused": its merge halves are remembered across a whole
    // merge call (libsentencepiece's rev_merge), so the text is not merged word by word.
    bool any_unused_ = false;
    size_t max_token_bytes_ = 0; // the longest token

    // Views into vocab_.tokens, which never changes after construction.
    std::unordered_map<std::string_view, int32_t> token_ids_; // any token; first id wins
    std::unordered_map<std::string_view, int32_t> merge_ids_; // tokens a merge may produce
    std::vector<std::string_view> user_defined_;              // longest first
    std::array<int32_t, 256> byte_ids_{};                     // byte-fallback token, or -1
};

template <class Merge>
std::vector<int32_t> ScoredVocabTokenizer::in_windows(std::string_view all, const Merge& merge) const
{
    // At most one id per byte: byte fallback, and every symbol has a byte.
    std::vector<int32_t> ids;
    reserve_ids(ids, all.size());
    const size_t window = merge_window_bytes(max_token_bytes_);
    if (all.size() <= window + window / 2)
        merge(all, ids, nullptr);
    else
        merge_in_windows(
            all, window, merge, [&](size_t begin, size_t p) { return cut_test(all, begin, p); },
            max_token_bytes_ + 16, ids);
    fit_ids(ids);
    return ids;
}

} // namespace embedlab::tokenizer_impl
