// Per-token divergence over a text (text_divergence.hpp).
#include "embedlab/text_divergence.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "embedlab/eval.hpp"
#include "eval/divergence_statistics.hpp"

namespace embedlab {

namespace {

// Row j of a window's top-N (ids [rows, n] and log-probabilities, all rows found at once).
std::vector<TokenProbability> top_row(const torch::Tensor& ids, const torch::Tensor& logp, int64_t j)
{
    const auto id = ids.accessor<int64_t, 2>();
    const auto lp = logp.accessor<double, 2>();
    std::vector<TokenProbability> top;
    for (int64_t i = 0; i < ids.size(1); ++i)
        top.push_back({static_cast<int32_t>(id[j][i]), std::exp(lp[j][i])});
    return top;
}

// The text id i adds: decoded after its predecessor, which keeps a SentencePiece
// token's leading space that decoding it alone would drop.
std::string added_text(const Tokenizer& tokenizer, std::span<const int32_t> ids, size_t i)
{
    if (i == 0)
        return tokenizer.decode(ids.subspan(0, 1));
    const auto before = tokenizer.decode(ids.subspan(i - 1, 1));
    const auto both = tokenizer.decode(ids.subspan(i - 1, 2));
    return both.rfind(before, 0) == 0 ? both.substr(before.size()) : tokenizer.decode(ids.subspan(i, 1));
}

} // namespace

TextDivergence text_divergence(const LanguageModel& model, const LanguageModel& reference,
                               const Tokenizer* tokenizer, std::span<const int32_t> ids,
                               const TextDivergenceOptions& options, const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const int64_t V = model.config().vocab_size;
    if (reference.config().vocab_size != V)
        throw InputError("the original has a vocabulary of " + std::to_string(reference.config().vocab_size) +
                         " tokens and the compressed model " + std::to_string(V) +
                         "; a comparison needs one vocabulary");
    const int64_t ctx = std::min({options.ctx, model.max_context(), reference.max_context()});
    const int64_t n = static_cast<int64_t>(ids.size());
    for (int32_t id : ids)
        if (id < 0 || id >= V)
            throw InputError("token id " + std::to_string(id) + " is outside the vocabulary of " +
                             std::to_string(V));
    TextDivergence d;
    d.ids.assign(ids.begin(), ids.end());
    d.kl.assign(static_cast<size_t>(n), std::numeric_limits<double>::quiet_NaN());
    d.top.resize(static_cast<size_t>(n));
    d.reference_top.resize(static_cast<size_t>(n));
    if (tokenizer)
        for (size_t i = 0; i < ids.size(); ++i)
            d.text.push_back(added_text(*tokenizer, ids, i));
    const int64_t n_top = std::min(options.top_n, V);
    detail::for_each_scored_window(
        model, reference, ids, ctx, ctx, progress,
        [&](const EvalWindow& win, const torch::Tensor& logp, const torch::Tensor& logq,
            const torch::Tensor& kl, const torch::Tensor& targets) {
            const auto kl_at = kl.accessor<double, 1>();
            const auto [p_top, p_ids] = logp.topk(n_top, -1);
            const auto [q_top, q_ids] = logq.topk(n_top, -1);
            for (int64_t j = 0; j < targets.size(0); ++j) {
                const auto at =
                    static_cast<size_t>(win.start + 1 + win.first_scored + j); // the id it predicts
                d.kl[at] = kl_at[j];
                d.top[at] = top_row(p_ids, p_top, j);
                d.reference_top[at] = top_row(q_ids, q_top, j);
            }
        });
    std::vector<int64_t> order(static_cast<size_t>(n - 1));
    std::iota(order.begin(), order.end(), 1);
    const auto keep =
        std::min<size_t>(order.size(), static_cast<size_t>(std::max<int64_t>(options.worst, 0)));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](int64_t a, int64_t b) {
                          const double ka = d.kl[static_cast<size_t>(a)], kb = d.kl[static_cast<size_t>(b)];
                          return ka != kb ? ka > kb : a < b;
                      });
    order.resize(keep);
    d.worst = std::move(order);
    return d;
}

} // namespace embedlab
