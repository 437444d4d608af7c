// Vocabulary damage of a results row (damage_analyses.hpp).
#include <algorithm>
#include <memory>

#include "analyses_internal.hpp"
#include "damage_analyses.hpp"
#include "embedlab/divergence_report.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/model.hpp"
#include "embedlab/token_damage.hpp"

namespace embedlab::app {

DamageResult token_damage_of(const CompressionRequest& request, const ProgressFn& progress)
{
    if (!request.evaluates())
        throw InputError("the run has no evaluation text: damage is measured where tokens are predicted");
    auto run = detail::kept_compression(request);
    if (!run)
        run =
            std::make_shared<const CompressionRun>(run_compression(request, [&](const ExperimentProgress& e) {
                return !progress || progress(static_cast<int64_t>(600 * e.overall), 1000);
            }));
    const auto original = load_model(request.model, request_load_options(request));
    std::vector<int32_t> ids = request.eval_ids;
    if (!request.eval_text.empty())
        ids = original.tokenizer->encode(read_text_file(request.eval_text));
    if (request.eval_tokens > 0 && static_cast<int64_t>(ids.size()) > request.eval_tokens)
        ids.resize(static_cast<size_t>(request.eval_tokens));
    // The row's protocol (experiment.cpp's): ctx 0 is min(128, the model's context).
    const int64_t ctx = request.ctx > 0 ? request.ctx : std::min<int64_t>(128, original.model->max_context());
    // The statistics and the damage in one pass: 16 bytes per scored position, not a record
    // of each (issue 57), with eval --reference's numbers bit for bit.
    const DivergenceReport report =
        evaluate_divergence_report(run->compressed_model(), *original.model, ids,
                                   {.ctx = ctx, .stride = request.stride > 0 ? request.stride : ctx},
                                   detail::stage(progress, 600, 350, 1000));
    const DivergenceResult& d = report.divergence;
    const TokenDamage& damage = report.damage;
    DamageResult r;
    r.cosine = damage.cosine;
    r.kl_as_target = damage.kl_as_target;
    r.target_count = damage.target_count;
    for (const auto& b : damage.buckets)
        r.buckets.push_back({b.label(), b.tokens, b.positions, b.mean_cosine, b.kl_as_target, b.kl_as_input});
    r.positions = d.tokens; // the scored positions
    r.kl_mean = d.kl_mean;
    report_progress(progress, 1000, 1000);
    return r;
}

} // namespace embedlab::app
