// ScoredVocabTokenizer: construction, decoding, and run.c's score-merge
// encoder (llama2.c tokenizer.bin and GGUF vocabularies).
#include "tokenizer/scored_vocab.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "embedlab/error.hpp"
#include "tokenizer/pair_merge.hpp"
#include "tokenizer/text_util.hpp"

namespace embedlab {
namespace tokenizer_impl {
namespace {

constexpr std::string_view sp_space = "\xE2\x96\x81"; // U+2581 "▁", SentencePiece's space

// The byte of a "<0xXX>" token, or -1.
int parse_byte_token(const std::string& token)
{
    unsigned value = 0;
    char tail = 0;
    if (token.size() != 6 || std::sscanf(token.c_str(), "<0x%2X%c", &value, &tail) != 2 || tail != '>')
        return -1;
    return static_cast<int>(value);
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to)
{
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0;;) {
        const size_t hit = text.find(from, pos);
        if (hit == std::string_view::npos) {
            out.append(text.substr(pos));
            return out;
        }
        out.append(text.substr(pos, hit - pos));
        out.append(to);
        pos = hit + from.size();
    }
}

} // namespace

ScoredVocabTokenizer::ScoredVocabTokenizer(ScoredVocab vocab, std::string kind, std::string source,
                                           ScoredEncoderOptions options)
    : vocab_(std::move(vocab)), kind_(std::move(kind)), source_(std::move(source)),
      options_(std::move(options))
{
    const size_t n = vocab_.tokens.size();
    if (n == 0)
        throw InputError(file_message(source_, "the vocabulary is empty"));
    if (n > static_cast<size_t>(INT32_MAX))
        throw InputError(file_message(source_, "the vocabulary is too large"));
    if (vocab_.scores.size() != n)
        throw InputError(file_message(source_, "the vocabulary has " + std::to_string(n) + " tokens but " +
                                                   std::to_string(vocab_.scores.size()) + " scores"));
    if (!vocab_.types.empty() && vocab_.types.size() != n)
        throw InputError(file_message(source_, "the vocabulary has " + std::to_string(n) + " tokens but " +
                                                   std::to_string(vocab_.types.size()) + " token types"));
    for (const auto& [name, id] : {std::pair{"BOS", vocab_.bos_id}, std::pair{"EOS", vocab_.eos_id},
                                   std::pair{"unknown", vocab_.unk_id}})
        if (id < -1 || id >= static_cast<int64_t>(n))
            throw InputError(file_message(source_, std::string(name) + " token id " + std::to_string(id) +
                                                       " is out of range"));

    const bool sentencepiece = options_.style == ScoredEncoderOptions::Style::sentencepiece;
    token_ids_.reserve(n);
    merge_ids_.reserve(n);
    bool any_sp_space = false;
    for (size_t i = 0; i < n; ++i) {
        const auto id = static_cast<int32_t>(i);
        const std::string_view token = vocab_.tokens[i];
        const int32_t type = type_of(id);
        const bool reserved = type == type_control || type == type_unknown || type == type_byte;
        // libsentencepiece's PieceToId looks at reserved pieces first.
        if (sentencepiece && reserved)
            token_ids_.insert_or_assign(token, id);
        else
            token_ids_.emplace(token, id);
        if (!sentencepiece || !reserved)
            merge_ids_.emplace(token, id);
        if (sentencepiece && type == type_user_defined)
            user_defined_.push_back(token);
        any_unused_ = any_unused_ || type == type_unused;
        any_sp_space = any_sp_space || token.find(sp_space) != std::string_view::npos;
        max_token_bytes_ = std::max(max_token_bytes_, token.size());
    }
    std::stable_sort(user_defined_.begin(), user_defined_.end(),
                     [](std::string_view a, std::string_view b) { return a.size() > b.size(); });
    // llama2.c's tokenizer.bin stores spaces as ' ', GGUF and .model files as '▁'. A GGUF
    // spells a space '▁' even when no piece holds one (a vocabulary trimmed to its byte
    // pieces): llama.cpp then falls back to the bytes of '▁', not to the byte 0x20.
    space_ = sentencepiece ? (options_.escape_whitespaces ? std::string(sp_space) : " ")
                           : (any_sp_space || kind_ != "llama2c" ? std::string(sp_space) : " ");

    cut_before_space_ = !(sentencepiece && options_.whitespace_as_suffix) &&
                        (sentencepiece || token_ids_.contains(space_)) &&
                        std::all_of(vocab_.tokens.begin(), vocab_.tokens.end(), [&](const std::string& t) {
                            // Spaces only in a leading run ("▁▁▁x" but not "x▁"): then no
                            // merge joins a non-space to the space after it.
                            size_t at = 0;
                            while (t.compare(at, space_.size(), space_) == 0)
                                at += space_.size();
                            return t.find(space_, at) == std::string::npos;
                        });

    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        const auto it = token_ids_.find(name);
        int32_t id = it == token_ids_.end() ? -1 : it->second;
        // run.c hard-codes byte b as token b + 3 (after <unk>, <s>, </s>).
        if (id < 0 && !sentencepiece && kind_ == "llama2c" && b + 3 < static_cast<int>(n))
            id = b + 3;
        if (id < 0)
            id = vocab_.unk_id;
        byte_ids_[static_cast<size_t>(b)] = id;
    }
}

