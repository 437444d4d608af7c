// A model against llama-perplexity's --kl-divergence-base file, with llama.cpp's
// protocol and its per-position arithmetic (perplexity.cpp kl_divergence() and the
// log_softmax it calls): float log-softmax of the model's logits, the base's
// quantised log-probabilities, KL summed over the base's terms above -16.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "embedlab/eval.hpp"
#include "embedlab/non_finite.hpp"
#include "eval/divergence_statistics.hpp"
#include "io/llamacpp_logits.hpp"

namespace embedlab {

namespace {

struct Position {
    double kl = 0, nll = 0, reference_nll = 0;
    bool same_top = false;
};

// One scored position: `logits` the model's row, `base` the file's row, `target` the next token.
Position score(const float* logits, int64_t V, const io::LlamaCppLogitRow& base, int32_t target)
{
    float max_logit = logits[0];
    int64_t imax = 0;
    for (int64_t i = 1; i < V; ++i)
        if (logits[i] > max_logit) {
            max_logit = logits[i];
            imax = i;
        }
    double sum_exp = 0;
    for (int64_t i = 0; i < V; ++i)
        sum_exp += std::exp(logits[i] - max_logit);
    const auto log_sum_exp = static_cast<float>(std::log(sum_exp));
    Position p;
    p.nll = max_logit + log_sum_exp - logits[target];
    p.reference_nll = -base.log_prob(target);
    const float log_norm = max_logit + log_sum_exp;
    int64_t imax_base = -1;
    float base_max = 0;
    double kl = 0;
    for (int64_t i = 0; i < V; ++i) {
        const float log_p_base = base.log_prob(i);
        if (i == 0 || log_p_base > base_max) {
            base_max = log_p_base;
            imax_base = i;
        }
        if (log_p_base > -16.f)
            kl += std::exp(log_p_base) * (log_p_base - logits[i] + log_norm);
    }
    p.kl = kl;
    p.same_top = imax == imax_base;
    return p;
}

} // namespace

DivergenceResult evaluate_divergence_llamacpp(const LanguageModel& model, const std::filesystem::path& file,
                                              const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    const auto base = io::parse_llamacpp_logits(io::MappedFile::open(file));
    const std::string label = file.string();
    const int64_t V = model.config().vocab_size;
    if (base.n_vocab != V)
        throw InputError(label + ": log-probabilities over " + std::to_string(base.n_vocab) +
                         " tokens, but the model has a vocabulary of " + std::to_string(V) +
                         "; the base must share the model's tokenizer");
    if (base.n_ctx > model.max_context())
        throw InputError(label + ": n_ctx " + std::to_string(base.n_ctx) + " exceeds the " +
                         std::to_string(model.max_context()) + "-token context the model was trained for");
    // llama.cpp tokenized with add_bos exactly when the text starts with BOS; it then
    // puts BOS at the start of every chunk.
    const int64_t bos = model.config().bos_token_id;
    DivergenceResult r;
    r.protocol = "llama.cpp";
    r.bos = bos >= 0 && base.tokens[0] == bos;
    r.ctx = r.stride = base.n_ctx;
    const int64_t n_ctx = base.n_ctx, first = base.first_scored(), n = base.scored_per_chunk();
    const int64_t per_batch = std::max<int64_t>(1, 1024 / n_ctx);
    auto& s = r.positions;
    report_progress(progress, 0, base.n_chunk);
    for (int64_t c0 = 0; c0 < base.n_chunk; c0 += per_batch) {
        const int64_t B = std::min(per_batch, base.n_chunk - c0);
        auto input =
            torch::from_blob(const_cast<int32_t*>(base.tokens.data() + c0 * n_ctx), {B, n_ctx}, torch::kInt32)
                .to(torch::kLong);
        if (r.bos)
            input.select(1, 0).fill_(bos);
        const auto logits = model.logits(input).narrow(1, first, n).to(torch::kFloat).contiguous();
        require_finite_rows(logits, c0 + 1, "the model", "non-finite logits in chunk",
                            "no divergence is reported");
        const float* l = logits.data_ptr<float>();
        for (int64_t b = 0; b < B; ++b) {
            const int64_t chunk = c0 + b;
            double window_kl = 0;
            int64_t window_same = 0;
            for (int64_t k = 0; k < n; ++k) {
                const int32_t target = base.tokens[chunk * n_ctx + first + k + 1];
                const auto p = score(l + (b * n + k) * V, V, base.row(chunk, k), target);
                s.input.push_back(base.tokens[chunk * n_ctx + first + k]); // first >= 1: never the BOS
                s.target.push_back(target);
                s.kl.push_back(p.kl);
                s.nll.push_back(p.nll);
                s.reference_nll.push_back(p.reference_nll);
                s.same_top.push_back(p.same_top);
                window_kl += p.kl;
                window_same += p.same_top;
            }
            r.window_kl_mean.push_back(window_kl / static_cast<double>(n));
            r.window_top1.push_back(static_cast<double>(window_same) / static_cast<double>(n));
        }
        report_progress(progress, c0 + B, base.n_chunk);
    }
    r.windows = base.n_chunk;
    detail::fill_divergence_statistics(r);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

} // namespace embedlab
