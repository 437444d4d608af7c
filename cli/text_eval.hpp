// Perplexity runs shared by compress and sweep: one tokenized text, the same
// protocol options, the baseline and compressed results side by side.
#pragma once

#include <filesystem>
#include <vector>

#include "common.hpp"
#include "embedlab/eval.hpp"

namespace embedlab::cli {

struct TextEval {
    std::filesystem::path text;
    std::string sha256;
    std::vector<int32_t> ids;
    PerplexityOptions options;
    bool quiet = false;
    const Tokenizer* tokenizer = nullptr; // the text's: run() adds bits per byte with it

    // Reads --eval-text FILE, --ctx, --stride, --batch; empty `text` when absent.
    static TextEval from_args(const Args& args, const Tokenizer* tokenizer, int64_t max_context);
    bool enabled() const { return !text.empty(); }
    PerplexityResult run(const LanguageModel& model, const std::string& what) const;
    // {text, text_sha256, tokens, ctx, stride, baseline, compressed, delta_ln_ppl}
    Json json(const PerplexityResult& baseline, const PerplexityResult& compressed) const;
    // "  perplexity A -> B (delta ln PPL ..) on N tokens, ctx C" from json()'s output.
    static void print(const Json& evaluation);
};

// --eval-text FILE, --ctx, --stride, --batch into an experiment request, checked
// against the model's context (messages name the flags); nothing without --eval-text.
void eval_flags_into(const Args& args, int64_t max_context, CompressionRequest& request);

} // namespace embedlab::cli