int32_t ScoredVocabTokenizer::type_of(int32_t id) const
{
    if (!vocab_.types.empty())
        return vocab_.types[static_cast<size_t>(id)];
    // No stored types (llama2.c): the fixed special ids and "<0xXX>" names.
    if (id == vocab_.unk_id)
        return type_unknown;
    if (id == vocab_.bos_id || id == vocab_.eos_id)
        return type_control;
    if (parse_byte_token(vocab_.tokens[static_cast<size_t>(id)]) >= 0)
        return type_byte;
    return type_normal;
}

void ScoredVocabTokenizer::check_id(int32_t id) const
{
    check_token_id(source_, id, vocab_size());
}

bool ScoredVocabTokenizer::is_special(int32_t id) const
{
    if (id < 0 || id >= vocab_size())
        return false;
    const int32_t type = type_of(id);
    return type == type_control || type == type_unknown;
}

std::optional<GgufVocabulary> ScoredVocabTokenizer::gguf_vocabulary(std::string* /*why_not*/) const
{
    GgufVocabulary v;
    v.model = "llama"; // llama.cpp's SentencePiece-style (SPM) tokenizer
    v.tokens = vocab_.tokens;
    v.scores = vocab_.scores;
    v.types.reserve(vocab_.tokens.size());
    for (int32_t id = 0; id < static_cast<int32_t>(vocab_.tokens.size()); ++id)
        v.types.push_back(type_of(id));
    v.bos_id = vocab_.bos_id;
    v.eos_id = vocab_.eos_id;
    v.unk_id = vocab_.unk_id;
    v.add_space_prefix = vocab_.add_dummy_prefix;
    return v;
}

int ScoredVocabTokenizer::byte_of(int32_t id) const
{
    if (type_of(id) != type_byte)
        return -1;
    return parse_byte_token(vocab_.tokens[static_cast<size_t>(id)]);
}

void ScoredVocabTokenizer::throw_no_byte_token(unsigned char byte) const
{
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", byte);
    throw InputError(file_message(source_, std::string("the text has byte ") + hex +
                                               ", which has no token and no unknown-token fallback"));
}

std::vector<int32_t> ScoredVocabTokenizer::encode(std::string_view text) const
{
    if (text.empty())
        return {};
    if (options_.style == ScoredEncoderOptions::Style::sentencepiece)
        return encode_sentencepiece(text);
    return encode_llama2c(text);
}

std::vector<int32_t> ScoredVocabTokenizer::encode_llama2c(std::string_view text) const
{
    // One copy: the dummy prefix, and spaces written as the vocabulary writes them.
    std::string prepared;
    prepared.reserve(text.size() + space_.size());
    if (vocab_.add_dummy_prefix)
        prepared += space_;
    for (char c : text) {
        if (c == ' ')
            prepared += space_;
        else
            prepared += c;
    }
    return in_windows(prepared, [&](std::string_view piece, std::vector<int32_t>& ids,
                                    std::vector<SymbolStart>* starts) { merge_llama2c(piece, ids, starts); });
}

