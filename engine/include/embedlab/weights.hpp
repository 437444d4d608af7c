// Model weights as float32 libtorch tensors under canonical Hugging Face names.
//
// Canonical names (whatever the file format):
//   gpt2 : wte.weight [V,d], wpe.weight [P,d], ln_f.{weight,bias},
//          h.{i}.ln_1.{weight,bias}, h.{i}.ln_2.{weight,bias},
//          h.{i}.attn.c_attn.{weight [d,3d], bias [3d]},
//          h.{i}.attn.c_proj.{weight [d,d], bias}, h.{i}.mlp.c_fc.{weight [d,f], bias},
//          h.{i}.mlp.c_proj.{weight [f,d], bias}          (Conv1D: stored [in, out];
//          a leading "transformer." is stripped)
//   llama: model.embed_tokens.weight [V,d], model.norm.weight, lm_head.weight [V,d]
//          (absent when tied), model.layers.{i}.input_layernorm.weight,
//          model.layers.{i}.post_attention_layernorm.weight,
//          model.layers.{i}.self_attn.{q,k,v,o}_proj.weight [out,in],
//          model.layers.{i}.mlp.{gate,up,down}_proj.weight [out,in].
//          q/k rows are in the rotate-half (Hugging Face) RoPE layout; readers of
//          Meta-layout files (GGUF, llama2.c) permute on load.
//   bert : embeddings.{word_embeddings [V,d], position_embeddings [P,d],
//          token_type_embeddings [types,d], LayerNorm.{weight,bias}},
//          encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias},
//          encoder.layer.{i}.attention.output.{dense,LayerNorm}.{weight,bias},
//          encoder.layer.{i}.intermediate.dense.{weight,bias},
//          encoder.layer.{i}.output.{dense,LayerNorm}.{weight,bias}, pooler.dense.*,
//          classifier.* (distilbert: pre_classifier.* too), masked-LM head
//          cls.predictions.{transform.dense.*, transform.LayerNorm.*, bias [V]} (its
//          decoder tied to the table). A leading "bert." is stripped; distilbert's
//          names are mapped onto these.
//
// Thread safety: a WeightMap is safe to read from several threads.
#pragma once

#include <map>
#include <string>

#include <torch/types.h>

namespace embedlab {

using WeightMap = std::map<std::string, torch::Tensor>;

} // namespace embedlab
