// Exporting a model (dense, compressed, or FLAT-LLM) for other tools: a GGUF
// file that llama.cpp runs, or a dense Hugging Face directory.
//
//   auto lm = embedlab::load_model("runs/pca-64");             // any model EmbedLab loads
//   auto report = embedlab::export_gguf(lm, "pca-64.gguf", {.type = embedlab::GgufExportType::Q8_0});
//   export_gguf(lm, "q4.gguf", {.type = GgufExportType::F32, .embedding_type = "q4_0"}); // table at Q4_0
//   // report.notes: what could not be kept as it was (padded value heads, F16 fallbacks)
//
// Compressed token tables are reconstructed densely (llama.cpp has no factor
// layers); FLAT-LLM's narrowed value heads are zero-padded back to the head size
// (exactly the same function; llama.cpp needs value heads as wide as key heads)
// and so are narrowed MLPs (llama.cpp sizes all layers alike). What llama.cpp cannot
// express is refused with the reason, never approximated.
// Thread safety: reads the model only; one export per output file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

enum class GgufExportType { F32, F16, Q8_0 };

// "f32" / "f16" / "q8_0"; InputError naming the accepted ones otherwise.
GgufExportType gguf_export_type(const std::string& name);

struct GgufExportOptions {
    GgufExportType type = GgufExportType::F16; // of 2-D weights; norms, biases stay F32
    // The token table's type, as llama-quantize's --token-embedding-type: "f32" or a ggml
    // block type (quant_types.hpp: f16, bf16, q8_0 .. q2_k) whose blocks divide d. Empty:
    // a quantised table (compress --method quant) keeps its own type, any other `type`.
    std::string embedding_type;
    // An untied output head's type (--output-tensor-type); empty: `type`. A tied head is
    // the token table in llama.cpp: refused, embedding_type sets both.
    std::string output_type;
    bool overwrite = false;
};

struct ModelExportReport {
    std::filesystem::path path;
    std::string architecture; // as llama.cpp names it ("llama", "qwen2", ...) or model_type for hf
    int64_t tensors = 0;
    uint64_t bytes = 0;
    std::vector<std::string> notes; // what changed on the way out, for people
    // GGUF: the token table's and the untied head's stored types ("q4_0"; "" for none).
    std::string embedding_type, output_type;
    // GGUF: the most tensors the writer held converted at once (1: each tensor is
    // converted, written and released before the next, issue 21's memory bound).
    int64_t most_tensors_held = 0;
};

// Whether `model` can be written as GGUF; empty when it can, else why not.
std::string gguf_export_refusal(const LoadedModel& model);

ModelExportReport export_gguf(const LoadedModel& model, const std::filesystem::path& out,
                              const GgufExportOptions& options, const ProgressFn& progress = {});

// Before an export's work: `out` may be written as a GGUF file, i.e. it is free or
// (overwrite) a GGUF file EmbedLab exported (export_gguf marks its files), and it
// is none of `inputs`. export_gguf checks it again as it writes.
void check_gguf_export_target(const std::filesystem::path& out, bool overwrite,
                              const std::vector<std::filesystem::path>& inputs = {});

// A plain Hugging Face directory (config.json, tokenizer files, model.safetensors
// in float32) of any Hugging Face-sourced model, compressed tables reconstructed.
ModelExportReport export_hf_dense(const LoadedModel& model, const std::filesystem::path& out,
                                  bool overwrite = false, const ProgressFn& progress = {});

} // namespace embedlab
