// The sampling chains (sampler.hpp): the stages as llama.cpp's src/llama-sampler.cpp
// applies them, in double precision, with ties broken by token id.
#include "embedlab/sampler.hpp"

#include <algorithm>
#include <cmath>

#include "embedlab/error.hpp"
#include "model/half_products.hpp"

namespace embedlab {

namespace {

struct Candidate {
    int32_t id;
    double logit;
};

// Higher logit first, then lower id: a total order, so every sort gives one result.
bool before(const Candidate& a, const Candidate& b)
{
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The tokens still in the running; `sorted` once a stage needed the order.
struct Candidates {
    std::vector<Candidate> c;
    bool sorted = false;
};

Candidates all_tokens(std::span<const float> logits)
{
    Candidates c;
    c.c.reserve(logits.size());
    for (size_t i = 0; i < logits.size(); ++i)
        c.c.push_back({static_cast<int32_t>(i), logits[i]});
    return c;
}

// exp(logit - max) per candidate, in their order: the softmax's numerators.
std::vector<double> weights(const Candidates& c)
{
    double max = -INFINITY;
    for (const auto& x : c.c)
        max = std::max(max, x.logit);
    std::vector<double> w;
    w.reserve(c.c.size());
    for (const auto& x : c.c)
        w.push_back(std::exp(x.logit - max));
    return w;
}

void top_k(Candidates& c, int64_t k)
{
    if (k <= 0 || k >= static_cast<int64_t>(c.c.size()))
        return;
    std::partial_sort(c.c.begin(), c.c.begin() + k, c.c.end(), before);
    c.c.resize(static_cast<size_t>(k));
    c.sorted = true;
}

void top_p(Candidates& c, double p)
{
    if (p >= 1)
        return;
    if (!c.sorted)
        std::sort(c.c.begin(), c.c.end(), before);
    c.sorted = true;
    const auto w = weights(c);
    double sum = 0;
    for (double x : w)
        sum += x;
    double cumulative = 0;
    size_t keep = 0;
    while (keep < w.size() && (keep == 0 || cumulative < p))
        cumulative += w[keep++] / sum;
    c.c.resize(keep);
}

// p_i >= min_p * p_max is logit_i >= max + ln(min_p); the order is kept.
void min_p(Candidates& c, double p)
{
    if (p <= 0 || c.c.empty())
        return;
    double max = -INFINITY;
    for (const auto& x : c.c)
        max = std::max(max, x.logit);
    const double threshold = max + std::log(p);
    std::erase_if(c.c, [&](const Candidate& x) { return x.logit < threshold; });
}

void temperature(Candidates& c, double t)
{
    if (t > 0) {
        for (auto& x : c.c)
            x.logit /= t;
        return;
    }
    const auto best = *std::min_element(c.c.begin(), c.c.end(), before);
    c.c = {best};
}

const std::vector<std::string>& chain(const SamplingOptions& s)
{
    static const std::vector<std::string> llamacpp{"top_k", "top_p", "min_p", "temperature"},
        hf{"temperature", "top_k", "top_p", "min_p"};
    return s.sampler == "hf" ? hf : llamacpp;
}

void apply(Candidates& c, const std::string& stage, const SamplingOptions& s)
{
    if (stage == "top_k")
        top_k(c, s.top_k);
    else if (stage == "top_p")
        top_p(c, s.top_p);
    else if (stage == "min_p")
        min_p(c, effective_min_p(s));
    else
        temperature(c, s.temperature);
}

std::vector<double> distribution(const Candidates& c, size_t V)
{
    std::vector<double> p(V, 0);
    const auto w = weights(c);
    double sum = 0;
    for (double x : w)
        sum += x;
    for (size_t i = 0; i < w.size(); ++i)
        p[static_cast<size_t>(c.c[i].id)] = w[i] / sum;
    return p;
}

// A uniform double in [0, 1) from the top 53 bits: std::uniform_real_distribution
// differs between standard libraries, and a seed must give the same text everywhere.
double uniform(std::mt19937_64& rng)
{
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

int32_t draw(const Candidates& c, std::mt19937_64& rng)
{
    const auto w = weights(c);
    double sum = 0;
    for (double x : w)
        sum += x;
    const double u = uniform(rng) * sum;
    double cumulative = 0;
    for (size_t i = 0; i < w.size(); ++i) {
        cumulative += w[i];
        if (u < cumulative)
            return c.c[i].id;
    }
    return c.c.back().id;
}

} // namespace

double effective_min_p(const SamplingOptions& s)
{
    return s.min_p.value_or(s.sampler == "hf" ? 0.0 : 0.05);
}

void check_sampling(const SamplingOptions& s)
{
    if (s.sampler != "llamacpp" && s.sampler != "hf")
        throw InputError("sampler must be llamacpp or hf, not '" + s.sampler + "'");
    if (!std::isfinite(s.temperature) || s.temperature < 0 || s.temperature > 100)
        throw InputError("temperature must be from 0 (greedy) to 100, not " + std::to_string(s.temperature));
    if (s.top_k < 0)
        throw InputError("top_k must be 0 (no limit) or more, not " + std::to_string(s.top_k));
    if (!(s.top_p > 0 && s.top_p <= 1))
        throw InputError("top_p must be in (0, 1], not " + std::to_string(s.top_p));
    if (s.min_p && !(*s.min_p >= 0 && *s.min_p <= 1))
        throw InputError("min_p must be from 0 (off) to 1, not " + std::to_string(*s.min_p));
}

std::vector<SamplingStage> sampling_stages(std::span<const float> logits, const SamplingOptions& s)
{
    check_sampling(s);
    if (logits.empty())
        throw InputError("sampling needs at least one logit");
    auto c = all_tokens(logits);
    std::vector<SamplingStage> stages;
    for (const auto& stage : chain(s)) {
        apply(c, stage, s);
        stages.push_back({stage, distribution(c, logits.size())});
    }
    return stages;
}

int32_t sample_token(std::span<const float> logits, const SamplingOptions& s, std::mt19937_64& rng)
{
    if (logits.empty())
        throw InputError("sampling needs at least one logit");
    if (s.temperature == 0) // the first argmax, as torch's argmax gives it (vectorised)
        return static_cast<int32_t>(detail::first_max_index(logits));
    auto c = all_tokens(logits);
    for (const auto& stage : chain(s))
        apply(c, stage, s);
    return draw(c, rng);
}

} // namespace embedlab
