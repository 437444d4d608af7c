// The number of bytes tokenizer.decode(ids) gives, counted a chunk of ids at a time:
// bits per byte needs only the count, and decoding a whole text at once held up to
// twice its bytes (a growing string) beside its ids (issue 57 item 9).
//
//   const int64_t bytes = decoded_size(tokenizer, ids);   // == tokenizer.decode(ids).size()
//
// Exact for the decoders EmbedLab has (byte-level BPE, SentencePiece/llama2.c scored
// pieces, WordPiece): each appends every id's bytes, which depend only on the id and on
// whether an earlier id already decoded to something (SentencePiece strips the first
// piece's dummy-prefix space; WordPiece spaces every piece after the first). So each
// chunk is decoded behind the shortest prefix of ids that decodes to something, and
// counted past that prefix's bytes. Chunk boundaries in the middle of a word, of a
// multi-byte UTF-8 character or of a run of NULs change nothing (decode concatenates bytes).
//
// Thread safety: as Tokenizer::decode (const, reentrant).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embedlab/tokenizer.hpp"

namespace embedlab::detail {

inline int64_t decoded_size(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                            size_t chunk = size_t{1} << 16)
{
    if (ids.size() <= chunk)
        return static_cast<int64_t>(tokenizer.decode(ids).size());
    // The anchor: control tokens in front decode to nothing and change no state.
    size_t anchor = 0;
    std::string anchor_text;
    while (anchor_text.empty() && anchor < chunk)
        anchor_text = tokenizer.decode(ids.first(++anchor));
    if (anchor_text.empty()) // a chunk of ids that decode to nothing: count them whole
        return static_cast<int64_t>(tokenizer.decode(ids).size());
    auto total = static_cast<int64_t>(anchor_text.size());
    std::vector<int32_t> part(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(anchor));
    for (size_t start = anchor; start < ids.size(); start += chunk) {
        const size_t n = std::min(chunk, ids.size() - start);
        part.resize(anchor);
        part.insert(part.end(), ids.begin() + static_cast<std::ptrdiff_t>(start),
                    ids.begin() + static_cast<std::ptrdiff_t>(start + n));
        total += static_cast<int64_t>(tokenizer.decode(part).size() - anchor_text.size());
    }
    return total;
}

} // namespace embedlab::detail
