// llama.cpp's `llama-perplexity --kl-divergence-base FILE` file: the base model's
// log-probabilities over llama.cpp's perplexity chunks, as its
// tools/perplexity/perplexity.cpp writes them (perplexity(), log_softmax()):
//
//   "_logits_"  int32 n_ctx  int32 n_vocab  int32 n_chunk  int32 tokens[n_chunk * n_ctx]
//   then per chunk, for its scored positions n_ctx/2 .. n_ctx-2 (n_ctx - 1 - n_ctx/2 rows),
//   one row of nv = 2 * ((n_vocab + 1) / 2) + 4 uint16: float scale, float min_log_prob,
//   n_vocab uint16 q (padded to even); log p_i = scale * q_i + min_log_prob.
//
//   auto file = io::MappedFile::open(path);
//   auto logits = io::parse_llamacpp_logits(file);
//   float lp = logits.row(chunk, k).log_prob(id);
//
// Everything is checked before use: magic, sizes (overflow-checked), exact file length,
// token ids inside n_vocab, every row's scale and offset finite. Torch-free (fuzzed:
// fuzz/fuzz_llamacpp_logits.cpp). Thread safety: read-only after parsing; reentrant.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "io/mapped_file.hpp"

namespace embedlab::io {

struct LlamaCppLogitRow {
    float scale = 0, min_log_prob = 0;
    const uint8_t* q = nullptr; // n_vocab little-endian uint16, maybe unaligned
    uint16_t level(int64_t i) const
    {
        uint16_t v;
        std::memcpy(&v, q + 2 * i, 2);
        return v;
    }
    // Exactly llama.cpp's float expression (kl_divergence's log_softmax).
    float log_prob(int64_t i) const { return scale * level(i) + min_log_prob; }
};

struct LlamaCppLogits {
    std::shared_ptr<MappedFile> file;
    int64_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
    std::vector<int32_t> tokens; // n_chunk * n_ctx, as llama.cpp tokenized the text
    uint64_t rows_offset = 0;    // byte offset of chunk 0's first row
    uint64_t row_bytes = 0;      // 2 * nv

    int64_t first_scored() const { return n_ctx / 2; }                 // the logits' first position
    int64_t scored_per_chunk() const { return n_ctx - 1 - n_ctx / 2; } // rows per chunk
    LlamaCppLogitRow row(int64_t chunk, int64_t k) const;
};

// Throws InputError "<file>: <problem>" on anything llama.cpp would not have written.
LlamaCppLogits parse_llamacpp_logits(std::shared_ptr<MappedFile> file);

} // namespace embedlab::io
