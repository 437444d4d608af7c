// The byte-level BPE tokenizer: pre-tokenize, map bytes to their one-character
// tokens, then apply merges lowest rank first (leftmost on ties), as Hugging
// Face tokenizers and GPT-2's encoder.py do.
#include "tokenizer/byte_level_bpe.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <unordered_map>

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "embedlab/error.hpp"
#include "tokenizer/pair_merge.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/text_util.hpp"
#include "tokenizer/windowed_merge.hpp"

namespace embedlab::tokenizer_impl {
namespace {

// Ids beyond this are a corrupt file, not a real vocabulary; the bound keeps a
// lying file from making us allocate gigabytes.
constexpr int64_t max_vocab_id = 1 << 26;

std::string to_byte_level(std::string_view bytes)
{
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes)
        append_utf8(out, byte_to_code_point(b));
    return out;
}

bool not_continuation(char c)
{
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
}

uint64_t pair_key(int32_t left, int32_t right)
{
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Merge {
    int32_t rank;
    int32_t merged_id;
};

std::string nfc(std::string_view text)
{
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
    std::string out;
    icu::StringByteSink<std::string> sink(&out);
    if (U_SUCCESS(status))
        normalizer->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink,
                                  nullptr, status);
    if (U_FAILURE(status))
        return std::string(text); // not normalizable (e.g. too long): leave as is
    return out;
}

class ByteLevelBpeTokenizer final : public Tokenizer {
public:
    explicit ByteLevelBpeTokenizer(ByteLevelBpeSpec spec);

    std::vector<int32_t> encode(std::string_view text) const override;
    std::string decode(std::span<const int32_t> ids) const override;
    std::string token_text(int32_t id) const override;
    int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
    std::string kind() const override { return "gpt2-bpe"; }
    bool is_special(int32_t id) const override
    {
        return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)];
    }
    std::optional<int32_t> unk_id() const override { return unk_; }
    std::optional<int32_t> bos_id() const override { return bos_; }
    std::optional<int32_t> eos_id() const override { return eos_; }
    std::optional<GgufVocabulary> gguf_vocabulary(std::string* why_not) const override;

