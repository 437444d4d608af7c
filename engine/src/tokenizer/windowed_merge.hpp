// Merging a long piece in bounded windows, so that the merge's symbols and queue
// (24 to 70 bytes per input byte) stay a few MB however long a piece without
// spaces is ('x' * 20 MiB used to take 1.65 GB).
//
// Why a cut can be exact. Every merge loop here (pair_merge.hpp) takes the best
// live pair, leftmost on ties. If no merge ever joins the symbols on the two sides
// of a position p, the merges left of p happen in the order they would in the
// text left of p alone (each was the best of all, so the best on its side), and
// likewise on the right: encode(text) == encode(text[..p]) + encode(text[p..]).
// A symbol is always a vocabulary token spelled by a run of initial symbols, so
// "no merge ever joins them" holds if no token ending at p (a run of the initial
// symbols before p that the vocabulary holds) merges with a token starting at p:
// no_merge_across() checks that from a few symbols on each side. Such a cut is
// taken where one exists in a window's second half.
//
// Where none exists (a run of one letter: every position may merge, 'x' + 'x'),
// the window is merged with two different right ends, and the cut goes at the last
// symbol boundary before the window end where both agree (ids and positions);
// if they agree nowhere the windows double, up to max_window_growth times. This
// is exact whenever what lies beyond the window does not reach back past the cut,
// which holds for every run and text the tests compare (tokenizer_test.cpp:
// windowed and unwindowed ids are equal, with a 64-byte window forced).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace embedlab::tokenizer_impl {

// The window in bytes; a piece up to 1.5 windows is merged whole. An internal
// parameter: tests force a small one to compare windowed against whole merges.
inline std::atomic<size_t> merge_window_setting{size_t{1} << 16};
inline size_t merge_window_bytes()
{
    return merge_window_setting.load(std::memory_order_relaxed);
}
inline void set_merge_window_bytes(size_t bytes)
{
    merge_window_setting.store(bytes < 16 ? 16 : bytes, std::memory_order_relaxed);
}
// The window a tokenizer uses: at least four of its longest tokens, so that the
// margin the agreement test looks past the cut (a quarter window) holds a token.
inline size_t merge_window_bytes(size_t longest_token)
{
    return std::max(merge_window_bytes(), 4 * longest_token);
}

// The ids vector of an encode: reserved for the most ids `bytes` can give (one per
// byte), which costs memory only as ids are written (the pages of a large block are
// touched when used), so it never grows by copying (at the copy, 12 bytes per id);
// then, if mostly unused, shrunk to fit (8 bytes per id at that copy).
inline void reserve_ids(std::vector<int32_t>& ids, size_t bytes)
{
    ids.reserve(bytes + 1);
}
inline void fit_ids(std::vector<int32_t>& ids)
{
    if (ids.capacity() > 2 * ids.size() + 1024)
        ids.shrink_to_fit();
}

// Where a final symbol starts: its byte offset in the merged text and the number of
// ids emitted before it (a symbol may emit several ids, e.g. byte fallback).
struct SymbolStart {
    size_t offset;
    size_t id_index;
};

// The outcome of a cut test: cheap_no (rejected by the adjacent pair), no (rejected
// after the full test), yes (provably exact).
enum class CutTest { cheap_no, no, yes };

// No token built of the initial symbols left of a cut merges with one built of the
// symbols right of it. `left` and `right` hold the initial symbols' merge texts,
// nearest the cut first; they must reach max_text bytes from the cut or the end of
// the text. `token(text, single)` is true if the text can be a symbol (single: one
// initial symbol); `joins(l, r)` if two symbol texts merge.
template <class Token, class Joins>
CutTest no_merge_across(const std::vector<std::string>& left, const std::vector<std::string>& right,
                        size_t max_text, const Token& token, const Joins& joins)
{
    if (left.empty() || right.empty())
        return CutTest::yes;
    if (joins(left[0], right[0]))
        return CutTest::cheap_no;
    std::vector<std::string> ls, rs;
    std::string text;
    for (size_t i = 0; i < left.size(); ++i) {
        text.insert(0, left[i]);
        if (text.size() > max_text)
            break;
        if (token(text, i == 0))
            ls.push_back(text);
    }
    text.clear();
    for (size_t i = 0; i < right.size(); ++i) {
        text += right[i];
        if (text.size() > max_text)
            break;
        if (token(text, i == 0))
            rs.push_back(text);
    }
    for (const std::string& l : ls)
        for (const std::string& r : rs)
            if (joins(l, r))
                return CutTest::no;
    return CutTest::yes;
}

