// What the main window shows of a model, as plain data (no libtorch, no Qt).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace embedlab::app {

struct ModelSummary {
    std::string path, format, architecture, dtype, tokenizer;
    int64_t vocab_size = 0, hidden_size = 0, layers = 0, heads = 0, kv_heads = 0;
    bool tied = false;
    bool encoder = false;   // bert, distilbert: no perplexity, no FLAT-LLM importance
    bool masked_lm = false; // an encoder with a masked-LM head: pseudo-perplexity (masked_lm.hpp)
    std::vector<std::pair<std::string, int64_t>> parameters; // part -> count
    int64_t total_parameters = 0;
    std::vector<std::string> facts;          // architecture_facts: what sets the model apart
    std::vector<std::string> not_applicable; // "positions (qwen2 has no learned position table)"
    std::vector<std::string> warnings;
    std::string error; // non-empty: loading failed, with the engine's message
};

// Loads the model with the engine; never throws (errors land in `error`).
ModelSummary summarize_model(const std::string& path);
std::string default_model();
// "EmbedLab 0.1.0, libtorch 2.x, ..." for Help > About.
std::string library_versions();
// A page of docs/ beside the bundled resources, e.g. "index.md" ("" when not found: an
// install without the documentation).
std::string docs_page_path(const std::string& page);

} // namespace embedlab::app
