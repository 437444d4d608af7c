// Architecture facts of a language model (decoder or encoder), independent of
// the file format it came from.
//
// Thread safety: plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedlab {

// The graph family, which fixes the canonical tensor names (weights.hpp):
// GPT2 = gpt2's Conv1D layout with learned positions; Llama = the rotary decoder
// family (llama, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, gpt_neox, opt), whose variants
// are the switches below; Bert = the bidirectional encoders (bert, distilbert), post-LayerNorm
// with learned positions and segment (token type) rows.
enum class Architecture { GPT2, Llama, Bert };

inline const char* architecture_name(Architecture a)
{
    return a == Architecture::GPT2 ? "gpt2" : a == Architecture::Llama ? "llama" : "bert";
}

// The canonical name of the token table (weights.hpp).
inline const char* token_table_name(Architecture a)
{
    return a == Architecture::GPT2    ? "wte.weight"
           : a == Architecture::Llama ? "model.embed_tokens.weight"
                                      : "embeddings.word_embeddings.weight";
}

// The canonical name of the learned position table; nullptr for rotary models.
inline const char* position_table_name(Architecture a)
{
    return a == Architecture::GPT2   ? "wpe.weight"
           : a == Architecture::Bert ? "embeddings.position_embeddings.weight"
                                     : nullptr;
}

// What an encoder computes from its hidden states: nothing more (BertModel,
// sentence-transformers), masked-token logits (…ForMaskedLM), or class logits
// (…ForSequenceClassification).
enum class EncoderHead { None, MaskedLM, Classification };

// How a decoder normalises: RMSNorm x/rms(x) * w; Gemma's RMSNorm x/rms(x) * (1 + w);
// LayerNorm with a bias (gpt_neox).
enum class NormKind { RMS, RMSOnePlus, LayerNorm };

struct ModelConfig {
    Architecture arch = Architecture::GPT2;
    int64_t vocab_size = 0;
    int64_t hidden_size = 0; // d
    int64_t num_layers = 0;
    int64_t num_heads = 0;         // query heads
    int64_t num_kv_heads = 0;      // == num_heads unless grouped-query attention
    int64_t intermediate_size = 0; // MLP width (gpt2: 4 d unless n_inner)
    int64_t max_positions = 0;     // learned positions (gpt2) or trained context (llama)
    double norm_eps = 1e-5;
    double rope_theta = 10000.0;  // llama only
    bool tied_embeddings = false; // output head shares the token embedding
    std::string activation;       // "gelu_new", "gelu", "silu", ...
    int64_t bos_token_id = -1;    // -1: none
    int64_t eos_token_id = -1;

    // What the file called it ("llama", "qwen2", "gemma2", ...): names the model in
    // messages; the maths is fixed by `arch` and the switches below.
    std::string model_type;

