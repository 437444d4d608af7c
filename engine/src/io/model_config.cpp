// Architecture facts of a ModelConfig, in words.
#include "embedlab/model_config.hpp"
#include "embedlab/json_members.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab {

std::vector<std::string> architecture_facts(const ModelConfig& c)
{
    std::vector<std::string> f;
    if (c.is_encoder()) {
        f.push_back("bidirectional encoder");
        f.push_back("learned positions (" + std::to_string(c.max_positions) + ")");
        if (c.type_vocab_size > 0)
            f.push_back(std::to_string(c.type_vocab_size) + " segment rows");
        f.push_back("LayerNorm after each residual add");
        f.push_back("MLP " + c.activation);
        if (c.encoder_head == EncoderHead::MaskedLM)
            f.push_back("masked-LM head");
        if (c.encoder_head == EncoderHead::Classification)
            f.push_back("classifier over " + std::to_string(c.labels.size()) + " label" +
                        (c.labels.size() == 1 ? " (regression)" : "s"));
        if (!c.pooling.empty())
            f.push_back("sentence-transformers pooling: " + c.pooling +
                        (c.normalize_embeddings ? ", normalised" : ""));
        return f;
    }
    if (c.arch == Architecture::GPT2) {
        f.push_back("learned positions (" + std::to_string(c.max_positions) + ")");
        f.push_back("LayerNorm");
        f.push_back("MLP " + c.activation);
        return f;
    }
    std::string rope = "RoPE theta " + short_number(c.rope_theta);
    if (c.rotary_dims() != c.head_dim())
        rope += ", partial " + std::to_string(c.rotary_dims()) + "/" + std::to_string(c.head_dim());
    if (!c.rope_freq_divisors.empty())
        rope += ", scaled frequencies (rope_scaling)";
    if (c.rope_local_theta > 0)
        rope += "; sliding layers theta " + short_number(c.rope_local_theta) + ", unscaled";
    f.push_back(rope);
    if (c.num_kv_heads != c.num_heads)
        f.push_back("grouped-query attention " + std::to_string(c.num_heads) + "/" +
                    std::to_string(c.num_kv_heads));
    if (c.head_size > 0 && c.head_size * c.num_heads != c.hidden_size)
        f.push_back("head_dim " + std::to_string(c.head_size) + " != hidden/heads");
    f.push_back(c.norm == NormKind::RMS          ? "RMSNorm"
                : c.norm == NormKind::RMSOnePlus ? "RMSNorm (1 + w)"
                                                 : "LayerNorm with biases");
    if (c.qkv_bias)
        f.push_back(c.o_bias ? "q/k/v/o biases" : "q/k/v biases");
    if (c.qk_norm)
        f.push_back("per-head q/k norms");
    f.push_back(std::string(c.gated_mlp ? "gated MLP " : "MLP ") + c.activation +
                (c.mlp_bias ? " with biases" : ""));
    if (c.parallel_residual)
        f.push_back("parallel residual");
    if (c.sandwich_norms)
        f.push_back("norms before and after attention and MLP");
    if (c.post_norm)
        f.push_back("LayerNorm after each residual add");
    if (!c.final_norm)
        f.push_back("no final norm");
    if (c.projects_embedding())
        f.push_back("token table of width " + std::to_string(c.embedding_dim()) + " projected to and from d");
    if (c.embedding_scale != 1.0)
        f.push_back("embedding x " + short_number(c.embedding_scale));
    if (c.query_scale > 0)
        f.push_back("query scale " + short_number(c.query_scale));
    if (c.attn_softcap > 0 || c.final_softcap > 0)
        f.push_back("soft-caps: attention " + short_number(c.attn_softcap) + ", logits " +
                    short_number(c.final_softcap));
    if (c.sliding_window > 0) {
        std::string layers;
        for (size_t l = 0; l < c.sliding_layers.size(); ++l)
            if (c.sliding_layers[l]) {
                if (!layers.empty())
                    layers += ','; // appends only: GCC 12's false -Wstringop-overflow on "," + string
                layers += std::to_string(l);
            }
        f.push_back("sliding window " + std::to_string(c.sliding_window) + " on layers " + layers);
    }
    return f;
}

nlohmann::ordered_json model_config_json(const ModelConfig& c)
{
    nlohmann::ordered_json j{{"arch", architecture_name(c.arch)}, {"model_type", c.type_name()}};
    EMBEDLAB_JSON_MEMBERS(j, c, vocab_size, hidden_size, num_layers, num_heads, num_kv_heads,
                          intermediate_size, max_positions, norm_eps, rope_theta, tied_embeddings, activation,
                          bos_token_id, eos_token_id, head_size, rotary_dim, rope_freq_divisors);
    j["norm"] = c.norm == NormKind::RMS          ? "rms"
                : c.norm == NormKind::RMSOnePlus ? "rms_one_plus"
                                                 : "layer_norm";
    EMBEDLAB_JSON_MEMBERS(j, c, qkv_bias, o_bias, mlp_bias, gated_mlp, qk_norm, parallel_residual,
                          sandwich_norms, embedding_scale, query_scale, attn_softcap, final_softcap,
                          learned_positions, position_offset, word_embed_proj_dim, post_norm, final_norm,
                          sliding_window, sliding_layers, rope_local_theta, value_head_dims, mlp_widths);
    if (c.is_encoder()) {
        j["encoder_head"] = c.encoder_head == EncoderHead::MaskedLM         ? "masked_lm"
                            : c.encoder_head == EncoderHead::Classification ? "classification"
                                                                            : "none";
        EMBEDLAB_JSON_MEMBERS(j, c, type_vocab_size, has_pooler, labels, pooling, normalize_embeddings);
    }
    j["head_dim"] = c.head_dim();
    j["embedding_dim"] = c.embedding_dim();
    return j;
}

} // namespace embedlab
