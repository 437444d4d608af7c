// Random-weight Hugging Face model directories with the real config.json and
// tensor names of small public LMs: scale fixtures for tests and benchmarks.
//
//   embedlab::SynthOptions o;
//   o.like = "qwen2.5-0.5b";
//   o.out = "fixtures/qwen";
//   o.layers = 2;                                   // unset: the real layer count
//   const auto report = embedlab::synth_model(o, progress);  // progress(bytes, total)
//
// model.safetensors is streamed a few MB at a time, never held whole. Each value
// depends only on (seed, tensor name, position): xoshiro256** and the polar
// Box-Muller method in double precision, no torch RNG, so a seed writes the same
// bytes everywhere and a model with fewer layers shares the full one's tensors.
// Thread safety: reentrant; concurrent calls must write different directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "embedlab/error.hpp"

namespace embedlab {

struct SynthOptions {
    std::string like;              // one of synth_model_names()
    std::filesystem::path out;     // the directory to create
    std::string dtype;             // "f32", "f16" or "bf16"; empty: the real checkpoint's
    uint64_t seed = 1;             // same seed, same bytes
    std::optional<int64_t> layers; // overrides the layer count (1..1024)
    bool overwrite = false;        // replace an existing model directory (one with config.json) or empty one
    // A directory with GPT-2's tokenizer.json, vocab.json and merges.txt; empty:
    // the bundled default model's.
    std::filesystem::path gpt2_tokenizer_dir;
};

struct SynthReport {
    std::filesystem::path path;
    std::string like, model_type, dtype; // dtype as given: "bf16"
    int64_t layers = 0, tensors = 0, parameters = 0;
    uint64_t bytes = 0; // of model.safetensors
    int64_t tokenizer_vocab = 0;
    std::string tokenizer; // which tokenizer files were written, for people
    std::vector<std::string> notes;
};

// "gpt2-small", "gpt2-medium", "smollm2-135m", ...
std::vector<std::string> synth_model_names();

// Writes the directory atomically (a sibling temp renamed into place; nothing is
// left on failure or Cancelled). InputError for an unknown name (the message lists
// the known ones), a bad dtype or layer count, an existing `out` without
// overwrite, or a missing GPT-2 tokenizer.
SynthReport synth_model(const SynthOptions& options, const ProgressFn& progress = {});

} // namespace embedlab
