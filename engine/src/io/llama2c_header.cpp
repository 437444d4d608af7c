#include "io/llama2c_header.hpp"

#include <array>
#include <cstring>
#include <optional>

#include "embedlab/error.hpp"
#include "io/checked_size.hpp"

namespace embedlab::io {

Llama2cHeader read_llama2c_header(const MappedFile& file)
{
    const std::string label = file.label();
    if (file.size() >= 4 && std::memcmp(file.data(), "PK\x03\x04", 4) == 0)
        throw InputError(label + ": this is a PyTorch (zip) checkpoint, not a llama2.c model; convert it to "
                                 "safetensors or GGUF");
    if (file.size() < kLlama2cHeaderBytes)
        throw InputError(label + ": file is truncated (" + std::to_string(file.size()) +
                         " bytes, too short for the 28-byte llama2.c header)");
    std::array<int32_t, 7> v{};
    std::memcpy(v.data(), file.data(), kLlama2cHeaderBytes);
    if (static_cast<uint32_t>(v[0]) == 0x616b3432u) // "ak42": export.py version 1 and later
        throw InputError(label + ": llama2.c export version " + std::to_string(v[1]) +
                         " is not supported; only the legacy version-0 format is");

    Llama2cHeader h{v[0], v[1], v[2], v[3], v[4], v[5] < 0 ? -int64_t{v[5]} : v[5], v[6], v[5] > 0};
    const bool sane = h.dim > 0 && h.hidden_dim > 0 && h.n_layers > 0 && h.n_heads > 0 && h.n_kv_heads > 0 &&
                      h.vocab_size > 0 && h.seq_len > 0 && h.dim % h.n_heads == 0 && h.head_size() % 2 == 0 &&
                      h.n_heads % h.n_kv_heads == 0;
    if (!sane)
        throw InputError(label + ": not a llama2.c checkpoint: the header (" + h.text() +
                         ") is inconsistent");
    const uint64_t floats = llama2c_expected_floats(h);
    const std::optional<uint64_t> float_bytes = floats ? checked_mul(floats, 4) : std::nullopt;
    const std::optional<uint64_t> total =
        float_bytes ? checked_add(*float_bytes, kLlama2cHeaderBytes) : std::nullopt;
    if (!total)
        throw InputError(label + ": not a llama2.c checkpoint: the header (" + h.text() +
                         ") implies an impossible size (more than 2^64 bytes)");
    const uint64_t expected = *total;
    if (expected != file.size())
        throw InputError(label + ": file size " + std::to_string(file.size()) + " bytes does not match the " +
                         std::to_string(expected) + " bytes its llama2.c header implies (" + h.text() +
                         "); " + (file.size() < expected ? "the file is truncated" : "the file is too long") +
                         " or not a llama2.c checkpoint");

    return h;
}

uint64_t llama2c_expected_floats(const Llama2cHeader& h)
{
    const uint64_t V = h.vocab_size, d = h.dim, L = h.n_layers, f = h.hidden_dim, kv = h.kv_dim(),
                   seq = h.seq_len, hs = h.head_size();
    const std::array<std::array<uint64_t, 3>, 13> parts = {{
        {V, d, 1},                           // token_embedding_table
        {L, d, 1},                           // rms_att_weight
        {L, d, d},                           // wq
        {L, kv, d},                          // wk
        {L, kv, d},                          // wv
        {L, d, d},                           // wo
        {L, d, 1},                           // rms_ffn_weight
        {L, f, d},                           // w1
        {L, d, f},                           // w2
        {L, f, d},                           // w3
        {d, 1, 1},                           // rms_final_weight
        {seq, hs, 1},                        // freq_cis_real + freq_cis_imag (hs/2 each)
        {h.shared_classifier ? 0 : V, d, 1}, // wcls
    }};
    std::optional<uint64_t> total = 0;
    for (const auto& p : parts) {
        std::optional<uint64_t> n = 1;
        for (uint64_t x : p)
            n = n ? checked_mul(*n, x) : std::nullopt;
        total = n && total ? checked_add(*total, *n) : std::nullopt;
    }
    return total.value_or(0);
}

} // namespace embedlab::io
