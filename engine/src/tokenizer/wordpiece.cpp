// WordPiece encoding as Hugging Face tokenizers does it: added tokens matched whole
// in the raw text, then per remaining segment BertNormalizer (clean text, pad CJK
// ideographs, NFD + drop Mn, lowercase), BertPreTokenizer (whitespace, each
// punctuation character alone) and greedy longest-prefix WordPiece per word.
//
// Where the Rust crate and transformers.js differ, this follows:
//  - control characters dropped by clean_text: Cc, Cf, Co (and Cs) except \t \n \r,
//    as transformers.js; the Rust crate also drops code points unassigned in its
//    (older) Unicode tables;
//  - lowercasing: per code point, full mapping (U+0130 -> "i\u0307"), as the Rust
//    crate; JavaScript's toLowerCase() also turns a word-final capital sigma into ς;
//  - CJK padding: the Rust crate's ranges, supplementary planes included
//    (transformers.js looks at UTF-16 units and so never pads those);
//  - added tokens: all are matched whole in the raw text; both references match
//    the normalized=true ones in the normalised text instead (BERT's are all
//    normalized=false, so this only matters for hand-edited tokenizer.json files).
// Ill-formed UTF-8 bytes count as U+FFFD (which clean_text drops).
#include <algorithm>
#include <array>
#include <new>
#include <string_view>
#include <unordered_map>

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "embedlab/error.hpp"
#include "tokenizer/text_util.hpp"
#include "tokenizer/wordpiece_impl.hpp"

