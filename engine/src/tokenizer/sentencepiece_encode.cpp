// SentencePiece BPE encoding, following libsentencepiece (normalizer.cc and
// bpe_model.cc): normalize, split into characters (user-defined symbols stay
// whole), merge the best-scored adjacent pair (leftmost on ties), split
// "unused" pieces back, and spell unknown pieces as byte tokens.
#include <algorithm>
#include <functional>
#include <string>
#include <unordered_map>

#include "tokenizer/scored_vocab.hpp"
#include "tokenizer/text_util.hpp"

namespace embedlab::tokenizer_impl {

// Length of the longest user-defined symbol that `rest` starts with, or 0.
size_t ScoredVocabTokenizer::user_defined_match(std::string_view rest) const
{
    for (std::string_view symbol : user_defined_) // longest first
        if (!symbol.empty() && rest.starts_with(symbol))
            return symbol.size();
    return 0;
}

// The buffers of one encode's merges, and its word cache: a word (a span no merge
// crosses) always merges to the same ids, and most words of a text recur.
struct SentencePieceScratch {
    struct Symbol {
        size_t start;
        size_t length;
        int32_t prev;
        int32_t next;
        bool frozen; // user-defined symbols never merge
    };
    struct Candidate {
        float score;
        int32_t left;
        int32_t right;
        size_t length;
    };
    struct CachedWord {
        size_t first; // in word_ids
        size_t count;
    };
    struct WordHash {
        using is_transparent = void;
        size_t operator()(std::string_view word) const noexcept
        {
            return std::hash<std::string_view>{}(word);
        }
    };
    // The cache is emptied when full: a few MB at most.
    static constexpr size_t max_cached_word_bytes = 64;
    static constexpr size_t max_cached_words = size_t{1} << 15;
    static constexpr size_t max_cached_ids = size_t{1} << 18;
    static constexpr size_t max_kept_symbols = size_t{1} << 14;

