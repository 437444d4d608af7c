// The statistics of llama.cpp's kl_divergence() (tools/perplexity/perplexity.cpp,
// commit de3ff815): its mean_and_uncertainty, covariance, percentile and median,
// term by term.
#include "eval/divergence_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

namespace embedlab::detail {

namespace {

struct MeanUncertainty {
    double mean = 0, uncertainty = 0;
};

// llama.cpp's mean_and_uncertainty: the standard error of the mean, 0 for count <= 10.
MeanUncertainty mean_and_uncertainty(double sum, double sum2, size_t count)
{
    if (count < 1)
        return {};
    const double n = static_cast<double>(count);
    const double f = sum / n;
    const double df = sum2 / n - f * f;
    return {f, df > 0 && count > 10 ? std::sqrt(df / (n - 1)) : 0.0};
}

// llama.cpp's covariance of two means, 0 for count < 10.
double covariance(double suma, double sumb, double sumab, size_t count)
{
    if (count < 10)
        return 0;
    const double n = static_cast<double>(count);
    return (sumab / n - (suma / n) * (sumb / n)) / (n - 1);
}

// llama.cpp's percentile of sorted values: linear between the neighbours of
// position fraction * (n - 1), that position computed in float as it does.
double percentile(const std::vector<double>& sorted, float fraction)
{
    if (fraction <= 0)
        return sorted.front();
    if (fraction >= 1)
        return sorted.back();
    float p = fraction * static_cast<float>(sorted.size() - 1);
    const size_t ip = static_cast<size_t>(p);
    p -= static_cast<float>(ip);
    return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

double median(const std::vector<double>& sorted)
{
    const size_t n = sorted.size();
    return n % 2 == 0 ? 0.5 * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

// Sorts `values` and writes its maximum, median, minimum and the percentiles asked for.
void summarise(std::vector<double> values, double& max, double& med, double& min,
               std::initializer_list<std::pair<float, double*>> percentiles)
{
    std::sort(values.begin(), values.end());
    max = values.back();
    med = median(values);
    min = values.front();
    for (const auto& [fraction, out] : percentiles)
        *out = percentile(values, fraction);
}

} // namespace

void fill_divergence_statistics(DivergenceResult& r)
{
    const ScoredPositions& s = r.positions;
    const size_t n = s.size();
    if (n == 0)
        throw InputError("divergence: no scored positions");
    double nll = 0, nll2 = 0, base = 0, base2 = 0, nll_base = 0, kld = 0, kld2 = 0, dp = 0, dp2 = 0, dp4 = 0;
    size_t same = 0;
    std::vector<double> delta_p(n);
    for (size_t i = 0; i < n; ++i) {
        nll += s.nll[i];
        nll2 += s.nll[i] * s.nll[i];
        base += s.reference_nll[i];
        base2 += s.reference_nll[i] * s.reference_nll[i];
        nll_base += s.nll[i] * s.reference_nll[i];
        kld += s.kl[i];
        kld2 += s.kl[i] * s.kl[i];
        delta_p[i] = std::exp(-s.nll[i]) - std::exp(-s.reference_nll[i]);
        dp += delta_p[i];
        dp2 += delta_p[i] * delta_p[i];
        dp4 += delta_p[i] * delta_p[i] * delta_p[i] * delta_p[i];
        same += s.same_top[i];
    }
    r.tokens = static_cast<int64_t>(n);

    const auto log_ppl = mean_and_uncertainty(nll, nll2, n);
    const auto log_ppl_base = mean_and_uncertainty(base, base2, n);
    const double log_ppl_cov = covariance(nll, base, nll_base, n);
    r.ppl = std::exp(log_ppl.mean);
    r.ppl_uncertainty = r.ppl * log_ppl.uncertainty;
    r.reference_ppl = std::exp(log_ppl_base.mean);
    r.reference_ppl_uncertainty = r.reference_ppl * log_ppl_base.uncertainty;
    const double sd_product = log_ppl.uncertainty * log_ppl_base.uncertainty;
    r.ln_ppl_correlation =
        sd_product > 0 ? log_ppl_cov / sd_product : std::numeric_limits<double>::quiet_NaN();
    r.delta_ln_ppl = log_ppl.mean - log_ppl_base.mean;
    r.delta_ln_ppl_uncertainty =
        std::sqrt(std::max(0.0, log_ppl.uncertainty * log_ppl.uncertainty +
                                    log_ppl_base.uncertainty * log_ppl_base.uncertainty - 2.0 * log_ppl_cov));
    r.ppl_ratio = std::exp(r.delta_ln_ppl);
    r.ppl_ratio_uncertainty = r.ppl_ratio * r.delta_ln_ppl_uncertainty;
    const double ppl_cov = r.ppl * r.reference_ppl * log_ppl_cov;
    r.ppl_difference = r.ppl - r.reference_ppl;
    r.ppl_difference_uncertainty = std::sqrt(
        std::max(0.0, r.ppl_uncertainty * r.ppl_uncertainty +
                          r.reference_ppl_uncertainty * r.reference_ppl_uncertainty - 2.0 * ppl_cov));

    const auto kl_mean = mean_and_uncertainty(kld, kld2, n);
    r.kl_mean = kl_mean.mean;
    r.kl_mean_uncertainty = kl_mean.uncertainty;
    summarise(s.kl, r.kl_max, r.kl_median, r.kl_min,
              {{0.999f, &r.kl_p999},
               {0.990f, &r.kl_p99},
               {0.950f, &r.kl_p95},
               {0.900f, &r.kl_p90},
               {0.100f, &r.kl_p10},
               {0.050f, &r.kl_p5},
               {0.010f, &r.kl_p1},
               {0.001f, &r.kl_p01}});

    const auto p_diff = mean_and_uncertainty(dp, dp2, n);
    r.delta_p_mean = p_diff.mean;
    r.delta_p_mean_uncertainty = p_diff.uncertainty;
    summarise(std::move(delta_p), r.delta_p_max, r.delta_p_median, r.delta_p_min,
              {{0.999f, &r.delta_p_p999},
               {0.990f, &r.delta_p_p99},
               {0.950f, &r.delta_p_p95},
               {0.900f, &r.delta_p_p90},
               {0.750f, &r.delta_p_p75},
               {0.250f, &r.delta_p_p25},
               {0.100f, &r.delta_p_p10},
               {0.050f, &r.delta_p_p5},
               {0.010f, &r.delta_p_p1},
               {0.001f, &r.delta_p_p01}});
    const auto p_diff_mse = mean_and_uncertainty(dp2, dp4, n);
    r.delta_p_rms = std::sqrt(p_diff_mse.mean);
    r.delta_p_rms_uncertainty = r.delta_p_rms > 0 ? 0.5 / r.delta_p_rms * p_diff_mse.uncertainty : 0.0;

    r.top1_agreement = static_cast<double>(same) / static_cast<double>(n);
    r.top1_agreement_uncertainty =
        n > 1 ? std::sqrt(r.top1_agreement * (1 - r.top1_agreement) / static_cast<double>(n - 1)) : 0.0;
}

} // namespace embedlab::detail
