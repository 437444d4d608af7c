// What run_compression's steps (experiment.cpp) share with a method's part of the run
// (compression_unit.hpp): the staged progress bar, the inputs every method reads (the
// evaluation, the task, LoRA's training text) and a rough cost of a forward pass.
// Private to engine/src/job.
//
//   const StagedProgress bar(progress, {{"load", 0}, {"compress", 1}});
//   report_progress(bar.stage("compress"), 0, 1);   // "compress pca" paces by "compress"
//
// Thread safety: a StagedProgress is used by one run's thread; the rest is data.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/finetune.hpp"
#include "embedlab/masked_lm.hpp"
#include "embedlab/tasks.hpp"

namespace embedlab::run_steps {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A run's stages by name, each with its estimated work (the bar's pace, never a number reported).
using Stages = std::vector<std::pair<std::string, double>>;

// One progress bar over the run's stages, each weighted by its usual share of the time.
class StagedProgress {
public:
    StagedProgress(ExperimentProgressFn fn, Stages stages) : fn_(std::move(fn)), stages_(std::move(stages))
    {
        for (const auto& s : stages_)
            total_ += s.second;
    }

    ProgressFn stage(const std::string& name) const
    {
        if (!fn_)
            return {};
        // The stage of that name, else the one it extends ("compress pca" is "compress"):
        // "compress positions" has a row of its own after "compress".
        size_t at = stages_.size();
        for (size_t i = 0; i < stages_.size() && at == stages_.size(); ++i)
            if (stages_[i].first == name)
                at = i;
        for (size_t i = 0; i < stages_.size() && at == stages_.size(); ++i)
            if (name.rfind(stages_[i].first + " ", 0) == 0)
                at = i;
        double before = 0, weight = 0;
        for (size_t i = 0; i < stages_.size(); ++i)
            if (i < at)
                before += stages_[i].second;
            else if (i == at)
                weight = stages_[i].second;
        return [=, this](int64_t done, int64_t total) {
            const double part = total > 0 ? std::clamp(double(done) / double(total), 0.0, 1.0) : 0.0;
            return fn_(
                {name, done, total, total_ > 0 ? std::min(1.0, (before + weight * part) / total_) : 0});
        };
    }

private:
    ExperimentProgressFn fn_;
    Stages stages_;
    double total_ = 0;
};

// The evaluation the request asks for: its ids, the protocol, and where they came from.
// An encoder with a masked-LM head is scored by pseudo-perplexity (masked_lm.hpp) with
// `masked`, as `embedlab-cli eval` scores it: it has no next-token perplexity.
struct EvalInput {
    std::vector<int32_t> ids;
    PerplexityOptions options;
    int64_t text_ids = 0; // ids in the whole text (before eval_tokens)
    bool masked_lm = false;
    MaskedLmOptions masked; // with masked_lm: ctx as options.ctx, the request's batch if given
};

// LoRA recovery (METHODS 1): the ids to train on, never one the run is evaluated on.
struct Training {
    std::vector<int32_t> ids;
    int64_t first_id = 0; // ids[0] is the text's id number first_id
    TrainOptions options;
};

// What every run reads before its long steps, so a bad text fails in a second (a
// method's own texts are its MethodFit's).
struct RunInputs {
    std::optional<EvalInput> eval;
    std::optional<TaskData> task;
    std::optional<Training> training; // LoRA recovery
};

// A forward pass's floating-point work per position through the decoder's layers
// (no head): the stages' estimates build on it.
inline double decoder_work_per_position(const ModelConfig& c)
{
    const double d = double(c.hidden_size), layers = double(c.num_layers);
    return 2 * layers * (4 * d * d + 3 * d * double(c.intermediate_size));
}

} // namespace embedlab::run_steps