namespace embedlab {
namespace tokenizer_impl {
namespace {

struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using IdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

bool is_chinese_char(char32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B920 && c <= 0x2CEAF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Rust's char::is_whitespace (the White_Space property).
bool is_whitespace(char32_t c)
{
    if (c < 0x80)
        return c == ' ' || (c >= 0x09 && c <= 0x0D);
    return u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool is_control(char32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r')
        return false;
    if (c < 0x80)
        return c < 0x20 || c == 0x7F;
    const int8_t type = u_charType(static_cast<UChar32>(c));
    return type == U_CONTROL_CHAR || type == U_FORMAT_CHAR || type == U_PRIVATE_USE_CHAR ||
           type == U_SURROGATE;
}

bool is_punctuation(char32_t c)
{
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    return u_ispunct(static_cast<UChar32>(c));
}

bool is_mark(char32_t c, bool nonspacing_only)
{
    if (c < 0x300)
        return false;
    const int8_t type = u_charType(static_cast<UChar32>(c));
    return type == U_NON_SPACING_MARK ||
           (!nonspacing_only && (type == U_COMBINING_SPACING_MARK || type == U_ENCLOSING_MARK));
}

// Per code point full lowercase mapping, as Rust's char::to_lowercase: U+0130 is the
// only character whose unconditional lowercase is two code points.
void append_lowercase(std::u32string& out, char32_t c)
{
    if (c < 0x80) {
        out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (c == 0x130) {
        out.push_back(U'i');
        out.push_back(0x307);
    } else {
        out.push_back(static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
    }
}

// Applies an ICU normalisation to `text` in place; ASCII-only text is left alone.
void normalize_with(const icu::Normalizer2& norm, std::u32string& text)
{
    if (std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x80; }))
        return;
    icu::UnicodeString in;
    for (char32_t c : text)
        in.append(static_cast<UChar32>(c));
    UErrorCode status = U_ZERO_ERROR;
    const icu::UnicodeString out = norm.normalize(in, status);
    if (U_FAILURE(status))
        throw InputError(std::string("Unicode normalisation failed: ") + u_errorName(status));
    text.clear();
    for (int32_t i = 0; i < out.length();) {
        const UChar32 c = out.char32At(i);
        text.push_back(static_cast<char32_t>(c));
        i += U16_LENGTH(c);
    }
}

const icu::Normalizer2& icu_normalizer(WordPieceNorm kind)
{
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = nullptr;
    switch (kind) {
    case WordPieceNorm::Nfc:
        n = icu::Normalizer2::getNFCInstance(status);
        break;
    case WordPieceNorm::Nfkc:
        n = icu::Normalizer2::getNFKCInstance(status);
        break;
    case WordPieceNorm::Nfkd:
        n = icu::Normalizer2::getNFKDInstance(status);
        break;
    default:
        n = icu::Normalizer2::getNFDInstance(status);
        break;
    }
    if (U_FAILURE(status) || !n)
        throw InputError(std::string("ICU normaliser unavailable: ") + u_errorName(status));
    return *n;
}

class WordPieceTokenizer final : public Tokenizer {
public:
    explicit WordPieceTokenizer(WordPieceSpec spec);

    std::vector<int32_t> encode(std::string_view text) const override;
    std::string decode(std::span<const int32_t> ids) const override;
    std::string token_text(int32_t id) const override
    {
        check_token_id(source_, id, vocab_size());
        return printable_utf8(tokens_[static_cast<size_t>(id)]);
    }
    int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
    std::string kind() const override { return "wordpiece"; }
    bool is_special(int32_t id) const override
    {
        return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)];
    }
    std::optional<int32_t> unk_id() const override { return unk_id_; }
    std::optional<int32_t> bos_id() const override { return std::nullopt; }
    std::optional<int32_t> eos_id() const override { return std::nullopt; }
    std::optional<int32_t> cls_id() const override { return cls_id_; }
    std::optional<int32_t> sep_id() const override { return sep_id_; }
    std::optional<int32_t> mask_id() const override { return mask_id_; }
    std::optional<int32_t> pad_id() const override { return pad_id_; }
    std::optional<GgufVocabulary> gguf_vocabulary(std::string* why_not) const override;
    int64_t max_length() const { return options_.max_length; }

private:
    struct Added {
        std::string content;
        int32_t id;
        bool lstrip, rstrip;
    };

    void encode_segment(std::string_view text, std::vector<int32_t>& ids) const;
    void normalize(std::u32string& text, std::u32string& scratch) const;
    void encode_word(std::string_view word, size_t chars, std::vector<int32_t>& ids) const;
    std::optional<int32_t> find_token(const std::string& name) const;

    std::string source_;
    std::vector<std::string> tokens_;
    std::vector<uint8_t> special_;
    IdMap word_ids_;         // model tokens
    IdMap continuation_ids_; // model tokens that start with the prefix, keyed without it
    size_t max_word_bytes_ = 0, max_continuation_bytes_ = 0;
    std::vector<Added> added_; // longest first
    std::array<bool, 256> added_first_byte_{};
    WordPieceOptions options_;
    std::vector<WordPieceNorm> normalizer_;
    WordPieceSplit pre_tokenizer_;
    bool strip_accents_;
    int32_t unk_id_ = 0;
    std::optional<int32_t> cls_id_, sep_id_, mask_id_, pad_id_;
};

// llama.cpp's converter's form (convert_hf_to_gguf's BertModel.set_vocab): word-initial
// pieces prefixed by U+2581, "##" stripped from continuations, control tokens (the
// special added ones) as they are; [CLS] and [SEP] as BOS and EOS. llama.cpp
// tokenizes with BertNormalizer and BertPreTokenizer, lower-casing with accents
// stripped unless told otherwise: only that form is written (EmbedLab's GGUF reader
// lower-cases too).
std::optional<GgufVocabulary> WordPieceTokenizer::gguf_vocabulary(std::string* why_not) const
{
    auto refuse = [&](const std::string& why) -> std::optional<GgufVocabulary> {
        if (why_not)
            *why_not = file_message(source_, why);
        return std::nullopt;
    };
    if (normalizer_.size() != 1 || normalizer_.front() != WordPieceNorm::Bert ||
        pre_tokenizer_ != WordPieceSplit::Bert || !options_.clean_text || !options_.handle_chinese_chars)
        return refuse("this WordPiece tokenizer's normalizer or pre-tokenizer is not BertNormalizer + "
                      "BertPreTokenizer, the only ones llama.cpp's WordPiece reproduces");
    if (!options_.lowercase || !strip_accents_)
        return refuse("a cased WordPiece tokenizer (or one keeping accents) cannot be written to GGUF yet: "
                      "EmbedLab writes and reads GGUF WordPiece vocabularies lower-cased only");
    if (options_.continuing_subword_prefix != "##")
        return refuse("the continuation prefix is not \"##\", the only one llama.cpp's GGUF form can hold");
    if (!cls_id_ || !sep_id_)
        return refuse("no [CLS] or [SEP] token, which llama.cpp frames every input with");
    GgufVocabulary v;
    v.model = "bert";
    v.pre = "default";
    v.tokens.reserve(tokens_.size());
    for (size_t id = 0; id < tokens_.size(); ++id) {
        const std::string& t = tokens_[id];
        if (t.empty()) {
            v.tokens.push_back("[PAD" + std::to_string(id) + "]");
            v.types.push_back(5); // unused
        } else if (special_[id]) {
            v.tokens.push_back(t);
            v.types.push_back(3); // control
        } else {
            v.tokens.push_back(t.starts_with("##") ? t.substr(2) : "\u2581" + t);
            v.types.push_back(1);
        }
    }
    v.unk_id = unk_id_;
    v.bos_id = *cls_id_;
    v.eos_id = *sep_id_;
    return v;
}

WordPieceTokenizer::WordPieceTokenizer(WordPieceSpec spec)
    : source_(std::move(spec.source)), tokens_(std::move(spec.vocab)), options_(std::move(spec.options)),
      normalizer_(std::move(spec.normalizer)), pre_tokenizer_(spec.pre_tokenizer),
      strip_accents_(options_.strip_accents.value_or(options_.lowercase))
{
    if (tokens_.empty())
        throw InputError(file_message(source_, "the WordPiece vocabulary is empty"));
    if (options_.max_input_chars_per_word < 0)
        throw InputError(file_message(source_, "max_input_chars_per_word is negative"));
    const std::string& prefix = options_.continuing_subword_prefix;
    word_ids_.reserve(tokens_.size());
    for (size_t id = 0; id < tokens_.size(); ++id) {
        const std::string& t = tokens_[id];
        if (t.empty())
            continue;
        // A repeated token maps to its last line, as BertTokenizer's load_vocab.
        word_ids_.insert_or_assign(t, static_cast<int32_t>(id));
        max_word_bytes_ = std::max(max_word_bytes_, t.size());
        if (!prefix.empty() && t.size() > prefix.size() && t.starts_with(prefix)) {
            continuation_ids_.insert_or_assign(t.substr(prefix.size()), static_cast<int32_t>(id));
            max_continuation_bytes_ = std::max(max_continuation_bytes_, t.size() - prefix.size());
        }
    }
    if (prefix.empty()) {
        continuation_ids_ = word_ids_;
        max_continuation_bytes_ = max_word_bytes_;
    }
    const auto unk = word_ids_.find(options_.unk_token);
    if (unk == word_ids_.end())
        throw InputError(file_message(source_, "the unknown token \"" + printable_utf8(options_.unk_token) +
                                                   "\" is not in the WordPiece vocabulary"));
    unk_id_ = unk->second;

    // Added tokens: the given ones, else the five BERT specials the vocabulary has.
    std::vector<WordPieceAddedToken> added = std::move(options_.added_tokens);
    options_.added_tokens.clear();
    if (added.empty()) {
        for (const std::string* name : {&options_.pad_token, &options_.unk_token, &options_.cls_token,
                                        &options_.sep_token, &options_.mask_token}) {
            const auto it = word_ids_.find(*name);
            if (!name->empty() && it != word_ids_.end())
                added.push_back({*name, it->second, true, false, false});
        }
    }
    for (const auto& a : added) {
        if (a.id < 0 || a.id > 100'000'000)
            throw InputError(file_message(source_, "added token \"" + printable_utf8(a.content) +
                                                       "\" has an invalid id " + std::to_string(a.id)));
        const auto id = static_cast<size_t>(a.id);
        if (id >= tokens_.size())
            tokens_.resize(id + 1);
        if (!tokens_[id].empty() && tokens_[id] != a.content)
            throw InputError(file_message(
                source_, "added token \"" + printable_utf8(a.content) + "\" has id " + std::to_string(a.id) +
                             ", which is the token \"" + printable_utf8(tokens_[id]) + "\""));
        tokens_[id] = a.content;
    }
    special_.assign(tokens_.size(), 0);
    for (const auto& a : added) {
        special_[static_cast<size_t>(a.id)] = a.special ? 1 : 0;
        if (a.content.empty())
            continue;
        added_.push_back({a.content, a.id, a.lstrip, a.rstrip});
        added_first_byte_[static_cast<unsigned char>(a.content[0])] = true;
    }
    std::stable_sort(added_.begin(), added_.end(),
                     [](const Added& a, const Added& b) { return a.content.size() > b.content.size(); });

    cls_id_ = spec.cls_id ? spec.cls_id : find_token(options_.cls_token);
    sep_id_ = spec.sep_id ? spec.sep_id : find_token(options_.sep_token);
    mask_id_ = find_token(options_.mask_token);
    pad_id_ = find_token(options_.pad_token);
    for (const auto& id : {cls_id_, sep_id_})
        if (id)
            check_token_id(source_, *id, vocab_size());
}

std::optional<int32_t> WordPieceTokenizer::find_token(const std::string& name) const
{
    if (name.empty())
        return std::nullopt;
    for (const Added& a : added_)
        if (a.content == name)
            return a.id;
    const auto it = word_ids_.find(name);
    return it == word_ids_.end() ? std::nullopt : std::optional<int32_t>(it->second);
}

constexpr size_t kSmallText = size_t{1} << 16;

// Room for one id per input byte, which bounds the ids of nearly every text (only an
// expansion under normalisation, such as NFKD's ligatures, gives more): the ids then
// never move. Doubling from a guess left each outgrown block resident, as the heap
// keeps freed blocks (init_runtime's M_TRIM_THRESHOLD): 7.7 bytes per input byte with
// a character-level vocabulary (issue 57). Capacity a text leaves unused is address
// space never touched, not memory; where even that is refused, a quarter.
void reserve_ids(std::vector<int32_t>& ids, size_t text_bytes)
{
    try {
        ids.reserve(text_bytes + 1);
    } catch (const std::bad_alloc&) {
        ids.reserve(text_bytes / 4 + 1);
    }
}

std::vector<int32_t> WordPieceTokenizer::encode(std::string_view text) const
{
    std::vector<int32_t> ids;
    reserve_ids(ids, text.size());
    size_t segment = 0;
    for (size_t pos = 0; pos < text.size();) {
        const Added* match = nullptr;
        if (added_first_byte_[static_cast<unsigned char>(text[pos])])
            for (const Added& a : added_)
                if (text.compare(pos, a.content.size(), a.content) == 0) {
                    match = &a;
                    break;
                }
        if (!match) {
            ++pos;
            continue;
        }
        // lstrip / rstrip: the whitespace beside the token belongs to it.
        size_t before = pos;
        if (match->lstrip)
            while (before > segment) {
                size_t start = before - 1;
                while (start > segment && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
                    --start;
                const CodePoint cp = next_code_point(text, start);
                if (cp.value < 0 || start + static_cast<size_t>(cp.length) != before ||
                    !is_whitespace(static_cast<char32_t>(cp.value)))
                    break;
                before = start;
            }
        size_t after = pos + match->content.size();
        if (match->rstrip)
            while (after < text.size()) {
                const CodePoint cp = next_code_point(text, after);
                if (cp.value < 0 || !is_whitespace(static_cast<char32_t>(cp.value)))
                    break;
                after += static_cast<size_t>(cp.length);
            }
        encode_segment(text.substr(segment, before - segment), ids);
        ids.push_back(match->id);
        segment = pos = after;
    }
    encode_segment(text.substr(segment), ids);
    if (text.size() < kSmallText) // many short texts (a dataset's) keep no spare capacity
        ids.shrink_to_fit();
    return ids;
}

void WordPieceTokenizer::normalize(std::u32string& text, std::u32string& scratch) const
{
    for (const WordPieceNorm step : normalizer_) {
        scratch.clear();
        switch (step) {
        case WordPieceNorm::Bert:
            if (options_.clean_text || options_.handle_chinese_chars) {
                for (char32_t c : text) {
                    if (options_.clean_text) {
                        if (c == 0 || c == 0xFFFD || is_control(c))
                            continue;
                        if (is_whitespace(c))
                            c = U' ';
                    }
                    if (options_.handle_chinese_chars && c >= 0x3400 && is_chinese_char(c)) {
                        scratch.push_back(U' ');
                        scratch.push_back(c);
                        scratch.push_back(U' ');
                    } else {
                        scratch.push_back(c);
                    }
                }
                text.swap(scratch);
                scratch.clear();
            }
            if (strip_accents_)
                normalize_with(icu_normalizer(WordPieceNorm::Nfd), text);
            if (strip_accents_ || options_.lowercase) {
                for (char32_t c : text) {
                    if (strip_accents_ && is_mark(c, true))
                        continue;
                    if (options_.lowercase)
                        append_lowercase(scratch, c);
                    else
                        scratch.push_back(c);
                }
                text.swap(scratch);
            }
            break;
        case WordPieceNorm::Lowercase:
            for (char32_t c : text)
                append_lowercase(scratch, c);
            text.swap(scratch);
            break;
        case WordPieceNorm::StripAccents:
            for (char32_t c : text)
                if (!is_mark(c, false))
                    scratch.push_back(c);
            text.swap(scratch);
            break;
        default:
            normalize_with(icu_normalizer(step), text);
            break;
        }
    }
}

// Where the part of `segment` that starts at `begin` ends: after about `size` bytes,
// between two ASCII bytes (or at the end). A cut there changes nothing: an ASCII
// character ends no UTF-8 sequence early, composes with nothing before it under any
// Unicode normalisation, and the lowercasing, cleaning and splitting are per character.
size_t part_end(std::string_view segment, size_t begin, size_t size)
{
    for (size_t p = begin + size; p < segment.size(); ++p)
        if (static_cast<unsigned char>(segment[p]) < 0x80 &&
            static_cast<unsigned char>(segment[p - 1]) < 0x80)
            return p;
    return segment.size();
}

void WordPieceTokenizer::encode_segment(std::string_view segment, std::vector<int32_t>& ids) const
{
    if (segment.empty())
        return;
    // Decoded and normalised a part at a time (issue 57 item 9: the whole segment as
    // UTF-32, twice, was 17 bytes per input byte); a word may span parts.
    constexpr size_t kPart = size_t{1} << 20;
    std::u32string text, scratch;
    std::string word;
    size_t chars = 0;
    // A word longer than max_input_chars_per_word is [UNK] whatever it holds: only
    // its length is kept past that.
    const size_t max_chars = static_cast<size_t>(options_.max_input_chars_per_word);
    const auto flush = [&] {
        if (chars > 0)
            encode_word(word, chars, ids);
        word.clear();
        chars = 0;
    };
    const auto append = [&](char32_t c) {
        if (chars <= max_chars)
            append_utf8(word, static_cast<int32_t>(c));
        ++chars;
    };
    for (size_t begin = 0; begin < segment.size();) {
        const size_t end = part_end(segment, begin, kPart);
        text.clear();
        for (size_t pos = begin; pos < end;) {
            const CodePoint cp = next_code_point(segment.substr(0, end), pos);
            text.push_back(cp.value < 0 ? U'\uFFFD' : static_cast<char32_t>(cp.value));
            pos += static_cast<size_t>(cp.length);
        }
        begin = end;
        normalize(text, scratch);
        for (const char32_t c : text) {
            if (pre_tokenizer_ != WordPieceSplit::None && is_whitespace(c)) {
                flush();
            } else if (pre_tokenizer_ == WordPieceSplit::Bert && is_punctuation(c)) {
                flush();
                append(c);
                flush();
            } else {
                append(c);
            }
        }
    }
    flush();
}

void WordPieceTokenizer::encode_word(std::string_view word, size_t chars, std::vector<int32_t>& ids) const
{
    if (chars > static_cast<size_t>(options_.max_input_chars_per_word)) {
        ids.push_back(unk_id_);
        return;
    }
    const size_t first = ids.size();
    for (size_t start = 0; start < word.size();) {
        const IdMap& map = start == 0 ? word_ids_ : continuation_ids_;
        size_t end = std::min(word.size(), start + (start == 0 ? max_word_bytes_ : max_continuation_bytes_));
        while (end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80)
            --end; // a code point boundary
        bool found = false;
        while (end > start) {
            const auto it = map.find(word.substr(start, end - start));
            if (it != map.end()) {
                ids.push_back(it->second);
                found = true;
                break;
            }
            do
                --end;
            while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
        }
        if (!found) {
            ids.resize(first); // any unmatched piece makes the whole word unknown
            ids.push_back(unk_id_);
            return;
        }
        start = end;
    }
}

// The Rust crate's decoders::wordpiece::cleanup.
void cleanup(std::string& s)
{
    static const std::pair<std::string_view, std::string_view> rules[] = {
        {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},   {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : rules) {
        std::string out;
        size_t pos = 0;
        for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size())
            out.append(s, pos, hit - pos).append(to);
        if (pos == 0)
            continue;
        out.append(s, pos);
        s = std::move(out);
    }
}

std::string WordPieceTokenizer::decode(std::span<const int32_t> ids) const
{
    // Hugging Face's WordPiece decoder: pieces after the first get a space unless
    // they carry the prefix (removed), each cleaned up on its own.
    std::string out;
    const std::string& prefix = options_.continuing_subword_prefix;
    for (size_t i = 0; i < ids.size(); ++i) {
        check_token_id(source_, ids[i], vocab_size());
        std::string token = tokens_[static_cast<size_t>(ids[i])];
        if (i != 0) {
            if (token.starts_with(prefix)) // an empty prefix: never a space, as Rust's replacen
                token.erase(0, prefix.size());
            else
                token.insert(token.begin(), ' ');
        }
        if (options_.decode_cleanup)
            cleanup(token);
        out += token;
    }
    return out;
}

} // namespace

std::unique_ptr<Tokenizer> make_wordpiece(WordPieceSpec spec)
{
    return std::make_unique<WordPieceTokenizer>(std::move(spec));
}

} // namespace tokenizer_impl

std::unique_ptr<Tokenizer> make_wordpiece_tokenizer(std::vector<std::string> vocab, WordPieceOptions options,
                                                    std::string source)
{
    tokenizer_impl::WordPieceSpec spec;
    spec.source = std::move(source);
    spec.vocab = std::move(vocab);
    spec.options = std::move(options);
    return tokenizer_impl::make_wordpiece(std::move(spec));
}

std::optional<int64_t> wordpiece_max_length(const Tokenizer& tokenizer)
{
    const auto* wordpiece = dynamic_cast<const tokenizer_impl::WordPieceTokenizer*>(&tokenizer);
    if (!wordpiece || wordpiece->max_length() <= 0)
        return std::nullopt;
    return wordpiece->max_length();
}

std::vector<std::string> wordpiece_vocab_from_gguf_tokens(const std::vector<std::string>& gguf_tokens,
                                                          const std::vector<int32_t>& gguf_types)
{
    // Inverse of llama.cpp's BertModel.set_vocab phantom(): control tokens as they
    // are, "##x" -> "x", anything else -> "\u2581" + x.
    static const std::string_view phantom = "\xE2\x96\x81";
    std::vector<std::string> out;
    out.reserve(gguf_tokens.size());
    for (size_t i = 0; i < gguf_tokens.size(); ++i) {
        const std::string& t = gguf_tokens[i];
        const bool control = gguf_types.empty() ? !t.starts_with(phantom) && t.size() >= 2 &&
                                                      t.front() == '[' && t.back() == ']'
                                                : i < gguf_types.size() && gguf_types[i] == 3;
        if (control)
            out.push_back(t);
        else if (t.starts_with(phantom))
            out.push_back(t.substr(phantom.size()));
        else
            out.push_back("##" + t);
    }
    return out;
}

} // namespace embedlab