// Merges `all` window by window (`window` bytes: merge_window_bytes(longest token)),
// appending the ids to `out`.
//   merge(text, ids, starts): merges `text` alone, appends its ids to `ids` and,
//     if `starts` is not null, a SymbolStart per final symbol (offsets in `text`);
//   cut(begin, p): a CutTest for cutting `all` at p when [begin, p) is merged
//     alone (begin is the previous cut); it reads no byte before begin or at or
//     after p + context.
// A step whose bytes equal the previous step's (a run of one byte) repeats its
// outcome without merging again: the outcome depends on those bytes only.
// With `stop`, `all` is the start of a longer text: steps are taken while they begin
// before stop (each reads at most window_reach(window, context) bytes from its
// start, which must lie within `all`), the rest is left unmerged, and the return
// value is where the next step begins. Without it, the whole of `all` is merged.
inline size_t window_reach(size_t window, size_t context)
{
    return 12 * window + context + 16; // the agreement windows: up to 8 windows plus half
}
template <class Merge, class Cut>
size_t merge_in_windows(std::string_view all, size_t window, const Merge& merge, const Cut& cut,
                        size_t context, std::vector<int32_t>& out, size_t stop = std::string_view::npos)
{
    constexpr int max_full_tests = 16;      // per window: full tests cost up to max_text^2
    constexpr size_t max_window_growth = 8; // the agreement windows grow up to 8x
    const size_t step_bytes = window + std::max(window / 2, context); // what one step reads, at most
    std::vector<int32_t> near_ids, far_ids, step_ids, last_ids;
    std::vector<SymbolStart> near_starts, far_starts;
    std::string_view last_key;
    size_t last_advance = 0;
    size_t begin = 0;
    while (begin < stop && all.size() - begin > window + window / 2) {
        const std::string_view rest = all.substr(begin);
        const std::string_view key = rest.substr(0, step_bytes);
        // Repeatable only with more text after the key: a test "at the end of the
        // text" must come out the same for both steps.
        const bool full = rest.size() > step_bytes;
        if (full && key == last_key) {
            out.insert(out.end(), last_ids.begin(), last_ids.end());
            begin += last_advance;
            continue;
        }
        step_ids.clear();
        size_t advance = 0;
        bool repeatable = full;

        // A provably exact cut, as late in the window as possible.
        int full_tests = 0;
        for (size_t p = window; p > window / 2 && full_tests < max_full_tests; --p) {
            const CutTest t = cut(begin, begin + p);
            if (t == CutTest::yes) {
                advance = p;
                break;
            }
            full_tests += t == CutTest::no;
        }
        if (advance) {
            merge(rest.substr(0, advance), step_ids, nullptr);
        } else {
            // Where two right ends agree.
            for (size_t w = window;; w *= 2) {
                const size_t near = std::min(rest.size(), w + w / 4), far = std::min(rest.size(), w + w / 2);
                far_ids.clear();
                far_starts.clear();
                merge(rest.substr(0, far), far_ids, &far_starts);
                if (far == rest.size()) { // the whole rest: exact
                    step_ids.swap(far_ids);
                    advance = far;
                    repeatable = false;
                    break;
                }
                near_ids.clear();
                near_starts.clear();
                merge(rest.substr(0, near), near_ids, &near_starts);
                size_t same = 0;
                while (same < near_ids.size() && same < far_ids.size() && near_ids[same] == far_ids[same])
                    ++same;
                // The last symbol start (after the first) both have, with the same ids before it.
                SymbolStart best{0, 0};
                for (size_t i = 1, j = 1; i < near_starts.size() && j < far_starts.size();) {
                    const SymbolStart a = near_starts[i], b = far_starts[j];
                    if (a.offset > w || a.id_index > same)
                        break;
                    if (a.offset < b.offset) {
                        ++i;
                    } else if (b.offset < a.offset) {
                        ++j;
                    } else {
                        if (a.id_index == b.id_index)
                            best = a;
                        ++i, ++j;
                    }
                }
                if (best.offset == 0 && w < max_window_growth * window) {
                    repeatable = false; // it read beyond step_bytes
                    continue;
                }
                if (best.offset == 0) { // agreement nowhere: the longer context's ids up to w
                    for (size_t j = far_starts.size(); j-- > 1;)
                        if (far_starts[j].offset <= w) {
                            best = far_starts[j];
                            break;
                        }
                    if (best.offset == 0)
                        best = {far, far_ids.size()};
                    near_ids.swap(far_ids);
                }
                step_ids.assign(near_ids.begin(),
                                near_ids.begin() + static_cast<std::ptrdiff_t>(best.id_index));
                advance = best.offset;
                break;
            }
        }
        out.insert(out.end(), step_ids.begin(), step_ids.end());
        begin += advance;
        if (repeatable) {
            last_key = key;
            last_ids.swap(step_ids);
            last_advance = advance;
        } else {
            last_key = {};
        }
    }
    if (stop != std::string_view::npos)
        return begin;
    if (begin < all.size())
        merge(all.substr(begin), out, nullptr);
    return all.size();
}

} // namespace embedlab::tokenizer_impl
