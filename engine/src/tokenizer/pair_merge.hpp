// Best-first merging of adjacent symbols, the loop every BPE here runs (byte-level
// BPE by merge rank, llama2.c and SentencePiece BPE by score): the symbols form a
// linked list, each adjacent pair that may merge waits in a priority queue, and the
// best is merged unless one of its sides has changed since it was queued.
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

namespace embedlab::tokenizer_impl {

// Symbol has int32_t prev and next (-1 at the ends). `pair(left, right)` gives the
// Candidate (with int32_t left and right) for symbols[left] + symbols[right], or
// nothing where they do not merge; `later(a, b)`: a leaves the queue after b;
// `live(c)`: c's two symbols are still the ones it was queued for; `merge(c)` makes
// symbols[c.left] the merged symbol and marks symbols[c.right] dead. The list is
// relinked here.
template <class Candidate, class Symbol, class Later, class Pair, class Live, class Merge>
void merge_best_first(std::vector<Symbol>& symbols, Later later, Pair pair, Live live, Merge merge)
{
    std::priority_queue<Candidate, std::vector<Candidate>, Later> queue(later);
    const auto consider = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0)
            return;
        if (std::optional<Candidate> c = pair(left, right))
            queue.push(*c);
    };
    for (size_t i = 0; i + 1 < symbols.size(); ++i)
        consider(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        if (!live(c))
            continue;
        merge(c);
        Symbol& l = symbols[static_cast<size_t>(c.left)];
        const Symbol& r = symbols[static_cast<size_t>(c.right)];
        l.next = r.next;
        if (r.next >= 0)
            symbols[static_cast<size_t>(r.next)].prev = c.left;
        consider(l.prev, c.left);
        consider(c.left, l.next);
    }
}

// A token id in the linked list; a merged-away one gets id -1.
struct IdSymbol {
    int32_t id;
    int32_t prev;
    int32_t next;
};

// What a pair of ids merges into, and how soon (byte-level BPE: the merge's rank,
// lowest first; llama2.c: the merged token's score, highest first).
template <class Priority> struct IdMerge {
    Priority priority;
    int32_t merged_id;
};

// Merges token ids: `merge_of(left_id, right_id)` gives an IdMerge<Priority> or
// nothing, `sooner(a, b)` says priority a merges before priority b; equal priorities
// merge leftmost first. Appends the surviving ids to `out` and, if `survivors` is
// not null, their indices in `symbols`. `symbols` is not empty.
template <class Priority, class Sooner, class MergeOf>
void merge_ids(std::vector<IdSymbol>& symbols, Sooner sooner, MergeOf merge_of, std::vector<int32_t>& out,
               std::vector<int32_t>* survivors = nullptr)
{
    struct Candidate {
        Priority priority;
        int32_t left;
        int32_t right;
        int32_t left_id;
        int32_t right_id;
        int32_t merged_id;
    };
    const auto later = [sooner](const Candidate& a, const Candidate& b) {
        return a.priority != b.priority ? sooner(b.priority, a.priority) : a.left > b.left;
    };
    const auto pair = [&](int32_t left, int32_t right) -> std::optional<Candidate> {
        const int32_t left_id = symbols[static_cast<size_t>(left)].id;
        const int32_t right_id = symbols[static_cast<size_t>(right)].id;
        const std::optional<IdMerge<Priority>> m = merge_of(left_id, right_id);
        if (!m)
            return std::nullopt;
        return Candidate{m->priority, left, right, left_id, right_id, m->merged_id};
    };
    const auto live = [&](const Candidate& c) { // else one side has merged since
        const IdSymbol& l = symbols[static_cast<size_t>(c.left)];
        const IdSymbol& r = symbols[static_cast<size_t>(c.right)];
        return l.id == c.left_id && r.id == c.right_id && l.next == c.right;
    };
    const auto merge = [&](const Candidate& c) {
        symbols[static_cast<size_t>(c.left)].id = c.merged_id;
        symbols[static_cast<size_t>(c.right)].id = -1;
    };
    merge_best_first<Candidate>(symbols, later, pair, live, merge);
    for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
        out.push_back(symbols[static_cast<size_t>(i)].id);
        if (survivors)
            survivors->push_back(i);
    }
}

} // namespace embedlab::tokenizer_impl
