// Facts about the canonical weight names shared by every reader: the expected
// tensors of a config, and the Meta -> Hugging Face RoPE row permutation.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "embedlab/model_config.hpp"
#include "embedlab/weights.hpp"

namespace embedlab::io {

// Every canonical tensor `config` requires is present with the right shape,
// starting with the embedding (so a vocabulary mismatch is reported as such).
// Messages start with `weights_label`, or `config_label` for a vocab_size /
// hidden-size disagreement between the config and the embedding.
// embedding_stored = false: a compressed directory, whose embedding is factors.
void check_weights_against_config(const ModelConfig& config, const WeightMap& weights,
                                  const std::string& config_label, const std::string& weights_label,
                                  bool embedding_stored = true);

// Hugging Face names of a model type -> canonical names: phi3's fused qkv_proj /
// gate_up_proj are split, gpt_neox's names are mapped (its per-head fused qkv
// split), buffers that are not weights (causal masks, inv_freq) dropped.
void canonicalize_hf_names(const ModelConfig& config, WeightMap& weights, const std::string& label);

// bert / distilbert (encoder_weights.cpp): "bert." / "distilbert." stripped, distilbert's
// names mapped onto bert's, the tied masked-LM decoder dropped once checked equal to
// the table (refused otherwise), the next-sentence head dropped with a warning.
void canonicalize_encoder_names(const ModelConfig& config, WeightMap& weights, const std::string& label,
                                std::vector<std::string>& warnings);
// llama.cpp's bert names <-> canonical ones ("blk.0.attn_output_norm.weight" <->
// "encoder.layer.0.attention.output.LayerNorm.weight"); nullopt: no such tensor.
std::optional<std::string> encoder_gguf_name(const std::string& name, bool to_gguf);
// The inverse, for the Hugging Face export.
std::vector<std::pair<std::string, torch::Tensor>> native_encoder_tensors(const ModelConfig& config,
                                                                          const WeightMap& weights);

// A sentence-transformers directory (modules.json): its Pooling module's mode
// (cls, mean, max) and whether a Normalize module follows, into `config`. Any
// other module (Dense, ...) or pooling mode is refused by name. No modules.json:
// nothing changes.
void read_sentence_transformers_modules(const std::filesystem::path& dir, ModelConfig& config);

// llama.cpp's fused phi3/gptneox tensors (self_attn.qkv_proj weight and bias,
// rows [q | k | v]; mlp.gate_up_proj, rows [gate | up]) split into canonical ones.
void split_gguf_fused_tensors(const ModelConfig& config, WeightMap& weights, const std::string& label);

// The inverse, for writing a Hugging Face directory that transformers loads;
// names it does not know (compressed factors) pass through unchanged.
std::vector<std::pair<std::string, torch::Tensor>> native_hf_tensors(const ModelConfig& config,
                                                                     const WeightMap& weights);

// Every stored tensor is one the architecture uses: anything else would be
// silently ignored, so it is refused by name.
void refuse_unused_tensors(const ModelConfig& config, const WeightMap& weights, const std::string& label,
                           bool embedding_stored = true);

// Name of the token embedding for the architecture.
const char* embedding_name(Architecture arch);

// Tied configs drop a stored lm_head.weight (the embedding is the head); an
// untied config without lm_head.weight becomes tied, with a warning.
void settle_output_head(ModelConfig& config, WeightMap& weights, const std::string& label,
                        std::vector<std::string>& warnings);

// Rows of a q/k projection [n_heads*head_dim, d] stored in Meta's interleaved
// RoPE layout (pairs 2i, 2i+1) reordered to rotate-half (pairs i, i+head_dim/2),
// exactly as Hugging Face's convert_llama_weights_to_hf.py `permute`.
// Rows (or a bias, 1-D) of q/k projections; each is the other's inverse.
torch::Tensor meta_rope_rows_to_hf(const torch::Tensor& w, int64_t n_heads);
torch::Tensor hf_rope_rows_to_meta(const torch::Tensor& w, int64_t n_heads);

// llama.cpp's GGUF names of the rotary family, one table for reading and
// writing: "model.layers.3.self_attn.q_proj.weight" <-> "blk.3.attn_q.weight".
// `arch` is GGUF's general.architecture (gemma2 names its four norms its own
// way; phi3/gptneox fuse qkv as the pseudo-name self_attn.qkv_proj, phi3 gate
// and up as mlp.gate_up_proj). nullopt: llama.cpp has no such tensor.
std::optional<std::string> gguf_tensor_name(const std::string& arch, const std::string& canonical);
std::optional<std::string> canonical_from_gguf(const std::string& arch, const std::string& gguf);
// The converter stores Gemma's RMSNorm(1 + w) weights as 1 + w (every *norm.weight).
bool gguf_norms_store_one_plus(const std::string& arch);
bool is_norm_weight(const std::string& canonical);

} // namespace embedlab::io
