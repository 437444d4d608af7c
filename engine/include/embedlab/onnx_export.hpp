// Exporting a model as ONNX with its token embedding as stored: pca as a Gather on Z, a
// MatMul with P and the mean; lle, tt, tucker, fourier, aq and quant tables by their own
// lookups (TokenEmbedding::onnx_lookup); FLAT-LLM's narrowed projections as they are.
// A tied head multiplies by the factors (or by rows rebuilt in the graph), never by a
// stored dense copy. Standard operators only (opset 17, no custom domain), checked by the
// ONNX project's checker before the file is written.
//
//   auto lm = embedlab::load_model("runs/pca-64");
//   auto report = embedlab::export_onnx(lm, "pca-64.onnx", {});
//   // inputs: input_ids, attention_mask, position_ids (int64); output: logits
//   // with_past: past_key_values.<l>.key/.value in, present.<l>.key/.value out
//
// The interface is the one ONNX Runtime GenAI and Hugging Face Optimum use for decoders:
// input_ids [batch, sequence], attention_mask [batch, past_sequence + sequence] (1 reads a
// position, 0 masks it), position_ids [batch, sequence]; logits [batch, sequence, vocab].
// Keys are held after the rotary embedding, [batch, kv_heads, positions, head_dim].
// Thread safety: reads the model only; one export per output file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"
#include "embedlab/model_export.hpp"

namespace embedlab {

struct OnnxExportOptions {
    int opset = 17;             // 17 (LayerNormalization's first) .. 17: what the checker knows
    bool with_past = false;     // past key/value inputs and present outputs (generation)
    bool external_data = false; // tensors in FILE.onnx.data beside the graph (needed past 2 GB)
    bool overwrite = false;     // replace an ONNX file EmbedLab exported
};

// Whether `model` can be written as ONNX; empty when it can, else why not (an embedding
// without an ONNX lookup, unmerged LoRA adapters on the linear layers).
std::string onnx_export_refusal(const LanguageModel& model);

// The whole decoder. InputError for what cannot be exported, naming it; nothing is left
// behind on any failure or a cancel. report.bytes: the graph file plus its data file.
ModelExportReport export_onnx(const LoadedModel& model, const std::filesystem::path& out,
                              const OnnxExportOptions& options, const ProgressFn& progress = {});
// The same for a model in memory (a run's compressed model); `source` names it in the
// file's metadata and is never overwritten; `files`, when given, are the files it was
// loaded from (a compressed directory's factors stored at a ggml type stay that type).
ModelExportReport export_onnx(const LanguageModel& model, const std::filesystem::path& out,
                              const OnnxExportOptions& options, const ProgressFn& progress,
                              const std::filesystem::path& source, const ModelFiles* files = nullptr);

// Only a token embedding, for checking a method's lookup in a runtime: input `ids`
// (int64 [n]) -> output `rows` [n, d], and input `hidden` (float [m, d]) -> output
// `logits` [m, V] through its tied head.
ModelExportReport export_onnx_embedding(const TokenEmbedding& embedding, const std::filesystem::path& out,
                                        const OnnxExportOptions& options);

// Before an export's work: `out` is free or (overwrite) an ONNX file EmbedLab exported,
// and none of `inputs`.
void check_onnx_export_target(const std::filesystem::path& out, bool overwrite,
                              const std::vector<std::filesystem::path>& inputs = {});

} // namespace embedlab
