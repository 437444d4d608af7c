// The encoder (bert, distilbert) as an ONNX graph (onnx_export.hpp): encoder_forward.cpp
// and eval/embed.cpp's pooling written node by node, so the three are read side by side.
//
// Inputs (int64, [batch, sequence]): input_ids, attention_mask (1 a token, 0 padding)
// and, for a model with segment rows, token_type_ids.
// Outputs: last_hidden_state [batch, sequence, d]; sentence_embedding [batch, d], the
// pooling `embed` uses by default (the model's own and its Normalize, else CLS for a
// classifier, else the mean over the mask); and by head, logits: a classifier's
// [batch, labels], a masked-LM head's [batch, sequence, V].
// Thread safety: one writer per graph.
#pragma once

#include "export/onnx_decoder.hpp"

namespace embedlab::onnx {

// InputError naming what cannot be written (an embedding without an ONNX lookup,
// unmerged LoRA adapters).
DecoderGraph write_encoder(const LanguageModel& model, Graph& graph, const ProgressFn& progress);

} // namespace embedlab::onnx
