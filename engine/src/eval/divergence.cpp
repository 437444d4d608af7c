// KL divergence and top-1 agreement of a model against a reference model, over
// the perplexity protocol's windows (METHODS.md 0).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "embedlab/eval.hpp"
#include "embedlab/json_members.hpp"

namespace embedlab {

namespace {

// The q-quantile of `v` by nearest rank: the ceil(q n)-th smallest value.
double quantile(std::vector<double> v, double q)
{
    if (v.empty())
        return 0;
    const double rank = std::ceil(q * static_cast<double>(v.size())); // 1-based
    const size_t k = rank < 1 ? 0 : std::min(v.size(), static_cast<size_t>(rank)) - 1;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

} // namespace

DivergenceResult evaluate_divergence(const LanguageModel& model, const LanguageModel& reference,
                                     std::span<const int32_t> ids, const PerplexityOptions& options,
                                     const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t V = model.config().vocab_size;
    if (reference.config().vocab_size != V)
        throw InputError("the reference model has a vocabulary of " +
                         std::to_string(reference.config().vocab_size) + " tokens and the model " +
                         std::to_string(V) + "; divergence needs the same tokenizer and vocabulary");
    const int64_t ctx = options.ctx, stride = options.stride > 0 ? options.stride : ctx;
    for (const LanguageModel* m : {&model, &reference})
        if (ctx > m->max_context())
            throw InputError("--ctx " + std::to_string(ctx) + " exceeds the " +
                             std::to_string(m->max_context()) + "-token context it was trained for");
    const auto windows = perplexity_windows(static_cast<int64_t>(ids.size()), ctx, stride);
    auto all_ids =
        torch::from_blob(const_cast<int32_t*>(ids.data()), {static_cast<int64_t>(ids.size())}, torch::kInt32)
            .to(torch::kLong);

    DivergenceResult r;
    std::vector<double> kl_all;
    double nll = 0, reference_nll = 0;
    int64_t agree = 0;
    report_progress(progress, 0, static_cast<int64_t>(windows.size()));
    for (size_t i = 0; i < windows.size(); ++i) {
        const auto& w = windows[i];
        const int64_t T = w.length - 1, first = w.first_scored, n = T - first;
        const auto window = all_ids.narrow(0, w.start, w.length);
        const auto input = window.narrow(0, 0, T).unsqueeze(0);
        const auto targets = window.narrow(0, 1 + first, n).unsqueeze(1);
        // Scored positions only, in float64: KL sums V terms per token.
        auto logp = torch::log_softmax(model.logits(input)[0].narrow(0, first, n).to(torch::kDouble), -1);
        auto logq = torch::log_softmax(reference.logits(input)[0].narrow(0, first, n).to(torch::kDouble), -1);
        const auto kl = (logq.exp() * (logq - logp)).sum(-1).clamp_min(0.0); // [n]
        const auto same = logp.argmax(-1).eq(logq.argmax(-1));
        nll -= logp.gather(1, targets).sum().item<double>();
        reference_nll -= logq.gather(1, targets).sum().item<double>();
        const auto* k = kl.data_ptr<double>();
        kl_all.insert(kl_all.end(), k, k + n);
        const int64_t window_agree = same.sum().item<int64_t>();
        agree += window_agree;
        r.window_kl_mean.push_back(kl.mean().item<double>());
        r.window_top1.push_back(static_cast<double>(window_agree) / static_cast<double>(n));
        report_progress(progress, static_cast<int64_t>(i + 1), static_cast<int64_t>(windows.size()));
    }
    r.tokens = static_cast<int64_t>(kl_all.size());
    r.windows = static_cast<int64_t>(windows.size());
    double sum = 0;
    for (double v : kl_all)
        sum += v;
    r.kl_mean = sum / static_cast<double>(r.tokens);
    r.kl_max = *std::max_element(kl_all.begin(), kl_all.end());
    r.kl_median = quantile(kl_all, 0.5);
    r.kl_p99 = quantile(std::move(kl_all), 0.99);
    r.top1_agreement = static_cast<double>(agree) / static_cast<double>(r.tokens);
    r.ppl = std::exp(nll / static_cast<double>(r.tokens));
    r.reference_ppl = std::exp(reference_nll / static_cast<double>(r.tokens));
    r.delta_ln_ppl = (nll - reference_nll) / static_cast<double>(r.tokens);
    r.ctx = ctx;
    r.stride = stride;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

nlohmann::ordered_json divergence_json(const DivergenceResult& d)
{
    nlohmann::ordered_json j;
    EMBEDLAB_JSON_MEMBERS(j, d, kl_mean, kl_median, kl_p99, kl_max, top1_agreement, window_kl_mean,
                          window_top1);
    return j;
}

} // namespace embedlab
