// Parser of llama-perplexity's --kl-divergence-base file (llamacpp_logits.hpp).
#include "io/llamacpp_logits.hpp"

#include <cmath>
#include <string>

#include "embedlab/error.hpp"
#include "io/checked_size.hpp"

namespace embedlab::io {

namespace {

int32_t read_int32(const uint8_t* p)
{
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

float read_float(const uint8_t* p)
{
    float v;
    std::memcpy(&v, p, 4);
    return v;
}

} // namespace

LlamaCppLogitRow LlamaCppLogits::row(int64_t chunk, int64_t k) const
{
    const uint8_t* p =
        file->data() + rows_offset + (static_cast<uint64_t>(chunk * scored_per_chunk() + k)) * row_bytes;
    return {read_float(p), read_float(p + 4), p + 8};
}

LlamaCppLogits parse_llamacpp_logits(std::shared_ptr<MappedFile> file)
{
    const std::string label = file->label();
    const uint8_t* data = file->data();
    const uint64_t size = file->size();
    const std::string what = " (llama-perplexity --kl-divergence-base output)";
    if (size < 20)
        throw InputError(label + ": truncated: " + std::to_string(size) +
                         " bytes, shorter than the 20-byte header of a log-probability file" + what);
    if (std::memcmp(data, "_logits_", 8) != 0)
        throw InputError(label + ": not a log-probability file" + what +
                         ": it does not start with \"_logits_\"");
    LlamaCppLogits r;
    r.n_ctx = read_int32(data + 8);
    r.n_vocab = read_int32(data + 12);
    r.n_chunk = read_int32(data + 16);
    const std::string header = "n_ctx " + std::to_string(r.n_ctx) + ", n_vocab " + std::to_string(r.n_vocab) +
                               ", n_chunk " + std::to_string(r.n_chunk);
    if (r.n_ctx < 3 || r.n_vocab < 1 || r.n_chunk < 1)
        throw InputError(
            label + ": header " + header +
            " is not a log-probability file's: it needs n_ctx >= 3 and at least one token and chunk");
    const uint64_t nv = 2 * ((static_cast<uint64_t>(r.n_vocab) + 1) / 2) + 4;
    r.row_bytes = 2 * nv;
    const auto n_tokens = checked_mul(static_cast<uint64_t>(r.n_ctx), static_cast<uint64_t>(r.n_chunk));
    const auto rows =
        checked_mul(static_cast<uint64_t>(r.scored_per_chunk()), static_cast<uint64_t>(r.n_chunk));
    const auto token_bytes = n_tokens ? checked_mul(*n_tokens, 4) : std::nullopt;
    const auto row_total = rows ? checked_mul(*rows, r.row_bytes) : std::nullopt;
    const auto body = token_bytes && row_total ? checked_add(*token_bytes, *row_total) : std::nullopt;
    const auto expected = body ? checked_add(*body, 20) : std::nullopt;
    if (!expected || *expected > size)
        throw InputError(label + ": truncated: " + std::to_string(size) + " bytes, but its header (" +
                         header + ") needs " +
                         (expected ? std::to_string(*expected) : std::string("more than 2^64")) + " bytes");
    if (*expected < size)
        throw InputError(label + ": " + std::to_string(size - *expected) +
                         " bytes after the last chunk its header (" + header +
                         ") announces; not a file llama-perplexity wrote");
    r.rows_offset = 20 + *token_bytes;
    r.tokens.resize(*n_tokens);
    std::memcpy(r.tokens.data(), data + 20, *token_bytes);
    for (size_t i = 0; i < r.tokens.size(); ++i)
        if (r.tokens[i] < 0 || r.tokens[i] >= r.n_vocab)
            throw InputError(label + ": token " + std::to_string(i) + " has id " +
                             std::to_string(r.tokens[i]) + ", outside its vocabulary of " +
                             std::to_string(r.n_vocab));
    r.file = std::move(file);
    for (int64_t c = 0; c < r.n_chunk; ++c)
        for (int64_t k = 0; k < r.scored_per_chunk(); ++k) {
            const auto row = r.row(c, k);
            if (!std::isfinite(row.scale) || row.scale < 0 || !std::isfinite(row.min_log_prob) ||
                row.min_log_prob > 0)
                throw InputError(label + ": chunk " + std::to_string(c) + ", row " + std::to_string(k) +
                                 ": scale " + std::to_string(row.scale) + " and minimum log-probability " +
                                 std::to_string(row.min_log_prob) + " are not a log-probability row's");
        }
    return r;
}

} // namespace embedlab::io