    // Llama family switches (defaults are plain llama).
    int64_t head_size = 0;  // 0: hidden_size / num_heads (qwen3, gemma set their own)
    int64_t rotary_dim = 0; // leading dims of a head that rotate; 0: all (gpt_neox: rotary_pct)
    std::vector<double> rope_freq_divisors; // per frequency (rotary_dim/2); empty: 1 (rope_scaling)
    NormKind norm = NormKind::RMS;
    bool qkv_bias = false;            // q/k/v projections carry biases (qwen2, attention_bias)
    bool o_bias = false;              // o_proj carries a bias (llama attention_bias, gpt_neox)
    bool mlp_bias = false;            // MLP projections carry biases
    bool gated_mlp = true;            // act(gate) * up; false: up -> act -> down (gpt_neox)
    bool qk_norm = false;             // per-head RMSNorm of q and k before RoPE (qwen3)
    bool parallel_residual = false;   // x + attn(ln1 x) + mlp(ln2 x) (gpt_neox)
    bool sandwich_norms = false;      // norms after attention and MLP too (gemma2)
    double embedding_scale = 1.0;     // token embedding times this (gemma: sqrt(d))
    double query_scale = 0.0;         // scores scale; 0: 1/sqrt(head_size) (gemma2: query_pre_attn_scalar)
    double attn_softcap = 0.0;        // scores -> cap tanh(scores / cap); 0: none
    double final_softcap = 0.0;       // logits -> cap tanh(logits / cap); 0: none
    bool learned_positions = false;   // OPT: a position table (model.embed_positions) instead of RoPE
    int64_t position_offset = 0;      // OPT: position p reads row p + 2
    int64_t word_embed_proj_dim = 0;  // OPT-350m: the token table's width, projected to and from d
                                      // (model.project_in / project_out); 0: d
    bool post_norm = false;           // OPT-350m: each LayerNorm after its residual add, not before
    bool final_norm = true;           // model.norm after the last layer (OPT-350m: none)
    int64_t sliding_window = 0;       // attend to the last `sliding_window` positions on sliding layers
    std::vector<bool> sliding_layers; // per layer; empty: none slide
    double rope_local_theta = 0.0;    // sliding layers' RoPE base, never rope-scaled (gemma3); 0: as the rest

    // Encoders (arch Bert). distilbert: no segment rows, and its classifier reads
    // pre_classifier + ReLU over [CLS] where bert's reads its pooler.
    int64_t type_vocab_size = 0; // segment (token type) rows; 0: none
    EncoderHead encoder_head = EncoderHead::None;
    bool has_pooler = false;         // pooler.dense: tanh(W h[CLS] + b)
    std::vector<std::string> labels; // a classifier's id2label, by id (one: regression)
    std::string pooling; // sentence-transformers' pooling: "cls", "mean", "max"; empty: none declared
    bool normalize_embeddings = false; // sentence-transformers' Normalize module

    // FLAT-LLM compressed models (METHODS 3): per decoder layer, the value
    // dimension of each head and the MLP width. Empty: head_dim() and
    // intermediate_size in every layer.
    std::vector<int64_t> value_head_dims;
    std::vector<int64_t> mlp_widths;

    bool is_encoder() const { return arch == Architecture::Bert; }
    int64_t head_dim() const
    {
        return head_size > 0 ? head_size : num_heads > 0 ? hidden_size / num_heads : 0;
    }
    // The token table's (and the tied head's) width: d unless OPT projects it.
    int64_t embedding_dim() const { return word_embed_proj_dim > 0 ? word_embed_proj_dim : hidden_size; }
    bool projects_embedding() const { return embedding_dim() != hidden_size; }
    int64_t rotary_dims() const { return learned_positions ? 0 : rotary_dim > 0 ? rotary_dim : head_dim(); }
    bool layer_slides(int64_t layer) const
    {
        return sliding_window > 0 && static_cast<size_t>(layer) < sliding_layers.size() &&
               sliding_layers[static_cast<size_t>(layer)];
    }
    // "qwen2" etc. when the file said so, else the family name.
    std::string type_name() const { return model_type.empty() ? architecture_name(arch) : model_type; }
    int64_t value_dim(int64_t layer) const
    {
        return value_head_dims.empty() ? head_dim() : value_head_dims[static_cast<size_t>(layer)];
    }
    int64_t mlp_width(int64_t layer) const
    {
        return mlp_widths.empty() ? intermediate_size : mlp_widths[static_cast<size_t>(layer)];
    }
};

// What sets the model apart, one short phrase each ("q/k/v biases", "RoPE
// theta 1e+06, llama3 scaling", ...), for inspect and the workbench.
std::vector<std::string> architecture_facts(const ModelConfig& config);

// The config's fields under their own names ("arch": "gpt2" or "llama", "norm":
// "rms", "rms_one_plus" or "layer_norm"), for the Python module's Model.config.
nlohmann::ordered_json model_config_json(const ModelConfig& config);

} // namespace embedlab
