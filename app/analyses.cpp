#include "analyses.hpp"

#include "embedlab/accounting.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/flat_llm.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/model.hpp"
#include "embedlab/resources.hpp"

namespace embedlab::app {

SpectrumResult embedding_spectrum(const std::string& model, const ProgressFn& progress)
{
    auto lm = load_model(model, {.need_tokenizer = false});
    const auto* dense = dense_table(&lm.model->token_embedding());
    if (!dense)
        throw InputError(model + ": the token embedding is already compressed (" +
                         lm.model->token_embedding().kind() + "); open the original model for its spectrum");
    // The spectrum does not depend on the rank; rank 1 keeps the projection cheap.
    const auto fit = fit_low_rank(*dense, LowRankKind::PCA, 1, progress);
    SpectrumResult r;
    r.eigenvalues = fit.eigenvalues;
    r.explained = fit.explained_variance;
    const int64_t V = dense->size(0), d = dense->size(1);
    r.original_params = static_cast<double>(V * d);
    for (int64_t k = 1; k <= d; ++k) {
        auto a = account_low_rank(LowRankKind::PCA, V, d, k);
        apply_model_context(a, lm.model->config().tied_embeddings, 0); // untied: the lookup's FLOPs
        r.params_at_rank.push_back(static_cast<double>(a.params_after));
        r.flops_at_rank.push_back(static_cast<double>(a.flops_per_token));
    }
    return r;
}

AllocationResult importance_allocations(const std::string& model, const std::string& text, int64_t samples,
                                        int64_t seqlen, const ProgressFn& progress)
{
    auto lm = load_model(model);
    const auto ids = lm.tokenizer->encode(read_text_file(text));
    CalibrationOptions options{.samples = samples, .seqlen = seqlen};
    try {
        calibration_window_starts(static_cast<int64_t>(ids.size()), samples, seqlen, 0);
    } catch (const InputError& e) {
        throw InputError(text + ": " + e.what());
    }
    const auto cal = calibrate(*lm.model, ids, options, progress);
    AllocationResult r;
    r.d_head = lm.model->config().head_dim();
    r.scores = cal.scores();
    r.calibration_seconds = cal.seconds;
    r.kv_heads = lm.model->config().num_kv_heads;
    for (const auto& layer : cal.layers)
        for (const auto& covariance : layer.value_covariance) {
            // Tiny negative eigenvalues are rounding of a positive semi-definite sum.
            const auto lam = eigen_basis(covariance).eigenvalues.clamp_min(0.0).contiguous();
            r.head_spectra.emplace_back(lam.data_ptr<double>(), lam.data_ptr<double>() + lam.numel());
        }
    for (int i = 2; i <= 20; ++i) {
        const double remaining = i / 20.0;
        const auto w = iprs_allocation(r.scores, remaining);
        r.allocations.push_back({remaining, w, ranks_from_ratios(w, r.d_head)});
    }
    return r;
}

std::string default_sample_text()
{
    return default_sample_text_path().string();
}

} // namespace embedlab::app
