// llama2.c legacy (version 0) checkpoints: a 7-int header, then float32 arrays.
#include <array>
#include <cstring>

#include "embedlab/error.hpp"
#include "io/canonical_weights.hpp"
#include "io/checked_size.hpp"
#include "io/dtype_convert.hpp"
#include "io/llama2c_header.hpp"
#include "io/readers.hpp"

namespace embedlab::io {

namespace {

// Walks the float arrays in file order, cutting per-layer tensors zero-copy.
class ArrayWalker {
public:
    ArrayWalker(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {}

    // The header check (llama2c_header.cpp) bounds every size by the file's; the
    // checked arithmetic keeps that true whatever changes there.
    torch::Tensor next(std::vector<int64_t> shape)
    {
        const std::optional<uint64_t> n = checked_elements(shape);
        if (!n)
            fail("a tensor of shape " + dims_text(shape) + " is impossibly large");
        const uint64_t at = offset_;
        skip_floats(*n); // inside the file, or InputError
        return tensor_from_mapped(file_, at, StoredType::F32, shape);
    }
    void skip_floats(uint64_t n)
    {
        const std::optional<uint64_t> bytes = checked_mul(n, 4);
        const std::optional<uint64_t> end = bytes ? checked_add(offset_, *bytes) : std::nullopt;
        if (!end || *end > file_->size())
            fail("the header implies data past the end of the file");
        offset_ = *end;
    }

    // One [rows, cols] matrix per layer, stored back to back.
    void per_layer(WeightMap& w, int64_t layers, const std::string& suffix, std::vector<int64_t> shape)
    {
        for (int64_t i = 0; i < layers; ++i)
            w["model.layers." + std::to_string(i) + "." + suffix] = next(shape);
    }

private:
    [[noreturn]] void fail(const std::string& problem) const
    {
        throw InputError(file_->label() + ": not a llama2.c checkpoint: " + problem);
    }

    std::shared_ptr<MappedFile> file_;
    uint64_t offset_ = kLlama2cHeaderBytes;
};

} // namespace

ModelFiles read_llama2c(const std::shared_ptr<MappedFile>& file)
{
    const std::string label = file->label();
    const Llama2cHeader h = read_llama2c_header(*file);
    ModelFiles mf;
    mf.format = ModelFormat::Llama2c;
    mf.files = {file->path()};
    mf.stored_dtype = "F32";
    ModelConfig& c = mf.config;
    c.arch = Architecture::Llama;
    c.model_type = "llama";
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
    // freq_cis: recomputed from rope_theta.
    in.skip_floats(checked_mul(static_cast<uint64_t>(h.seq_len), static_cast<uint64_t>(h.head_size()))
                       .value_or(UINT64_MAX));
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