namespace {

bool continuation_byte(char c)
{
    return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// run.c's grouping: a byte plus up to three following continuation bytes.
size_t llama2c_group_end(std::string_view all, size_t pos)
{
    size_t end = pos + 1;
    while (end < all.size() && end - pos < 4 && continuation_byte(all[end]))
        ++end;
    return end;
}

} // namespace

void ScoredVocabTokenizer::merge_llama2c(std::string_view prepared, std::vector<int32_t>& ids,
                                         std::vector<SymbolStart>* starts) const
{
    // One token per code point, or its bytes' fallback tokens. Grouping follows
    // run.c: a byte plus up to three following continuation bytes.
    std::vector<int32_t> initial;
    std::vector<int32_t> offsets; // initial symbol -> byte offset, for `starts`
    initial.reserve(prepared.size());
    const std::string_view all = prepared;
    for (size_t pos = 0; pos < all.size();) {
        const size_t end = llama2c_group_end(all, pos);
        const std::string_view group = all.substr(pos, end - pos);
        if (const auto it = token_ids_.find(group); it != token_ids_.end()) {
            initial.push_back(it->second);
            if (starts)
                offsets.push_back(static_cast<int32_t>(pos));
        } else {
            for (size_t k = pos; k < end; ++k) {
                const auto b = static_cast<unsigned char>(all[k]);
                if (byte_ids_[b] < 0)
                    throw_no_byte_token(b);
                initial.push_back(byte_ids_[b]);
                if (starts)
                    offsets.push_back(static_cast<int32_t>(k));
            }
        }
        pos = end;
    }

    if (initial.empty())
        return;
    std::vector<IdSymbol> symbols(initial.size());
    for (size_t i = 0; i < initial.size(); ++i)
        symbols[i] = {initial[i], static_cast<int32_t>(i) - 1, static_cast<int32_t>(i) + 1};
    symbols.back().next = -1;
    initial = {};

    // Highest score first, leftmost on ties (run.c's strict '>' scan).
    std::string joined;
    std::vector<int32_t> survivors;
    merge_ids<float>(
        symbols, std::greater<>(),
        [&](int32_t left_id, int32_t right_id) -> std::optional<IdMerge<float>> {
            joined = vocab_.tokens[static_cast<size_t>(left_id)];
            joined += vocab_.tokens[static_cast<size_t>(right_id)];
            const auto it = merge_ids_.find(joined);
            if (it == merge_ids_.end())
                return std::nullopt;
            const float score = vocab_.scores[static_cast<size_t>(it->second)];
            // run.c starts its search at -1e10: pairs scored at or below it never merge.
            if (!(score > -1e10f))
                return std::nullopt;
            return IdMerge<float>{score, it->second};
        },
        ids, starts ? &survivors : nullptr);
    if (starts)
        for (size_t k = 0; k < survivors.size(); ++k)
            starts->push_back({static_cast<size_t>(offsets[static_cast<size_t>(survivors[k])]), k});
}

CutTest ScoredVocabTokenizer::cut_test(std::string_view all, size_t begin, size_t p) const
{
    // Only between characters: a non-continuation byte starts a code point and a
    // run.c group, whatever came before.
    if (continuation_byte(all[p]))
        return CutTest::cheap_no;
    // The vocabulary's own guarantee: no token has a space after a non-space.
    if (cut_before_space_ && all.compare(p, space_.size(), space_) == 0 && p >= begin + space_.size() &&
        all.compare(p - space_.size(), space_.size(), space_) != 0)
        return CutTest::yes;
    const bool sentencepiece = options_.style == ScoredEncoderOptions::Style::sentencepiece;
    if (sentencepiece && !user_defined_.empty())
        return CutTest::cheap_no; // a user-defined symbol may span p

    // The initial symbols' merge texts around p (sentencepiece: code points;
    // llama2c: run.c's groups or their bytes' fallback tokens), parsed from a
    // character start far enough left.
    const auto symbols = [&](size_t from, size_t to, std::vector<std::string>& out) {
        for (size_t pos = from; pos < to;) {
            if (sentencepiece) {
                const auto length = static_cast<size_t>(next_code_point(all, pos).length);
                out.emplace_back(all.substr(pos, length));
                pos += length;
                continue;
            }
            const size_t end = llama2c_group_end(all, pos);
            if (const auto it = token_ids_.find(all.substr(pos, end - pos)); it != token_ids_.end()) {
                out.push_back(vocab_.tokens[static_cast<size_t>(it->second)]);
            } else {
                for (size_t k = pos; k < end; ++k) {
                    const int32_t id = byte_ids_[static_cast<unsigned char>(all[k])];
                    if (id < 0)
                        return false; // the merge throws for this byte
                    out.push_back(vocab_.tokens[static_cast<size_t>(id)]);
                }
            }
            pos = end;
        }
        return true;
    };
    const size_t reach = max_token_bytes_ + 8;
    size_t from = p - std::min(p - begin, reach);
    while (from < p && continuation_byte(all[from]))
        ++from;
    if (from > begin && p - from < max_token_bytes_)
        return CutTest::no; // no character start far enough left
    const size_t to = std::min(all.size(), p + reach);
    const auto merged = [&](std::string_view text) {
        const auto it = merge_ids_.find(text);
        return it != merge_ids_.end() &&
               (sentencepiece || vocab_.scores[static_cast<size_t>(it->second)] > -1e10f);
    };
    if (sentencepiece && from < p && p < to) {
        // no_merge_across's first test without building the symbol lists: in a run
        // of one letter nearly every position fails it.
        size_t last = from, end = from;
        while (end < p) {
            last = end;
            end += static_cast<size_t>(next_code_point(all, end).length);
        }
        const auto right_length = static_cast<size_t>(next_code_point(all, p).length);
        if (end == p && merged(all.substr(last, p - last + right_length)))
            return CutTest::cheap_no;
    }
    std::vector<std::string> left, right;
    if (!symbols(from, p, left) || !symbols(p, to, right))
        return CutTest::no;
    std::reverse(left.begin(), left.end());

    std::string joined;
    return no_merge_across(
        left, right, max_token_bytes_, [&](const std::string& t, bool single) { return single || merged(t); },
        [&](const std::string& l, const std::string& r) {
            joined = l;
            joined += r;
            return merged(joined);
        });
}

std::string ScoredVocabTokenizer::decode(std::span<const int32_t> ids) const
{
    const bool sentencepiece = options_.style == ScoredEncoderOptions::Style::sentencepiece;
    // The dummy prefix the encoder added comes back as the first piece's leading space.
    bool strip_leading_space = vocab_.add_dummy_prefix && !options_.whitespace_as_suffix;
    std::string out;
    for (int32_t id : ids) {
        check_id(id);
        const int32_t type = type_of(id);
        if (type == type_control)
            continue;
        if (type == type_byte) {
            out.push_back(static_cast<char>(byte_of(id)));
        } else if (type == type_unknown && sentencepiece) {
            out += options_.unk_surface;
        } else {
            std::string piece = vocab_.tokens[static_cast<size_t>(id)];
            if (space_ != " ")
                piece = replace_all(piece, space_, " ");
            if (strip_leading_space && !piece.empty() && piece.front() == ' ')
                piece.erase(0, 1);
            out += piece;
        }
        strip_leading_space = false;
    }
    return out;
}

std::string ScoredVocabTokenizer::token_text(int32_t id) const
{
    check_id(id);
    const std::string& token = vocab_.tokens[static_cast<size_t>(id)];
    if (is_special(id)) {
        // llama2.c stores BOS/EOS as "\n<s>\n"; show the name only.
        const size_t first = token.find_first_not_of(" \n");
        const size_t last = token.find_last_not_of(" \n");
        return first == std::string::npos ? token : token.substr(first, last - first + 1);
    }
    if (byte_of(id) >= 0)
        return token;
    return printable_utf8(space_ != " " ? replace_all(token, space_, " ") : token);
}

} // namespace tokenizer_impl

std::unique_ptr<Tokenizer> make_scored_vocab_tokenizer(ScoredVocab vocab, std::string kind,
                                                       const std::string& source)
{
    return std::make_unique<tokenizer_impl::ScoredVocabTokenizer>(std::move(vocab), std::move(kind), source,
                                                                  tokenizer_impl::ScoredEncoderOptions{});
}

} // namespace embedlab
