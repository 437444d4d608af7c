#include "io/canonical_weights.hpp"

#include "embedlab/error.hpp"
#include "model/shape_check.hpp"

namespace embedlab::io {

namespace {

std::string shape_text(c10::IntArrayRef shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

} // namespace

const char* embedding_name(Architecture arch)
{
    return arch == Architecture::GPT2 ? "wte.weight" : "model.embed_tokens.weight";
}

void check_weights_against_config(const ModelConfig& config, const WeightMap& weights,
                                  const std::string& config_label, const std::string& weights_label,
                                  bool embedding_stored)
{
    const std::string embedding = embedding_name(config.arch);
    const auto emb = weights.find(embedding);
    if (emb != weights.end() && emb->second.dim() == 2) {
        const auto rows = emb->second.size(0), cols = emb->second.size(1);
        if (rows != config.vocab_size)
            throw InputError(config_label + ": vocab_size " + std::to_string(config.vocab_size) +
                             " disagrees with the " + std::to_string(rows) + " rows of " + embedding +
                             " in " + weights_label);
        if (cols != config.hidden_size)
            throw InputError(config_label + ": hidden size " + std::to_string(config.hidden_size) +
                             " disagrees with the " + std::to_string(cols) + " columns of " + embedding +
                             " in " + weights_label);
    }

    for (int64_t layer = -1; layer < config.num_layers; ++layer) {
        // Layer by layer, so an absurd layer count fails at the first missing layer.
        for (const auto& e : detail::expected_layer_tensors(config, layer)) {
            if (!embedding_stored &&
                (e.name == embedding || (e.name == "wpe.weight" && !weights.count(e.name))))
                continue;
            const auto it = weights.find(e.name);
            if (it == weights.end())
                throw InputError(weights_label + ": missing tensor '" + e.name + "' (required by " +
                                 architecture_name(config.arch) + " with " +
                                 std::to_string(config.num_layers) + " layers)");
            if (it->second.sizes() != c10::IntArrayRef(e.shape))
                throw InputError(weights_label + ": tensor '" + e.name + "' has shape " +
                                 shape_text(it->second.sizes()) + " but the config implies " +
                                 shape_text(e.shape));
        }
    }
}

void settle_output_head(ModelConfig& config, WeightMap& weights, const std::string& label,
                        std::vector<std::string>& warnings)
{
    const bool has_head = weights.count("lm_head.weight") > 0;
    if (config.tied_embeddings && has_head) {
        weights.erase("lm_head.weight");
    } else if (!config.tied_embeddings && !has_head) {
        config.tied_embeddings = true;
        warnings.push_back(label + ": tie_word_embeddings is false but there is no lm_head.weight; "
                                   "using the token embedding as the output head (tied)");
    }
}

torch::Tensor meta_rope_rows_to_hf(const torch::Tensor& w, int64_t n_heads)
{
    const int64_t rows = w.size(0), cols = w.size(1);
    const int64_t head_dim = rows / n_heads;
    // Meta row (h, 2i + j) becomes HF row (h, j * head_dim/2 + i).
    return w.reshape({n_heads, head_dim / 2, 2, cols}).transpose(1, 2).reshape({rows, cols}).contiguous();
}

} // namespace embedlab::io