private:
    void check_id(int32_t id) const;
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
    // Merges `text` alone (a piece, or a window of one): its ids, and where each starts.
    void merge_bytes(std::string_view text, std::vector<int32_t>& out,
                     std::vector<SymbolStart>* starts) const;
    // Whether cutting `piece` at p (merging [begin, p) alone) is provably exact.
    CutTest cut_test(std::string_view piece, size_t begin, size_t p) const;

    std::filesystem::path source_;
    std::vector<std::string> tokens_; // id -> byte-level text (added: plain content)
    std::vector<uint8_t> special_;    // id -> special added token
    std::vector<uint8_t> added_;      // id -> added token (decoded as plain text)
    std::unordered_map<std::string, int32_t> token_ids_;
    std::array<int32_t, 256> byte_ids_{};
    std::array<std::string, 256> byte_texts_; // the byte-level text of each byte
    std::unordered_map<uint64_t, Merge> merges_;
    size_t max_token_text_ = 0;  // longest byte-level text of a token a merge may make
    size_t max_vocab_text_ = 0;  // longest byte-level text in the vocabulary
    size_t max_token_bytes_ = 0; // longest token a merge may make, in bytes of text
    bool drops_bytes_ = false;   // some byte has no token (and is dropped)
    std::optional<int32_t> bos_, eos_, unk_;
    ByteLevelBpeSpec options_;             // flags only; its tables are moved out
    std::vector<std::string> merge_lines_; // "left right" in priority order, for GGUF export
};

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(ByteLevelBpeSpec spec) : source_(spec.source)
{
    int64_t max_id = -1;
    for (const auto& [text, id] : spec.vocab) {
        if (id < 0 || id > max_vocab_id)
            throw InputError(file_message(source_, "token \"" + printable_utf8(text) +
                                                       "\" has an invalid id " + std::to_string(id)));
        max_id = std::max<int64_t>(max_id, id);
    }
    for (const AddedToken& t : spec.added_tokens) {
        if (t.id < 0 || t.id > max_vocab_id)
            throw InputError(file_message(source_, "added token \"" + printable_utf8(t.content) +
                                                       "\" has an invalid id " + std::to_string(t.id)));
        max_id = std::max<int64_t>(max_id, t.id);
    }
    if (max_id < 0)
        throw InputError(file_message(source_, "the vocabulary is empty"));

    const auto size = static_cast<size_t>(max_id + 1);
    tokens_.resize(size);
    special_.assign(size, 0);
    added_.assign(size, 0);
    token_ids_.reserve(spec.vocab.size());
    for (auto& [text, id] : spec.vocab) {
        max_vocab_text_ = std::max(max_vocab_text_, text.size());
        token_ids_.emplace(text, id);
        if (tokens_[static_cast<size_t>(id)].empty())
            tokens_[static_cast<size_t>(id)] = std::move(text);
    }
    for (const AddedToken& t : spec.added_tokens) {
        tokens_[static_cast<size_t>(t.id)] = t.content;
        added_[static_cast<size_t>(t.id)] = 1;
        special_[static_cast<size_t>(t.id)] = t.special ? 1 : 0;
    }

    for (int b = 0; b < 256; ++b) {
        std::string one;
        append_utf8(one, byte_to_code_point(static_cast<unsigned char>(b)));
        const auto it = token_ids_.find(one);
        byte_ids_[static_cast<size_t>(b)] = it == token_ids_.end() ? -1 : it->second;
        byte_texts_[static_cast<size_t>(b)] = one;
        drops_bytes_ = drops_bytes_ || it == token_ids_.end();
    }

    const std::filesystem::path& merges_file = spec.merges_source.empty() ? source_ : spec.merges_source;
    const auto id_of = [&](const std::string& text, size_t merge_index) {
        const auto it = token_ids_.find(text);
        if (it == token_ids_.end())
            throw InputError(file_message(merges_file, "merge " + std::to_string(merge_index + 1) +
                                                           " uses \"" + printable_utf8(text) +
                                                           "\", which is not in the vocabulary"));
        return it->second;
    };
    merges_.reserve(spec.merges.size());
    for (size_t i = 0; i < spec.merges.size(); ++i) {
        const auto& [left, right] = spec.merges[i];
        const int32_t left_id = id_of(left, i);
        const int32_t right_id = id_of(right, i);
        const int32_t merged_id = id_of(left + right, i);
        // A repeated pair keeps its last rank, as in GPT-2 and Hugging Face.
        merges_[pair_key(left_id, right_id)] = Merge{static_cast<int32_t>(i), merged_id};
        max_token_text_ = std::max(max_token_text_, left.size() + right.size());
        // One code point of byte-level text per byte.
        const auto bytes = static_cast<size_t>(std::count_if(left.begin(), left.end(), not_continuation) +
                                               std::count_if(right.begin(), right.end(), not_continuation));
        max_token_bytes_ = std::max(max_token_bytes_, bytes);
    }
    for (const std::string& t : byte_texts_)
        max_token_text_ = std::max(max_token_text_, t.size());

    // Ids the source names win; vocab.json, merges.txt and tokenizer.json's model name
    // no BOS/EOS: recognise the usual names.
    const auto named = [&](std::optional<int32_t> id) {
        return id && *id >= 0 && static_cast<size_t>(*id) < size ? id : std::nullopt;
    };
    bos_ = named(spec.bos_id);
    eos_ = named(spec.eos_id);
    unk_ = named(spec.unk_id);
    for (const AddedToken& t : spec.added_tokens) {
        if (!t.special)
            continue;
        if (!bos_ && (t.content == "<|endoftext|>" || t.content == "<s>" ||
                      t.content == "<|begin_of_text|>" || t.content == "<bos>"))
            bos_ = t.id;
        if (!eos_ && (t.content == "<|endoftext|>" || t.content == "</s>" || t.content == "<|end_of_text|>" ||
                      t.content == "<eos>"))
            eos_ = t.id;
    }

    spec.vocab.clear();
    merge_lines_.reserve(spec.merges.size());
    for (const auto& [left, right] : spec.merges)
        merge_lines_.push_back(left + " " + right);
    spec.merges.clear();
    spec.added_tokens.clear();
    options_ = std::move(spec);
}

