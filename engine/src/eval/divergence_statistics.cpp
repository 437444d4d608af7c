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

// Sorts `values` (in place) and writes its maximum, median, minimum and the percentiles asked for.
void summarise(std::vector<double>& values, double& max, double& med, double& min,
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

double DivergenceSums::add(double nll, double reference_nll, double kl, bool same_top)
{
    nll_ += nll;
    nll2_ += nll * nll;
    base_ += reference_nll;
    base2_ += reference_nll * reference_nll;
    nll_base_ += nll * reference_nll;
    kld_ += kl;
    kld2_ += kl * kl;
    const double delta_p = std::exp(-nll) - std::exp(-reference_nll);
    dp_ += delta_p;
    dp2_ += delta_p * delta_p;
    dp4_ += delta_p * delta_p * delta_p * delta_p;
    same_ += same_top ? 1 : 0;
    ++count_;
    return delta_p;
}

void fill_divergence_statistics(DivergenceResult& r)
{
    const ScoredPositions& s = r.positions;
    DivergenceSums sums;
    std::vector<double> delta_p;
    delta_p.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i)
        delta_p.push_back(sums.add(s.nll[i], s.reference_nll[i], s.kl[i], s.same_top[i] != 0));
    std::vector<double> kl = s.kl;
    fill_divergence_statistics(r, sums, kl, delta_p);
}

void fill_divergence_statistics(DivergenceResult& r, const DivergenceSums& sums, std::vector<double>& kl,
                                std::vector<double>& delta_p)
{
    const size_t n = sums.count_;
    if (n == 0)
        throw InputError("divergence: no scored positions");
    const double nll = sums.nll_, nll2 = sums.nll2_, base = sums.base_, base2 = sums.base2_,
                 nll_base = sums.nll_base_, kld = sums.kld_, kld2 = sums.kld2_, dp = sums.dp_,
                 dp2 = sums.dp2_, dp4 = sums.dp4_;
    const size_t same = sums.same_;
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
    summarise(kl, r.kl_max, r.kl_median, r.kl_min,
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
    summarise(delta_p, r.delta_p_max, r.delta_p_median, r.delta_p_min,
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
