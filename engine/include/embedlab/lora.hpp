// LoRA adapters for recovery fine-tuning (METHODS.md 1): low-rank corrections on
// q, k, v, o, the MLP projections and the compressed embedding, base weights frozen.
//
//   auto lm = embedlab::load_model("out/tinygpt2-pca16");
//   auto adapters = embedlab::make_lora_adapters(*lm.model, {.rank = 32, .alpha = 64, .seed = 1});
//   embedlab::attach_lora(*lm.model, adapters);   // every adapter enters the forward pass
//   ... train adapters->trainable() (finetune.hpp) ...
//   embedlab::merge_lora(*lm.model);               // W += scale B A, Z += scale B A, ...
//
// One adapter corrects one weight matrix W [out, in] (the PyTorch Linear layout):
// W' = W + scale B A with A [r, in], B [out, r], scale = alpha / rank; a layer
// computes y = x W^T + scale (x A^T) B^T. B starts at zero (the model is unchanged
// until training moves it), A uniform in +-1/sqrt(in) from the seed.
// Targets and names (gpt2's fused c_attn gets one adapter per column block;
// its Conv1D weights are stored [in, out], so a merge adds (scale B A)^T):
//   gpt2 : h.{i}.attn.{q,k,v}, h.{i}.attn.c_proj (o), h.{i}.mlp.{c_fc,c_proj}
//   llama: model.layers.{i}.self_attn.{q,k,v,o}_proj, model.layers.{i}.mlp.{gate,up,down}_proj
//   embedding: "embedding.Z" [V, k] and "embedding.P" [k, d] for a table with
//          low_rank_factors() (pca/svd/lrf: the input lookup and the tied head both use
//          Z + dZ and P + dP); for any other compressed table "embedding.E" [V, d], a
//          correction to its rows.
// An adapter's rank is capped at min(out, in): a larger rank adds nothing.
// Thread safety: adapters are tensors shared with the model; train or read, not both at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct LoraOptions {
    int64_t rank = 32;
    double alpha = 64;
    // Any of "q", "k", "v", "o", "mlp", "embedding".
    std::set<std::string> targets{"q", "k", "v", "o", "mlp", "embedding"};
    uint64_t seed = 0;
};

struct LoraAdapter {
    torch::Tensor A;                                            // [r, in]
    torch::Tensor B;                                            // [out, r]
    torch::Tensor delta() const { return torch::matmul(B, A); } // [out, in], unscaled
};

struct LoraAdapters {
    int64_t rank = 0;
    double alpha = 0;
    double scale() const { return alpha / static_cast<double>(rank); }
    std::map<std::string, LoraAdapter> adapters; // by target name (above)

    int64_t parameter_count() const;
    std::vector<torch::Tensor> trainable() const; // every A and B
    // Stored as "lora.<name>.A" / "lora.<name>.B".
    std::vector<std::pair<std::string, torch::Tensor>> tensors() const;
    // {rank, alpha, scale, adapters: {name: {A: shape, B: shape}}}
    nlohmann::ordered_json json() const;
};

// A weight the adapters may correct: its name and [out, in] size.
struct LoraTarget {
    std::string name;
    std::string kind; // "q", "k", "v", "o", "mlp" or "embedding"
    int64_t out = 0, in = 0;
};
// The model's targets (embedding targets only when its token table is compressed).
std::vector<LoraTarget> lora_targets(const LanguageModel& model);

// Fresh adapters for the selected targets. InputError for rank < 1, alpha <= 0,
// an unknown target name, or "embedding" on a dense table.
std::shared_ptr<LoraAdapters> make_lora_adapters(const LanguageModel& model, const LoraOptions& options);

// Puts the adapters into the forward pass: the linear ones through
// LanguageModel::set_lora, the embedding ones by wrapping the token embedding
// (lookup and tied head alike). Shapes are checked against lora_targets().
void attach_lora(LanguageModel& model, std::shared_ptr<const LoraAdapters> adapters);

// Folds attached adapters into the base weights and factors and detaches them:
// the model computes the same function with no adapters left.
void merge_lora(LanguageModel& model);

// The token embedding with its embedding adapters (what attach_lora installs).
class LoraTokenEmbedding final : public TokenEmbedding {
public:
    LoraTokenEmbedding(std::shared_ptr<const TokenEmbedding> base,
                       std::shared_ptr<const LoraAdapters> adapters);
    int64_t vocab_size() const override { return base_->vocab_size(); }
    int64_t dim() const override { return base_->dim(); }
    torch::Tensor lookup(const torch::Tensor& ids) const override;
    torch::Tensor project(const torch::Tensor& hidden) const override;
    std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const override; // onnx_export.hpp
    std::string onnx_project(onnx::Graph& graph, const std::string& hidden) const override;
    // The base table's values; the adapters are counted in ParameterBreakdown::adapters.
    int64_t parameter_count() const override { return base_->parameter_count(); }
    std::string kind() const override { return base_->kind(); }
    const std::shared_ptr<const TokenEmbedding>& base() const { return base_; }
    const TokenEmbedding* lora_base() const override { return base_.get(); }
    // The base with the adapters folded in (a base with low_rank_factors() only, as
    // low_rank_with_adapters; InputError otherwise).
    std::shared_ptr<const TokenEmbedding> merged() const;

private:
    std::shared_ptr<const TokenEmbedding> effective_low_rank() const;
    std::shared_ptr<const TokenEmbedding> base_;
    std::shared_ptr<const LoraAdapters> adapters_;
    mutable std::shared_ptr<const TokenEmbedding> onnx_merged_; // merged() for an ONNX export
};

// `base` with the embedding adapters of `adapters` folded into its low-rank factors, as
// plain tensors (merge_lora). InputError when `base` has no low_rank_factors().
std::shared_ptr<const TokenEmbedding> low_rank_with_adapters(const TokenEmbedding& base,
                                                             const LoraAdapters& adapters);

// A low-rank factorised embedding from random initialisation (the paper's LRF):
// Z [V, k] ~ N(0, 1), P [k, d] ~ N(0, 0.02^2 / k), so that the rows of Z P have
// GPT-2's initial spread (0.02); no mean. Z and P require grad.
std::shared_ptr<const TokenEmbedding> random_low_rank_embedding(int64_t vocab, int64_t dim, int64_t rank,
                                                                uint64_t seed);

// Adapters from stored tensors ("lora.<name>.A/B") checked against the model's
// targets and the manifest's rank/alpha; InputError naming `label` otherwise.
std::shared_ptr<LoraAdapters> lora_from_tensors(const LanguageModel& model, const WeightMap& tensors,
                                                int64_t rank, double alpha, const std::string& label);

// load_model's hook: a compressed directory whose embedlab.json has an unmerged
// "lora" block gets DIR/adapters.safetensors attached.
void attach_lora_from_directory(LanguageModel& model, const std::string& manifest_text,
                                const std::filesystem::path& dir);

} // namespace embedlab
