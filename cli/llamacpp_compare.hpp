// bench eval --compare-llamacpp: the same ids and windows through llama.cpp's
// llamacpp-ppl (../shared/tools/llama.cpp, the project's perplexity protocol)
// on a float32 GGUF export of the same model, so tokens/s are side by side on
// the same weights, threads and machine, and the two perplexities agree.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "embedlab/model.hpp"
#include "embedlab/model_export.hpp"

namespace embedlab::cli {

struct LlamaCppRun {
    std::string skipped; // why nothing ran (no tool, a model llama.cpp cannot run); empty when it ran
    double ppl = 0, nll_per_token = 0, seconds = 0, tokens_per_second = 0;
    int64_t tokens = 0;
};

// --llamacpp PATH (the tool or its folder), $EMBEDLAB_LLAMACPP, the checkout's
// ../shared/tools/llama.cpp, then PATH; nullopt when none has llamacpp-ppl.
std::optional<std::filesystem::path> find_llamacpp_ppl(const std::optional<std::string>& flag);

// A bench mode's --compare-llamacpp / --llamacpp PATH: the tool, or nullopt (with a note
// on stderr naming where it looked) when asked for and absent, or not asked for.
std::optional<std::filesystem::path> requested_llamacpp(const std::optional<std::string>& flag, bool compare,
                                                        const std::string& command);

// Exports `model` to an f32 GGUF in a temporary directory, writes `ids`, runs
// the tool with ctx and `threads`; the export is removed afterwards.
LlamaCppRun run_llamacpp_ppl(const std::filesystem::path& tool, const LoadedModel& model,
                             std::span<const int32_t> ids, int64_t ctx, int threads);

// bench generate --compare-llamacpp: llama.cpp's own llama-bench (beside `tool`) on
// the GGUF export at `type` (f32; f16 beside half weights): prompt processing of `prompt_tokens` (pp) and
// generation of `generated_tokens` from an empty cache (tg), tokens/s mean and deviation.
struct LlamaBenchRun {
    std::string skipped;
    struct Speed {
        double tokens_per_second = 0, stddev = 0;
    } pp, tg;
};
LlamaBenchRun run_llama_bench(const std::filesystem::path& tool, const LoadedModel& model,
                              int64_t prompt_tokens, int64_t generated_tokens, int repetitions, int threads,
                              GgufExportType type = GgufExportType::F32);

} // namespace embedlab::cli
