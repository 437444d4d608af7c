// Per-token divergence over a text (text_divergence.hpp).
#include "embedlab/text_divergence.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "embedlab/eval.hpp"

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
    const auto windows = perplexity_windows(static_cast<int64_t>(ids.size()), ctx, ctx);
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
    auto all_ids = torch::from_blob(const_cast<int32_t*>(ids.data()), {n}, torch::kInt32).to(torch::kLong);
    report_progress(progress, 0, static_cast<int64_t>(windows.size()));
    for (size_t w = 0; w < windows.size(); ++w) {
        const auto& win = windows[w];
        const int64_t T = win.length - 1, first = win.first_scored, scored = T - first;
        const auto input = all_ids.narrow(0, win.start, T).unsqueeze(0);
        // Float64: KL sums V terms per token.
        auto logp =
            torch::log_softmax(model.logits(input)[0].narrow(0, first, scored).to(torch::kDouble), -1);
        auto logq =
            torch::log_softmax(reference.logits(input)[0].narrow(0, first, scored).to(torch::kDouble), -1);
        const auto kl = (logq.exp() * (logq - logp)).sum(-1).clamp_min(0.0).contiguous();
        const auto kl_at = kl.accessor<double, 1>();
        const int64_t n_top = std::min(options.top_n, V);
        const auto [p_top, p_ids] = logp.topk(n_top, -1);
        const auto [q_top, q_ids] = logq.topk(n_top, -1);
        for (int64_t j = 0; j < scored; ++j) {
            const auto at = static_cast<size_t>(win.start + 1 + first + j); // the id this row predicts
            d.kl[at] = kl_at[j];
            d.top[at] = top_row(p_ids, p_top, j);
            d.reference_top[at] = top_row(q_ids, q_top, j);
        }
        report_progress(progress, static_cast<int64_t>(w + 1), static_cast<int64_t>(windows.size()));
    }
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
