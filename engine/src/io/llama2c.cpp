// llama2.c legacy (version 0) checkpoints: a 7-int header, then float32 arrays.
#include <array>
#include <cstring>

#include "embedlab/error.hpp"
#include "io/canonical_weights.hpp"
#include "io/dtype_convert.hpp"
#include "io/readers.hpp"

namespace embedlab::io {

namespace {

constexpr uint64_t kHeaderBytes = 7 * 4;

struct Llama2cHeader {
    int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    bool shared_classifier; // positive vocab_size in the file

    std::string text() const
    {
        return "dim " + std::to_string(dim) + ", hidden_dim " + std::to_string(hidden_dim) + ", n_layers " +
               std::to_string(n_layers) + ", n_heads " + std::to_string(n_heads) + ", n_kv_heads " +
               std::to_string(n_kv_heads) + ", vocab_size " +
               std::to_string(shared_classifier ? vocab_size : -vocab_size) + ", seq_len " +
               std::to_string(seq_len);
    }
    int64_t head_size() const { return dim / n_heads; }
    int64_t kv_dim() const { return head_size() * n_kv_heads; }
};

Llama2cHeader read_header(const MappedFile& file)
{
    const std::string label = file.label();
    if (file.size() >= 4 && std::memcmp(file.data(), "PK\x03\x04", 4) == 0)
        throw InputError(label + ": this is a PyTorch (zip) checkpoint, not a llama2.c model; convert it to "
                                 "safetensors or GGUF");
    if (file.size() < kHeaderBytes)
        throw InputError(label + ": file is truncated (" + std::to_string(file.size()) +
                         " bytes, too short for the 28-byte llama2.c header)");
    std::array<int32_t, 7> v{};
    std::memcpy(v.data(), file.data(), kHeaderBytes);
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
    return h;
}

// Total float count the header implies, or 0 on 64-bit overflow.
uint64_t expected_floats(const Llama2cHeader& h)
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
    uint64_t total = 0;
    for (const auto& p : parts) {
        uint64_t n = 1;
        for (uint64_t x : p)
            if (__builtin_mul_overflow(n, x, &n))
                return 0;
        if (__builtin_add_overflow(total, n, &total))
            return 0;
    }
    return total;
}

// Walks the float arrays in file order, cutting per-layer tensors zero-copy.
class ArrayWalker {
public:
    ArrayWalker(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {}

    torch::Tensor next(std::vector<int64_t> shape)
    {
        int64_t n = 1;
        for (int64_t s : shape)
            n *= s;
        torch::Tensor t = tensor_from_mapped(file_, offset_, StoredType::F32, shape);
        offset_ += static_cast<uint64_t>(n) * 4;
        return t;
    }
    void skip_floats(uint64_t n) { offset_ += n * 4; }

    // One [rows, cols] matrix per layer, stored back to back.
    void per_layer(WeightMap& w, int64_t layers, const std::string& suffix, std::vector<int64_t> shape)
    {
        for (int64_t i = 0; i < layers; ++i)
            w["model.layers." + std::to_string(i) + "." + suffix] = next(shape);
    }

private:
    std::shared_ptr<MappedFile> file_;
    uint64_t offset_ = kHeaderBytes;
};

} // namespace

ModelFiles read_llama2c(const std::shared_ptr<MappedFile>& file)
{
    const std::string label = file->label();
    const Llama2cHeader h = read_header(*file);
    const uint64_t floats = expected_floats(h);
    if (floats == 0 || floats > (UINT64_MAX - kHeaderBytes) / 4)
        throw InputError(label + ": not a llama2.c checkpoint: the header (" + h.text() +
                         ") implies an impossible size");
    const uint64_t expected = kHeaderBytes + floats * 4;
    if (expected != file->size())
        throw InputError(label + ": file size " + std::to_string(file->size()) +
                         " bytes does not match the " + std::to_string(expected) +
                         " bytes its llama2.c header implies (" + h.text() + "); " +
                         (file->size() < expected ? "the file is truncated" : "the file is too long") +
                         " or not a llama2.c checkpoint");

    ModelFiles mf;
    mf.format = ModelFormat::Llama2c;
    mf.files = {file->path()};
    mf.stored_dtype = "F32";
    ModelConfig& c = mf.config;
    c.arch = Architecture::Llama;
    c.vocab_size = h.vocab_size;
    c.hidden_size = h.dim;
    c.num_layers = h.n_layers;
    c.num_heads = h.n_heads;
    c.num_kv_heads = h.n_kv_heads;
    c.intermediate_size = h.hidden_dim;
    c.max_positions = h.seq_len;
    c.norm_eps = 1e-5;
    c.rope_theta = 10000.0;
    c.tied_embeddings = h.shared_classifier;
    c.activation = "silu";
    if (c.vocab_size > 2) { // llama2.c's fixed SentencePiece ids
        c.bos_token_id = 1;
        c.eos_token_id = 2;
    }

    const int64_t d = h.dim, L = h.n_layers, f = h.hidden_dim, kv = h.kv_dim();
    WeightMap& w = mf.weights;
    ArrayWalker in(file);
    w["model.embed_tokens.weight"] = in.next({h.vocab_size, d});
    in.per_layer(w, L, "input_layernorm.weight", {d});
    in.per_layer(w, L, "self_attn.q_proj.weight", {d, d});
    in.per_layer(w, L, "self_attn.k_proj.weight", {kv, d});
    in.per_layer(w, L, "self_attn.v_proj.weight", {kv, d});
    in.per_layer(w, L, "self_attn.o_proj.weight", {d, d});
    in.per_layer(w, L, "post_attention_layernorm.weight", {d});
    in.per_layer(w, L, "mlp.gate_proj.weight", {f, d});
    in.per_layer(w, L, "mlp.down_proj.weight", {d, f});
    in.per_layer(w, L, "mlp.up_proj.weight", {f, d});
    w["model.norm.weight"] = in.next({d});
    in.skip_floats(static_cast<uint64_t>(h.seq_len * h.head_size())); // freq_cis: recomputed from rope_theta
    if (!h.shared_classifier)
        w["lm_head.weight"] = in.next({h.vocab_size, d});

    // llama2.c applies RoPE to interleaved pairs (Meta layout).
    for (int64_t i = 0; i < L; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
        w[p + "q_proj.weight"] = meta_rope_rows_to_hf(w[p + "q_proj.weight"], c.num_heads);
        w[p + "k_proj.weight"] = meta_rope_rows_to_hf(w[p + "k_proj.weight"], c.num_kv_heads);
    }
    check_weights_against_config(c, w, label, label);
    return mf;
}

} // namespace embedlab::io