std::optional<GgufVocabulary> ByteLevelBpeTokenizer::gguf_vocabulary(std::string* why_not) const
{
    // llama.cpp's pre-tokenizers that split as this one does: "gpt-2" (GPT-2's regex,
    // no prefix space), "smollm" (every digit split off first: Hugging Face's Digits,
    // individually), "llama-bpe" (Llama 3's regex, whole words in the vocabulary first)
    // and "qwen2" (Qwen2's regex; llama.cpp has no NFC).
    const ByteLevelBpeSpec& o = options_;
    const bool plain = o.use_regex && !o.add_prefix_space && !o.nfc;
    std::string pre;
    if (plain && o.pattern == SplitPattern::gpt2 && !o.ignore_merges &&
        (!o.split_digits || o.individual_digits))
        pre = o.split_digits ? "smollm" : "gpt-2";
    else if (plain && o.pattern == SplitPattern::llama3 && o.ignore_merges && !o.split_digits)
        pre = "llama-bpe";
    else if (plain && o.pattern == SplitPattern::qwen2 && !o.ignore_merges && !o.split_digits)
        pre = "qwen2";
    if (pre.empty()) {
        if (why_not)
            *why_not =
                source_.string() +
                ": this byte-level BPE's pre-tokenizer is none of llama.cpp's gpt-2, smollm, llama-bpe "
                "and qwen2; llama.cpp would tokenize differently";
        return std::nullopt;
    }
    GgufVocabulary v;
    v.model = "gpt2";
    v.pre = pre;
    v.tokens = tokens_;
    v.merges = merge_lines_;
    v.types.reserve(tokens_.size());
    for (size_t id = 0; id < tokens_.size(); ++id)
        v.types.push_back(special_[id] ? 3 : added_[id] ? 4 : 1);
    v.bos_id = bos_.value_or(-1);
    v.unk_id = unk_.value_or(-1);
    v.eos_id = eos_.value_or(-1);
    v.add_space_prefix = false;
    return v;
}

void ByteLevelBpeTokenizer::check_id(int32_t id) const
{
    check_token_id(source_, id, vocab_size());
}

void ByteLevelBpeTokenizer::merge_bytes(std::string_view text, std::vector<int32_t>& out,
                                        std::vector<SymbolStart>* starts) const
{
    std::vector<IdSymbol> symbols;
    std::vector<int32_t> offsets; // symbol -> byte offset, when bytes are dropped
    symbols.reserve(text.size());
    for (size_t pos = 0; pos < text.size(); ++pos) {
        const int32_t id = byte_ids_[static_cast<unsigned char>(text[pos])];
        if (id < 0)
            continue; // no token for this byte: dropped, as HF does without an unk token
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({id, index - 1, index + 1});
        if (drops_bytes_ && starts)
            offsets.push_back(static_cast<int32_t>(pos));
    }
    if (symbols.empty())
        return;
    symbols.back().next = -1;

    // Lowest rank first, then leftmost.
    std::vector<int32_t> survivors;
    merge_ids<int32_t>(
        symbols, std::less<>(),
        [&](int32_t left_id, int32_t right_id) -> std::optional<IdMerge<int32_t>> {
            const auto it = merges_.find(pair_key(left_id, right_id));
            if (it == merges_.end())
                return std::nullopt;
            return IdMerge<int32_t>{it->second.rank, it->second.merged_id};
        },
        out, starts ? &survivors : nullptr);
    if (starts)
        for (size_t k = 0; k < survivors.size(); ++k) {
            const auto i = static_cast<size_t>(survivors[k]);
            starts->push_back({drops_bytes_ ? static_cast<size_t>(offsets[i]) : i, k});
        }
}

CutTest ByteLevelBpeTokenizer::cut_test(std::string_view piece, size_t begin, size_t p) const
{
    // The initial symbols' texts on each side, nearest first, reaching max_token_text_
    // (or the end); a long run of dropped bytes gives up.
    const size_t scan_limit = 4 * max_token_text_ + 64;
    {
        // Cheap first: the two bytes at the cut (most cuts in a run of letters fail here).
        size_t l = p, r = p;
        while (l > begin && p - l < scan_limit && byte_ids_[static_cast<unsigned char>(piece[l - 1])] < 0)
            --l;
        while (r < piece.size() && r - p < scan_limit && byte_ids_[static_cast<unsigned char>(piece[r])] < 0)
            ++r;
        if (l > begin && r < piece.size() &&
            merges_.contains(pair_key(byte_ids_[static_cast<unsigned char>(piece[l - 1])],
                                      byte_ids_[static_cast<unsigned char>(piece[r])])))
            return CutTest::cheap_no;
    }
    std::vector<std::string> left, right;
    size_t text = 0;
    size_t pos = p;
    for (; pos > begin && text <= max_token_text_ && p - pos < scan_limit; --pos) {
        const auto b = static_cast<unsigned char>(piece[pos - 1]);
        if (byte_ids_[b] >= 0) {
            left.push_back(byte_texts_[b]);
            text += left.back().size();
        }
    }
    if (pos > begin && text <= max_token_text_)
        return CutTest::no;
    text = 0;
    for (pos = p; pos < piece.size() && text <= max_token_text_ && pos - p < scan_limit; ++pos) {
        const auto b = static_cast<unsigned char>(piece[pos]);
        if (byte_ids_[b] >= 0) {
            right.push_back(byte_texts_[b]);
            text += right.back().size();
        }
    }
    if (pos < piece.size() && text <= max_token_text_)
        return CutTest::no;
    const auto id_of = [&](const std::string& t) {
        const auto it = token_ids_.find(t);
        return it == token_ids_.end() ? -1 : it->second;
    };
    return no_merge_across(
        left, right, max_token_text_, [&](const std::string& t, bool) { return id_of(t) >= 0; },
        [&](const std::string& l, const std::string& r) {
            const int32_t a = id_of(l), b = id_of(r);
            return a >= 0 && b >= 0 && merges_.contains(pair_key(a, b));
        });
}

void ByteLevelBpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const
{
    if (options_.ignore_merges && piece.size() <= max_vocab_text_) {
        const auto it = token_ids_.find(to_byte_level(piece));
        if (it != token_ids_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    const size_t window = merge_window_bytes(max_token_bytes_);
    if (piece.size() <= window + window / 2) {
        merge_bytes(piece, out, nullptr);
        return;
    }
    merge_in_windows(
        piece, window,
        [&](std::string_view text, std::vector<int32_t>& ids, std::vector<SymbolStart>* starts) {
            merge_bytes(text, ids, starts);
        },
        [&](size_t begin, size_t p) { return cut_test(piece, begin, p); }, 4 * max_token_text_ + 64, out);
}

std::vector<int32_t> ByteLevelBpeTokenizer::encode(std::string_view text) const
{
    std::vector<int32_t> ids;
    if (text.empty())
        return ids;

    std::string prepared;
    if (options_.nfc) {
        prepared = nfc(text);
        text = prepared;
    }
    if (options_.add_prefix_space && text.front() != ' ') {
        std::string with_space(1, ' ');
        with_space.append(text);
        prepared = std::move(with_space);
        text = prepared;
    }

    // Words repeat a lot: reuse the ids a piece got the first time it was seen
    // in this call (a per-call cache, so calls share no mutable state). Bounded:
    // random text has as many distinct pieces as pieces.
    struct Span {
        size_t start;
        size_t length;
    };
    constexpr size_t max_cached = size_t{1} << 16, max_cached_piece = 64;
    std::unordered_map<std::string_view, Span> seen;
    reserve_ids(ids, text.size());
    const auto on_piece = [&](std::string_view piece) {
        if (piece.size() > max_cached_piece) {
            encode_piece(piece, ids);
            return;
        }
        if (seen.size() >= max_cached)
            seen.clear();
        const auto [it, inserted] = seen.try_emplace(piece, Span{ids.size(), 0});
        if (!inserted) {
            for (size_t i = 0; i < it->second.length; ++i) {
                const int32_t id = ids[it->second.start + i];
                ids.push_back(id);
            }
            return;
        }
        encode_piece(piece, ids);
        it->second.length = ids.size() - it->second.start;
    };
    // Piece by piece as the pre-tokenizers find them: no vector of all pieces.
    const auto on_segment = [&](std::string_view segment) {
        if (!options_.use_regex) {
            on_piece(segment);
            return;
        }
        const int max_digits = options_.pattern == SplitPattern::llama3 ? 3 : 1;
        for (size_t pos = 0; pos < segment.size();) {
            const size_t end = options_.pattern == SplitPattern::gpt2
                                   ? gpt2_piece_end(segment, pos)
                                   : llama3_piece_end(segment, pos, max_digits);
            on_piece(segment.substr(pos, end - pos));
            pos = end;
        }
    };
    if (options_.split_digits)
        for_each_digit_split(text, options_.individual_digits, on_segment);
    else
        on_segment(text);
    fit_ids(ids);
    return ids;
}

std::string ByteLevelBpeTokenizer::decode(std::span<const int32_t> ids) const
{
    std::string out;
    for (int32_t id : ids) {
        check_id(id);
        const std::string& token = tokens_[static_cast<size_t>(id)];
        if (added_[static_cast<size_t>(id)]) {
            out += token;
            continue;
        }
        for (size_t pos = 0; pos < token.size();) {
            const CodePoint cp = next_code_point(token, pos);
            const int byte = byte_from_code_point(cp.value);
            if (byte >= 0)
                out.push_back(static_cast<char>(byte));
            else
                out.append(token, pos, static_cast<size_t>(cp.length)); // not byte-level text
            pos += static_cast<size_t>(cp.length);
        }
    }
    return out;
}

std::string ByteLevelBpeTokenizer::token_text(int32_t id) const
{
    check_id(id);
    if (added_[static_cast<size_t>(id)])
        return tokens_[static_cast<size_t>(id)];
    const int32_t one[] = {id};
    return printable_utf8(decode(one));
}

} // namespace

std::unique_ptr<Tokenizer> make_byte_level_bpe(ByteLevelBpeSpec spec)
{
    return std::make_unique<ByteLevelBpeTokenizer>(std::move(spec));
}

} // namespace embedlab::tokenizer_impl