    std::vector<Symbol> symbols;
    std::vector<Candidate> queue; // a heap
    std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> unused_halves;
    std::unordered_map<std::string, CachedWord, WordHash, std::equal_to<>> words;
    std::vector<int32_t> word_ids;
};

namespace {

// The identity normaliser's loop over `input`, a part at a time: consumes characters
// (next(rest) -> {text, bytes consumed}) until `budget` bytes are consumed, emitting
// each kept one. `previous_was_space` carries the squeezing state between parts.
template <class Next, class Emit>
void normalize_part(std::string_view& input, size_t budget, bool squeeze, bool& previous_was_space,
                    const Next& next, const Emit& emit)
{
    for (size_t consumed = 0; !input.empty() && consumed < budget;) {
        auto [piece, n] = next(input);
        input.remove_prefix(n);
        consumed += n;
        if (previous_was_space)
            while (!piece.empty() && piece.front() == ' ')
                piece.remove_prefix(1);
        if (piece.empty())
            continue;
        emit(piece);
        // Only squeezing looks at the previous character.
        previous_was_space = squeeze && piece.back() == ' ';
    }
}

} // namespace

// The identity normalizer (no precompiled character map, as Llama's models
// have): optional whitespace squeezing, the dummy prefix, ' ' -> '▁'. Normalised
// and merged a part at a time (issue 57 item 9: a whole normalised copy of the text
// was one more byte per input byte): each part's windows are merged while the
// text they read is all there, exactly as over the whole normalised text.
std::vector<int32_t> ScoredVocabTokenizer::encode_sentencepiece(std::string_view input) const
{
    static constexpr std::string_view replacement = "\xEF\xBF\xBD"; // U+FFFD

    // Next character: a user-defined symbol, a code point, or U+FFFD for one
    // ill-formed byte.
    const auto next = [&](std::string_view rest) -> std::pair<std::string_view, size_t> {
        if (const size_t n = user_defined_match(rest))
            return {rest.substr(0, n), n};
        const CodePoint cp = next_code_point(rest, 0);
        if (cp.value < 0)
            return {replacement, 1};
        return {rest.substr(0, static_cast<size_t>(cp.length)), static_cast<size_t>(cp.length)};
    };

    const bool squeeze = options_.remove_extra_whitespaces;
    if (squeeze)
        while (!input.empty() && input.front() == ' ')
            input.remove_prefix(1);
    std::vector<int32_t> ids;
    if (input.empty())
        return ids;
    const bool dummy_prefix = vocab_.add_dummy_prefix;
    const bool suffix = options_.whitespace_as_suffix;

    // At most one id per byte of the normalised text: counted first, reserved once.
    size_t normalized_bytes = dummy_prefix ? space_.size() : 0;
    {
        std::string_view rest = input;
        bool previous_was_space = squeeze;
        normalize_part(rest, std::string_view::npos, squeeze, previous_was_space, next,
                       [&](std::string_view piece) {
                           for (char c : piece)
                               normalized_bytes += c == ' ' ? space_.size() : 1;
                       });
    }
    reserve_ids(ids, normalized_bytes);

    SentencePieceScratch scratch;
    const auto merge = [&](std::string_view piece, std::vector<int32_t>& out,
                           std::vector<SymbolStart>* starts) {
        merge_sentencepiece(piece, out, starts, scratch);
    };
    const size_t window = merge_window_bytes(max_token_bytes_);
    const size_t context = max_token_bytes_ + 16;
    const size_t reach = window_reach(window, context);
    // Each part read adds at most 3 normalised bytes per byte (' ' -> "▁", or U+FFFD
    // for an ill-formed byte) to what is kept: the text is reserved once for that.
    const size_t part = std::max(size_t{256} << 10, reach);
    std::string text; // the normalised text not merged yet
    text.reserve(std::min(normalized_bytes, reach + 3 * (part + 4) + 2 * space_.size()) + 1);
    if (dummy_prefix && !suffix)
        text += space_;
    bool previous_was_space = squeeze;
    const auto emit = [&](std::string_view piece) {
        for (char c : piece) {
            if (c == ' ')
                text += space_;
            else
                text += c;
        }
    };
    while (!input.empty()) {
        normalize_part(input, part, squeeze, previous_was_space, next, emit);
        if (input.empty())
            break;
        // Windows that start before `stop` read only text already here, and none of
        // the trailing spaces: the end of the text may squeeze them away.
        size_t kept = text.size();
        if (squeeze)
            while (kept >= space_.size() && text.compare(kept - space_.size(), space_.size(), space_) == 0)
                kept -= space_.size();
        const size_t stop = kept > reach ? kept - reach : 0;
        if (stop == 0 || text.size() <= window + window / 2)
            continue;
        const size_t done = merge_in_windows(
            text, window, merge, [&](size_t begin, size_t p) { return cut_test(text, begin, p); }, context,
            ids, stop);
        text.erase(0, done);
    }
    if (squeeze)
        while (text.ends_with(space_))
            text.erase(text.size() - space_.size());
    if (dummy_prefix && suffix)
        text += space_;
    merge_in_windows(
        text, window, merge, [&](size_t begin, size_t p) { return cut_test(text, begin, p); }, context, ids);
    fit_ids(ids);
    return ids;
}

void ScoredVocabTokenizer::merge_sentencepiece(std::string_view all, std::vector<int32_t>& ids,
                                               std::vector<SymbolStart>* starts,
                                               SentencePieceScratch& scratch) const
{
    if (all.empty())
        return;
    if (any_unused_ || !cut_before_space_) {
        merge_sentencepiece_run(all, 0, ids, starts, scratch);
        return;
    }
    // No token has a space after a non-space (cut_before_space_), so no merge joins
    // the symbols on the two sides of a space that follows a non-space: each word
    // (its leading spaces and what follows up to the next such space) merges alone,
    // in the order it would within the whole text (windowed_merge.hpp's argument).
    const size_t space_bytes = space_.size();
    const size_t first_id = ids.size();
    const auto merge_word = [&](size_t begin, size_t end) {
        const std::string_view word = all.substr(begin, end - begin);
        if (!starts) {
            merge_sentencepiece_word(word, ids, scratch);
            return;
        }
        // The run counts its starts' ids from its own first id; `starts` counts from this call's.
        const size_t word_first_id = ids.size(), first_start = starts->size();
        merge_sentencepiece_run(word, begin, ids, starts, scratch);
        for (size_t i = first_start; i < starts->size(); ++i)
            (*starts)[i].id_index += word_first_id - first_id;
    };
    size_t begin = 0;
    for (size_t p = all.find(space_, 1); p != std::string_view::npos; p = all.find(space_, p + space_bytes)) {
        if (p >= space_bytes && all.compare(p - space_bytes, space_bytes, space_) == 0)
            continue; // inside a run of spaces
        merge_word(begin, p);
        begin = p;
    }
    merge_word(begin, all.size());
}

void ScoredVocabTokenizer::merge_sentencepiece_word(std::string_view word, std::vector<int32_t>& ids,
                                                    SentencePieceScratch& scratch) const
{
    const bool cacheable = word.size() <= SentencePieceScratch::max_cached_word_bytes;
    if (cacheable) {
        if (const auto it = scratch.words.find(word); it != scratch.words.end()) {
            const auto first = scratch.word_ids.begin() + static_cast<std::ptrdiff_t>(it->second.first);
            ids.insert(ids.end(), first, first + static_cast<std::ptrdiff_t>(it->second.count));
            return;
        }
    }
    const size_t first = ids.size();
    merge_sentencepiece_run(word, 0, ids, nullptr, scratch);
    if (!cacheable)
        return;
    const size_t count = ids.size() - first;
    if (scratch.words.size() >= SentencePieceScratch::max_cached_words ||
        scratch.word_ids.size() + count > SentencePieceScratch::max_cached_ids) {
        scratch.words.clear();
        scratch.word_ids.clear();
    }
    scratch.words.emplace(std::string(word),
                          SentencePieceScratch::CachedWord{scratch.word_ids.size(), count});
    scratch.word_ids.insert(scratch.word_ids.end(), ids.begin() + static_cast<std::ptrdiff_t>(first),
                            ids.end());
}

void ScoredVocabTokenizer::merge_sentencepiece_run(std::string_view all, size_t base,
                                                   std::vector<int32_t>& ids,
                                                   std::vector<SymbolStart>* starts,
                                                   SentencePieceScratch& scratch) const
{
    if (all.empty())
        return;
    using Symbol = SentencePieceScratch::Symbol;
    using Candidate = SentencePieceScratch::Candidate;

    // Symbols are spans of `all`; a merged-away symbol becomes empty.
    std::vector<Symbol>& symbols = scratch.symbols;
    symbols.clear();
    symbols.reserve(all.size());
    for (size_t pos = 0; pos < all.size();) {
        size_t length = user_defined_.empty() ? 0 : user_defined_match(all.substr(pos));
        const bool frozen = length > 0;
        if (!frozen)
            length = static_cast<size_t>(next_code_point(all, pos).length);
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({pos, length, index - 1, index + 1, frozen});
        pos += length;
    }
    symbols.back().next = -1;
    const auto piece_of = [&](const Symbol& s) { return all.substr(s.start, s.length); };

    // The queue's top is the best score, leftmost on ties.
    const auto later = [](const Candidate& a, const Candidate& b) {
        return a.score != b.score ? a.score < b.score : a.left > b.left;
    };
    // Unused pieces may be built by merges but are emitted as their two halves.
    auto& unused_halves = scratch.unused_halves;
    unused_halves.clear();
    std::vector<Candidate>& queue = scratch.queue;
    queue.clear();
    const auto consider = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0)
            return;
        const Symbol& l = symbols[static_cast<size_t>(left)];
        const Symbol& r = symbols[static_cast<size_t>(right)];
        if (l.frozen || r.frozen)
            return;
        const std::string_view joined = all.substr(l.start, l.length + r.length);
        if (joined.size() > max_token_bytes_)
            return;
        const auto it = merge_ids_.find(joined);
        if (it == merge_ids_.end())
            return;
        if (any_unused_ && type_of(it->second) == type_unused)
            unused_halves[joined] = {piece_of(l), piece_of(r)};
        queue.push_back({vocab_.scores[static_cast<size_t>(it->second)], left, right, joined.size()});
        std::push_heap(queue.begin(), queue.end(), later);
    };
    for (size_t i = 0; i + 1 < symbols.size(); ++i)
        consider(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
    while (!queue.empty()) {
        std::pop_heap(queue.begin(), queue.end(), later);
        const Candidate c = queue.back();
        queue.pop_back();
        Symbol& l = symbols[static_cast<size_t>(c.left)];
        Symbol& r = symbols[static_cast<size_t>(c.right)];
        // Stale: a side merged since (symbols only grow to the right, so unchanged
        // lengths mean unchanged symbols).
        if (l.length == 0 || r.length == 0 || l.length + r.length != c.length)
            continue;
        l.length += r.length;
        r.length = 0;
        l.next = r.next;
        if (r.next >= 0)
            symbols[static_cast<size_t>(r.next)].prev = c.left;
        consider(l.prev, c.left);
        consider(c.left, l.next);
    }
    if (queue.capacity() > 2 * SentencePieceScratch::max_kept_symbols)
        queue = {}; // as the symbols below

    const auto emit = [&](auto&& self, std::string_view piece) -> void {
        const auto it = token_ids_.find(piece);
        const int32_t id = it == token_ids_.end() ? -1 : it->second;
        if (id >= 0 && any_unused_ && type_of(id) == type_unused) {
            if (const auto halves = unused_halves.find(piece); halves != unused_halves.end()) {
                self(self, halves->second.first);
                self(self, halves->second.second);
                return;
            }
        }
        if (id >= 0 && type_of(id) != type_unknown) {
            ids.push_back(id);
            return;
        }
        if (options_.byte_fallback) {
            for (unsigned char b : piece) {
                if (byte_ids_[b] < 0)
                    throw_no_byte_token(b);
                ids.push_back(byte_ids_[b]);
            }
            return;
        }
        if (vocab_.unk_id < 0)
            throw_no_byte_token(static_cast<unsigned char>(piece.front()));
        ids.push_back(vocab_.unk_id);
    };
    const size_t first = ids.size();
    for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
        if (starts)
            starts->push_back({base + symbols[static_cast<size_t>(i)].start, ids.size() - first});
        emit(emit, piece_of(symbols[static_cast<size_t>(i)]));
    }
    // A long run's symbols (a window without spaces) go at once: kept, they would
    // add to the encode's peak memory.
    if (symbols.capacity() > SentencePieceScratch::max_kept_symbols)
        symbols = {};
}

} // namespace embedlab::tokenizer_impl
