#include "embedlab/flat_llm.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <set>

#include "embedlab/name_table.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Unbiased draw in [0, n) from the raw 64-bit stream (std::uniform_int_distribution
// differs between standard libraries; this does not).
uint64_t draw_below(std::mt19937_64& rng, uint64_t n)
{
    const uint64_t threshold = (0 - n) % n; // 2^64 mod n
    for (;;) {
        const uint64_t r = rng();
        if (r >= threshold)
            return r % n;
    }
}

// Float64 bytes of layer l's MLP covariance.
int64_t mlp_covariance_bytes(const ModelConfig& c, int64_t l)
{
    return c.mlp_width(l) * c.mlp_width(l) * static_cast<int64_t>(sizeof(double));
}

// Consecutive layer ranges [first, end) whose MLP covariances fit `budget` bytes
// together, greedily, at least one layer each (issue 20 item 7).
std::vector<std::pair<int64_t, int64_t>> mlp_covariance_groups(const ModelConfig& c, int64_t budget)
{
    std::vector<std::pair<int64_t, int64_t>> groups;
    int64_t bytes = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const int64_t b = mlp_covariance_bytes(c, l);
        if (groups.empty() || bytes + b > budget) {
            groups.emplace_back(l, l + 1);
            bytes = b;
        } else {
            groups.back().second = l + 1;
            bytes += b;
        }
    }
    return groups;
}

// Thrown by an observer that has summed all it needs from a forward pass: the
// layers above are not run.
struct PassSummed {};

// Runs every window through the model, `batch` windows per forward pass,
// reporting (offset + windows done, total) after each.
void run_windows(const LanguageModel& model, const torch::Tensor& windows, int64_t batch,
                 ForwardObserver& observer, const ProgressFn& progress, int64_t offset, int64_t total)
{
    const int64_t n = windows.size(0);
    for (int64_t b0 = 0; b0 < n; b0 += batch) {
        const int64_t b = std::min(batch, n - b0);
        try {
            model.hidden_states(windows.narrow(0, b0, b), &observer);
        } catch (const PassSummed&) {
        }
        report_progress(progress, offset + b0 + b, total);
    }
}

// Sums what calibration needs from each forward pass.
class CalibrationObserver final : public ForwardObserver {
public:
    CalibrationObserver(const ModelConfig& c, bool mlp)
        : layers_(static_cast<size_t>(c.num_layers)), mlp_(mlp)
    {
        inputs_.resize(layers_.size());
        angle_sum_.assign(layers_.size(), 0.0);
        cosine_sum_.assign(layers_.size(), 0.0);
        for (int64_t l = 0; l < c.num_layers; ++l) {
            auto& layer = layers_[static_cast<size_t>(l)];
            for (int64_t h = 0; h < c.num_kv_heads; ++h)
                layer.value_covariance.push_back(
                    torch::zeros({c.value_dim(l), c.value_dim(l)}, torch::kFloat64));
            if (mlp)
                layer.mlp_covariance = torch::zeros({c.mlp_width(l), c.mlp_width(l)}, torch::kFloat64);
        }
    }

    void decoder_input(int64_t layer, const torch::Tensor& x) override { inputs_[idx(layer)] = x; }

    void decoder_output(int64_t layer, const torch::Tensor& x) override
    {
        // Row-wise cosine in float64, never an N x N similarity matrix.
        const auto a = inputs_[idx(layer)].reshape({-1, x.size(-1)}).to(torch::kFloat64);
        const auto b = x.reshape({-1, x.size(-1)}).to(torch::kFloat64);
        auto cos = (a * b).sum(1) / (a.norm(2, 1) * b.norm(2, 1));
        const auto nan = torch::isnan(cos);
        layers_[idx(layer)].nan_cosines += nan.sum().item<int64_t>();
        cos = torch::where(nan, torch::full_like(cos, 0.5), cos).clamp(0.0, 1.0);
        angle_sum_[idx(layer)] += (torch::arccos(cos) / M_PI).sum().item<double>();
        cosine_sum_[idx(layer)] += cos.sum().item<double>();
        inputs_[idx(layer)] = torch::Tensor();
    }

    void values(int64_t layer, const torch::Tensor& v) override
    {
        // v [B, T, Hkv, vd] -> [Hkv, N, vd]; C_h += Y_h^T Y_h.
        const auto y = v.reshape({-1, v.size(2), v.size(3)}).to(torch::kFloat64).transpose(0, 1);
        const auto c = torch::bmm(y.transpose(1, 2), y);
        auto& covs = layers_[idx(layer)].value_covariance;
        for (size_t h = 0; h < covs.size(); ++h)
            covs[h] += c[static_cast<int64_t>(h)];
    }

    void mlp_activations(int64_t layer, const torch::Tensor& a) override
    {
        if (!mlp_)
            return;
        const auto a64 = a.to(torch::kFloat64);
        layers_[idx(layer)].mlp_covariance.addmm_(a64.t(), a64);
    }

    std::vector<LayerCalibration> finish(int64_t tokens)
    {
        // METHODS 3: the reference code's mean of angles drives IPRS; eq. 9's angle of
        // the mean cosine is kept beside it, named, for the importance report.
        for (size_t l = 0; l < layers_.size(); ++l) {
            layers_[l].importance = tokens > 0 ? angle_sum_[l] / static_cast<double>(tokens) : 0.0;
            layers_[l].importance_eq9 =
                tokens > 0
                    ? std::acos(std::clamp(cosine_sum_[l] / static_cast<double>(tokens), 0.0, 1.0)) / M_PI
                    : 0.0;
        }
        return std::move(layers_);
    }

private:
    static size_t idx(int64_t l) { return static_cast<size_t>(l); }
    std::vector<LayerCalibration> layers_;
    std::vector<torch::Tensor> inputs_;
    std::vector<double> angle_sum_, cosine_sum_;
    bool mlp_;
};

// Sums the MLP covariances of layers [first, end) only, and stops the pass there.
class MlpGroupObserver final : public ForwardObserver {
public:
    MlpGroupObserver(const ModelConfig& c, int64_t first, int64_t end) : first_(first)
    {
        for (int64_t l = first; l < end; ++l)
            covariances_.push_back(torch::zeros({c.mlp_width(l), c.mlp_width(l)}, torch::kFloat64));
    }

    void mlp_activations(int64_t layer, const torch::Tensor& a) override
    {
        const int64_t i = layer - first_;
        if (i < 0 || i >= static_cast<int64_t>(covariances_.size()))
            return;
        const auto a64 = a.to(torch::kFloat64);
        covariances_[static_cast<size_t>(i)].addmm_(a64.t(), a64);
        if (i + 1 == static_cast<int64_t>(covariances_.size()))
            throw PassSummed{};
    }

    // Layer `first + i`'s covariance, handed over (the observer keeps none of it).
    torch::Tensor take(int64_t layer) { return std::move(covariances_[static_cast<size_t>(layer - first_)]); }

private:
    int64_t first_;
    std::vector<torch::Tensor> covariances_;
};

// One pass over the calibration windows summing layers [first, end)'s MLP
// covariances, with the calibration's own batches: the sums are the ones the
// calibration pass would have made, bit for bit.
MlpGroupObserver sum_mlp_group(const LanguageModel& model, const Calibration& calibration, int64_t first,
                               int64_t end, const ProgressFn& progress, int64_t offset, int64_t total)
{
    MlpGroupObserver observer(model.config(), first, end);
    run_windows(model, calibration.windows, calibration.options.batch, observer, progress, offset, total);
    return observer;
}

// Sequential calibration: sums one layer's value covariances (per KV head), its MLP
// covariance, or both (issue 62: the reference's one pass per layer) from a pass, and
// stops the pass once it has what it sums.
struct LayerSums {
    bool values = false, mlp = false;
};

class LayerObserver final : public ForwardObserver {
public:
    LayerObserver(const ModelConfig& c, int64_t layer, LayerSums sums) : layer_(layer), sums_(sums)
    {
        if (sums.mlp)
            mlp_covariance = torch::zeros({c.mlp_width(layer), c.mlp_width(layer)}, torch::kFloat64);
        if (sums.values)
            for (int64_t h = 0; h < c.num_kv_heads; ++h)
                value_covariance.push_back(
                    torch::zeros({c.value_dim(layer), c.value_dim(layer)}, torch::kFloat64));
    }

    void values(int64_t layer, const torch::Tensor& v) override
    {
        if (layer != layer_ || !sums_.values)
            return;
        // As the calibration pass: v [B, T, Hkv, vd] -> [Hkv, N, vd]; C_h += Y_h^T Y_h.
        const auto y = v.reshape({-1, v.size(2), v.size(3)}).to(torch::kFloat64).transpose(0, 1);
        const auto c = torch::bmm(y.transpose(1, 2), y);
        for (size_t h = 0; h < value_covariance.size(); ++h)
            value_covariance[h] += c[static_cast<int64_t>(h)];
        if (!sums_.mlp)
            throw PassSummed{};
    }

    void mlp_activations(int64_t layer, const torch::Tensor& a) override
    {
        if (layer != layer_ || !sums_.mlp)
            return;
        const auto a64 = a.to(torch::kFloat64);
        mlp_covariance.addmm_(a64.t(), a64);
        throw PassSummed{};
    }

    std::vector<torch::Tensor> value_covariance;
    torch::Tensor mlp_covariance;

private:
    int64_t layer_;
    LayerSums sums_;
};

torch::Tensor to_double(const torch::Tensor& t)
{
    return t.to(torch::kFloat64);
}

torch::Tensor to_float(const torch::Tensor& t)
{
    return t.to(torch::kFloat32).contiguous();
}

} // namespace

std::vector<int64_t> calibration_window_starts(int64_t n_tokens, int64_t samples, int64_t seqlen,
                                               uint64_t seed)
{
    if (samples < 1 || seqlen < 1)
        throw InputError("calibration needs at least one sample of at least one token (got " +
                         std::to_string(samples) + " samples of " + std::to_string(seqlen) + " tokens)");
    if (n_tokens < seqlen)
        throw InputError("the calibration text has " + std::to_string(n_tokens) +
                         " tokens, fewer than one window of " + std::to_string(seqlen));
    const int64_t positions = n_tokens - seqlen + 1;
    if (samples > positions)
        throw InputError("the calibration text gives only " + std::to_string(positions) +
                         " distinct windows of " + std::to_string(seqlen) + " tokens (" +
                         std::to_string(n_tokens) + " tokens); asked for " + std::to_string(samples) +
                         " samples: lower --samples or --seqlen, or use a longer text");
    // Floyd's algorithm: `samples` distinct values, each subset equally likely.
    std::mt19937_64 rng(seed);
    std::set<int64_t> chosen;
    for (int64_t j = positions - samples; j < positions; ++j) {
        const auto t = static_cast<int64_t>(draw_below(rng, static_cast<uint64_t>(j + 1)));
        if (!chosen.insert(t).second)
            chosen.insert(j);
    }
    return {chosen.begin(), chosen.end()};
}

int64_t calibration_context(const LanguageModel& model)
{
    const auto& c = model.config();
    return c.max_positions > 0 ? std::min(model.max_context(), c.max_positions) : model.max_context();
}

std::vector<double> Calibration::scores() const
{
    std::vector<double> s;
    for (const auto& l : layers)
        s.push_back(l.importance);
    return s;
}

Calibration calibrate(const LanguageModel& model, const std::vector<int32_t>& ids,
                      const CalibrationOptions& options, const ProgressFn& progress)
{
    const auto t0 = Clock::now();
    const auto& c = model.config();
    if (c.is_encoder())
        throw InputError("FLAT-LLM on an encoder (" + c.type_name() +
                         ") is not implemented: its calibration reads next-token windows of a decoder");
    const int64_t context = calibration_context(model);
    if (options.seqlen > context)
        throw InputError("calibration window of " + std::to_string(options.seqlen) +
                         " tokens exceeds the model's context of " + std::to_string(context));
    if (options.batch < 1)
        throw InputError("calibration batch must be at least 1 window");
    if (options.mlp_covariance_budget < 1)
        throw InputError("the MLP covariance budget must be a positive number of bytes (got " +
                         std::to_string(options.mlp_covariance_budget) + ")");
    Calibration cal;
    cal.options = options;
    cal.starts = calibration_window_starts(static_cast<int64_t>(ids.size()), options.samples, options.seqlen,
                                           options.seed);
    const int64_t n = options.samples;
    cal.windows = torch::empty({n, options.seqlen}, torch::kLong);
    auto acc = cal.windows.accessor<int64_t, 2>();
    for (int64_t i = 0; i < n; ++i)
        for (int64_t t = 0; t < options.seqlen; ++t)
            acc[i][t] = ids[static_cast<size_t>(cal.starts[static_cast<size_t>(i)] + t)];
    // Every layer's MLP covariance within the budget: all from this pass. Otherwise
    // none: flat_compress sums them group by group (each group a pass of its own).
    const bool all_mlp = options.mlp && mlp_covariance_groups(c, options.mlp_covariance_budget).size() == 1;
    CalibrationObserver observer(c, all_mlp);
    report_progress(progress, 0, n);
    run_windows(model, cal.windows, options.batch, observer, progress, 0, n);
    cal.tokens = n * options.seqlen;
    cal.layers = observer.finish(cal.tokens);
    cal.seconds = seconds_since(t0);
    return cal;
}

double remaining_for_target(const ModelConfig& c, double target, bool mlp)
{
    if (!(target > 0.0 && target <= 1.0))
        throw InputError("target ratio " + std::to_string(target) + " is outside (0, 1]");
    double qk = 0, vo = 0, mlp_params = 0;
    const double d = static_cast<double>(c.hidden_size);
    const double mlp_matrices = c.arch == Architecture::GPT2 || !c.gated_mlp ? 2 : 3;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const double hd = static_cast<double>(c.head_dim());
        qk += d * static_cast<double>(c.num_heads + c.num_kv_heads) * hd;
        vo += d * static_cast<double>(c.num_kv_heads + c.num_heads) * static_cast<double>(c.value_dim(l));
        mlp_params += mlp_matrices * d * static_cast<double>(c.mlp_width(l));
    }
    const double total = qk + vo + mlp_params;
    const double fixed = qk + (mlp ? 0 : mlp_params);
    const double narrowed = total - fixed;
    const double r = (target * total - fixed) / narrowed;
    if (!(r > 0.0 && r <= 1.0 + 1e-12)) {
        const std::string narrowed_parts = mlp ? "V, O and the MLP" : "V and O";
        throw InputError("target ratio " + short_number(target) + " is out of reach: " + narrowed_parts +
                         " would keep " + short_number(r) + " of their weights; reachable targets lie in (" +
                         short_number(fixed / total) + ", 1], as Q, K" + (mlp ? "" : " and the MLP") +
                         " are never compressed");
    }
    return std::min(r, 1.0);
}

std::vector<double> iprs_allocation(const std::vector<double>& scores, double remaining)
{
    if (!(remaining > 0.0 && remaining <= 1.0))
        throw InputError("remaining ratio " + std::to_string(remaining) + " is outside (0, 1]");
    for (double t : scores)
        if (!std::isfinite(t) || t < 0)
            throw InputError("importance scores must be finite and non-negative (got " + std::to_string(t) +
                             ")");
    const size_t L = scores.size();
    std::vector<double> w(L, 0.0);
    std::vector<bool> active(L, true);
    double budget = static_cast<double>(L) * remaining;
    for (;;) {
        double sum = 0;
        size_t count = 0;
        for (size_t l = 0; l < L; ++l)
            if (active[l]) {
                sum += scores[l];
                ++count;
            }
        if (count == 0)
            break;
        for (size_t l = 0; l < L; ++l)
            if (active[l]) // all-zero scores: the budget in equal parts
                w[l] = sum > 0 ? scores[l] / sum * budget : budget / static_cast<double>(count);
        bool clipped = false;
        for (size_t l = 0; l < L; ++l)
            if (active[l] && w[l] > 1.0) {
                w[l] = 1.0;
                active[l] = false;
                budget -= 1.0;
                clipped = true;
            }
        if (!clipped)
            break;
    }
    return w;
}

std::vector<double> uniform_allocation(size_t layers, double remaining)
{
    if (!(remaining > 0.0 && remaining <= 1.0))
        throw InputError("remaining ratio " + std::to_string(remaining) + " is outside (0, 1]");
    return std::vector<double>(layers, remaining);
}

std::vector<int64_t> ranks_from_ratios(const std::vector<double>& w, int64_t d)
{
    std::vector<int64_t> r;
    for (double x : w) // the epsilon keeps w = 0.5, d = 32 at 16 despite rounding in w
        r.push_back(
            std::clamp<int64_t>(static_cast<int64_t>(std::floor(x * static_cast<double>(d) + 1e-9)), 1, d));
    return r;
}

EigenBasis eigen_basis(const torch::Tensor& covariance)
{
    auto [values, vectors] = torch::linalg_eigh(to_double(covariance)); // ascending
    return {values.flip(0).contiguous(), vectors.flip(1).contiguous()};
}

constexpr Named<FlatCalibration> kFlatCalibrations[]{{FlatCalibration::Sequential, "sequential"},
                                                     {FlatCalibration::Parallel, "parallel"}};

const char* flat_calibration_name(FlatCalibration c)
{
    return name_of(kFlatCalibrations, c);
}

FlatCalibration parse_flat_calibration(const std::string& name)
{
    return value_named(kFlatCalibrations, name,
                       "unknown FLAT-LLM calibration '" + name + "' (sequential or parallel)");
}

constexpr Named<FlatMlpCalibration> kFlatMlpCalibrations[]{
    {FlatMlpCalibration::Reference, "reference"}, {FlatMlpCalibration::AfterAttention, "after_attention"}};

const char* flat_mlp_calibration_name(FlatMlpCalibration c)
{
    return name_of(kFlatMlpCalibrations, c);
}

FlatMlpCalibration parse_flat_mlp_calibration(const std::string& name)
{
    return value_named(kFlatMlpCalibrations, name,
                       "unknown FLAT-LLM MLP calibration '" + name + "' (reference or after_attention)");
}

constexpr Named<RankAllocation> kRankAllocations[]{{RankAllocation::IPRS, "iprs"},
                                                   {RankAllocation::Uniform, "uniform"}};

const char* rank_allocation_name(RankAllocation a)
{
    return name_of(kRankAllocations, a);
}

RankAllocation parse_rank_allocation(const std::string& name)
{
    return value_named(kRankAllocations, name, "unknown rank allocation '" + name + "' (iprs or uniform)");
}

// METHODS 3, optional MLP: ridge leverage s = diag(C (C + lambda I)^-1), keep the
// top m channels, and the Nystrom map a ~ a_S (C_SS^-1 C_S:), as METHODS.md writes
// it (no ridge in the solve). Keeping every channel is the identity. A C_SS that
// is not safely positive definite (fewer calibration tokens than kept channels, dead
// channels) is refused: LU would return huge finite values that corrupt W_down.
// Its condition number comes from its eigenvalues (issue 36 item 5): the Cholesky
// diagonal's (max / min)^2, used before, is only a lower bound (a 200 x 200 matrix of
// condition 1e14 gave 1.8e11 and passed).
MlpSelection nystrom_selection(const torch::Tensor& C, int64_t m, double lambda, const std::string& layer,
                               int64_t tokens)
{
    if (C.dim() != 2 || C.size(0) != C.size(1) || m < 1 || m > C.size(0))
        throw InputError(layer + ": Nystrom selection of " + std::to_string(m) +
                         " channels from a covariance of " + "shape [" +
                         std::to_string(C.dim() > 0 ? C.size(0) : 0) + ", ...]");
    const auto basis = eigen_basis(C);
    const auto lam = basis.eigenvalues.clamp_min(0.0);
    const auto s = (basis.eigenvectors.pow(2) * (lam / (lam + lambda)).unsqueeze(0)).sum(1); // [f]
    const auto order = std::get<1>(s.sort(/*stable=*/true, 0, /*descending=*/true));
    MlpSelection out;
    out.keep = std::get<0>(order.narrow(0, 0, m).sort());
    const double total = s.sum().item<double>();
    out.leverage_kept = total > 0 ? s.index_select(0, out.keep).sum().item<double>() / total : 1.0;
    const int64_t f = C.size(0);
    if (m == f) {
        out.projection = torch::eye(f, torch::kFloat64);
        return out;
    }
    const auto C_SS = C.index_select(0, out.keep).index_select(1, out.keep).to(torch::kFloat64);
    const auto C_S = C.index_select(0, out.keep).to(torch::kFloat64);
    const auto [L, info] = torch::linalg_cholesky_ex(C_SS);
    if (info.item<int64_t>() == 0) {
        const auto values = torch::linalg_eigvalsh(C_SS); // ascending
        const double low = values[0].item<double>(), high = values[-1].item<double>();
        out.condition = low > 0 ? high / low : INFINITY;
    } else {
        out.condition = INFINITY;
    }
    if (!(out.condition < kNystromMaxCondition))
        throw InputError(layer + ": the MLP covariance of the " + std::to_string(m) +
                         " kept channels is singular or nearly so (condition number " +
                         short_number(out.condition) + ", limit 1e12; calibration of " +
                         std::to_string(tokens) + " tokens; it needs well over " + std::to_string(m) +
                         " tokens with those channels active): raise --samples or --seqlen, or compress "
                         "without --mlp");
    out.projection = torch::cholesky_solve(C_S, L);
    return out;
}

namespace {

// The part FLAT-LLM compresses (METHODS 0): value projections (weights and, in
// gpt2, their bias) and output projection weights; the output bias is unchanged.
int64_t value_output_params(const ModelConfig& c)
{
    int64_t n = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const int64_t vd = c.value_dim(l);
        n += c.hidden_size * c.num_kv_heads * vd + c.num_heads * vd * c.hidden_size;
        if (c.arch == Architecture::GPT2)
            n += c.num_kv_heads * vd;
    }
    return n;
}

// The MLP part FLAT-LLM's Nystrom step narrows: the widening projections (up, gate, and
// their biases; gpt2's c_fc) and the down projection's weight; its bias is unchanged.
int64_t mlp_params(const LanguageModel& m)
{
    const auto& c = m.config();
    const auto& w = m.weights();
    int64_t n = 0;
    auto add = [&](const std::string& name) {
        if (const auto it = w.find(name); it != w.end())
            n += it->second.numel();
    };
    for (int64_t l = 0; l < c.num_layers; ++l) {
        if (c.arch == Architecture::GPT2) {
            const std::string p = "h." + std::to_string(l) + ".mlp.";
            for (const char* name : {"c_fc.weight", "c_fc.bias", "c_proj.weight"})
                add(p + name);
        } else {
            const std::string p = "model.layers." + std::to_string(l) + ".mlp.";
            for (const char* name :
                 {"gate_proj.weight", "gate_proj.bias", "up_proj.weight", "up_proj.bias", "down_proj.weight"})
                add(p + name);
        }
    }
    return n;
}

} // namespace

int64_t flat_compressed_params(const LanguageModel& model, bool mlp)
{
    return value_output_params(model.config()) + (mlp ? mlp_params(model) : 0);
}

FlatResult flat_compress(const LanguageModel& model, const Calibration& calibration,
                         const FlatOptions& options, const ProgressFn& progress)
{
    const auto t0 = Clock::now();
    const auto& c = model.config();
    if (!c.value_head_dims.empty() || !c.mlp_widths.empty())
        throw InputError("the model is already FLAT-compressed; compress the original model");
    if (static_cast<int64_t>(calibration.layers.size()) != c.num_layers)
        throw InputError("the calibration has " + std::to_string(calibration.layers.size()) +
                         " layers but the model has " + std::to_string(c.num_layers));
    if (options.mlp && !calibration.options.mlp && options.calibration == FlatCalibration::Parallel)
        throw InputError("MLP compression needs a calibration that collected MLP covariances");
    if (!(options.mlp_lambda > 0))
        throw InputError("the MLP ridge lambda must be positive");
    const int64_t L = c.num_layers, H = c.num_heads, Hkv = c.num_kv_heads, hd = c.head_dim(),
                  d = c.hidden_size;
    const auto scores = calibration.scores();
    const auto w = options.allocation == RankAllocation::IPRS
                       ? iprs_allocation(scores, options.remaining)
                       : uniform_allocation(scores.size(), options.remaining);
    const auto ranks = ranks_from_ratios(w, hd);
    double score_sum = 0;
    for (double t : scores)
        score_sum += t;

    // The MLP covariances: all in the calibration, or summed here group by group,
    // each group consumed (Nystrom selection, W_up / W_down update) and released
    // before the next group's are allocated. Each group re-runs the forward pass
    // over the calibration windows (up to its last layer).
    // Sequential calibration (the default) sums each layer's covariances itself instead.
    const bool sequential = options.calibration == FlatCalibration::Sequential;
    bool mlp_in_calibration = !sequential;
    for (const auto& layer : calibration.layers)
        mlp_in_calibration = mlp_in_calibration && layer.mlp_covariance.defined();
    if (sequential &&
        (!calibration.windows.defined() || calibration.windows.size(0) != calibration.options.samples))
        throw InputError("sequential calibration needs the calibration's windows; calibrate again");
    std::vector<std::pair<int64_t, int64_t>> mlp_groups;
    if (options.mlp && !mlp_in_calibration && !sequential) {
        if (!calibration.windows.defined() || calibration.windows.size(0) != calibration.options.samples)
            throw InputError("the calibration holds neither the MLP covariances nor its windows; calibrate "
                             "again with MLP covariances");
        mlp_groups = mlp_covariance_groups(c, calibration.options.mlp_covariance_budget);
    }
    // Sequential: a values pass for every layer but the first (whose inputs are the
    // original model's). Its MLP covariances: by default (as the reference) from that
    // same pass, layer l still uncompressed, and layer 0's from the calibration when it
    // holds it, else from a pass of its own; after_attention: a pass for every layer,
    // after its attention is narrowed.
    const bool mlp_after_attention =
        sequential && options.mlp && options.mlp_calibration == FlatMlpCalibration::AfterAttention;
    const bool mlp_with_values = sequential && options.mlp && !mlp_after_attention;
    const bool layer0_mlp_pass = mlp_with_values && !calibration.layers.front().mlp_covariance.defined();
    int64_t passes = static_cast<int64_t>(mlp_groups.size());
    if (sequential)
        passes = (L - 1) + (mlp_after_attention ? L : (layer0_mlp_pass ? 1 : 0));
    const int64_t windows_total = passes * calibration.options.samples;
    if (passes > 0)
        report_progress(progress, 0, windows_total);
    size_t next_group = 0;
    std::optional<MlpGroupObserver> group; // the current group's covariances

    FlatResult result;
    result.options = options;
    if (options.mlp && sequential) {
        result.mlp_calibration_passes = L;
        for (int64_t l = 0; l < L; ++l)
            result.mlp_covariance_peak_bytes =
                std::max(result.mlp_covariance_peak_bytes, mlp_covariance_bytes(c, l));
    } else if (options.mlp) {
        result.mlp_calibration_passes = mlp_in_calibration ? 1 : static_cast<int64_t>(mlp_groups.size());
        for (const auto& [first, end] :
             mlp_in_calibration ? std::vector<std::pair<int64_t, int64_t>>{{0, L}} : mlp_groups) {
            int64_t bytes = 0;
            for (int64_t l = first; l < end; ++l)
                bytes += mlp_covariance_bytes(c, l);
            result.mlp_covariance_peak_bytes = std::max(result.mlp_covariance_peak_bytes, bytes);
        }
    }
    WeightMap weights = model.weights();
    ModelConfig config = c;
    config.value_head_dims = ranks;
    const bool gpt2 = c.arch == Architecture::GPT2;
    // Sequential: the model as compressed so far (value dims and MLP widths per layer,
    // the original's beyond), run over the calibration windows up to `layer`.
    std::vector<int64_t> dims(static_cast<size_t>(L)), widths(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l) {
        dims[static_cast<size_t>(l)] = c.value_dim(l);
        widths[static_cast<size_t>(l)] = c.mlp_width(l);
    }
    auto sequential_pass = [&](int64_t layer, LayerSums sums) {
        ModelConfig partial = c;
        partial.value_head_dims = dims;
        if (options.mlp)
            partial.mlp_widths = widths;
        const LanguageModel current(partial, weights, model.shared_token_embedding(),
                                    "FLAT-LLM (sequential calibration)", model.shared_position_embedding());
        LayerObserver observer(partial, layer, sums);
        run_windows(current, calibration.windows, calibration.options.batch, observer, progress,
                    result.sequential_passes * calibration.options.samples, windows_total);
        ++result.sequential_passes;
        return observer;
    };
    for (int64_t l = 0; l < L; ++l) {
        const auto& cal = calibration.layers[static_cast<size_t>(l)];
        const int64_t r = ranks[static_cast<size_t>(l)];
        // Layer l's value covariances: from the calibration (parallel, and layer 0, whose
        // input no compression has touched), or from the model compressed up to l; its
        // MLP covariance (by default, sequential) from the same pass, layer l as it was.
        std::vector<torch::Tensor> value_covariance = cal.value_covariance;
        torch::Tensor mlp_covariance_before; // mlp_with_values: layer l uncompressed
        if (sequential && l > 0) {
            auto pass = sequential_pass(l, {.values = true, .mlp = mlp_with_values});
            value_covariance = std::move(pass.value_covariance);
            mlp_covariance_before = std::move(pass.mlp_covariance);
        } else if (mlp_with_values) {
            mlp_covariance_before =
                layer0_mlp_pass ? sequential_pass(0, {.mlp = true}).mlp_covariance : cal.mlp_covariance;
        }
        FlatLayerReport report;
        report.importance = scores[static_cast<size_t>(l)];
        report.normalised = score_sum > 0 ? report.importance / score_sum : 1.0 / static_cast<double>(L);
        report.w = w[static_cast<size_t>(l)];
        report.rank = r;
        std::vector<torch::Tensor> Q; // per KV head [hd, r]
        double dropped = 0, total = 0;
        for (int64_t g = 0; g < Hkv; ++g) {
            const auto basis = eigen_basis(value_covariance[static_cast<size_t>(g)]);
            const auto lam = basis.eigenvalues.clamp_min(0.0);
            total += lam.sum().item<double>();
            dropped += lam.narrow(0, r, hd - r).sum().item<double>();
            const auto* p = lam.data_ptr<double>();
            report.head_spectra.emplace_back(p, p + lam.numel());
            Q.push_back(basis.eigenvectors.narrow(1, 0, r));
        }
        report.dropped_share = total > 0 ? dropped / total : 0.0;

        // Absorb: W_v^h <- Q_h^T W_v^h (and its bias), W_o^h <- W_o^h Q_h; a query
        // head uses the basis of its KV group (repeat_interleave order).
        const int64_t rep = H / Hkv;
        if (gpt2) {
            const std::string p = "h." + std::to_string(l) + ".attn.";
            const auto Wa = to_double(weights.at(p + "c_attn.weight")); // [d, 3d], y = x W + b
            const auto ba = to_double(weights.at(p + "c_attn.bias"));
            const auto Wp = to_double(weights.at(p + "c_proj.weight")); // [H hd, d]
            std::vector<torch::Tensor> wcols{Wa.narrow(1, 0, 2 * d)}, bparts{ba.narrow(0, 0, 2 * d)}, prows;
            for (int64_t h = 0; h < H; ++h) {
                const auto& q = Q[static_cast<size_t>(h / rep)];
                wcols.push_back(torch::matmul(Wa.narrow(1, 2 * d + h * hd, hd), q));
                bparts.push_back(torch::matmul(ba.narrow(0, 2 * d + h * hd, hd), q));
                prows.push_back(torch::matmul(q.t(), Wp.narrow(0, h * hd, hd)));
            }
            weights[p + "c_attn.weight"] = to_float(torch::cat(wcols, 1));
            weights[p + "c_attn.bias"] = to_float(torch::cat(bparts, 0));
            weights[p + "c_proj.weight"] = to_float(torch::cat(prows, 0));
        } else {
            const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
            const auto Wv = to_double(weights.at(p + "v_proj.weight")); // [Hkv hd, d]
            const auto Wo = to_double(weights.at(p + "o_proj.weight")); // [d, H hd]
            std::vector<torch::Tensor> vrows, vbias, ocols;
            const bool has_bias = weights.count(p + "v_proj.bias") > 0; // qwen2, gpt_neox
            const auto bv = has_bias ? to_double(weights.at(p + "v_proj.bias")) : torch::Tensor();
            for (int64_t g = 0; g < Hkv; ++g) {
                const auto& q = Q[static_cast<size_t>(g)];
                vrows.push_back(torch::matmul(q.t(), Wv.narrow(0, g * hd, hd)));
                if (has_bias)
                    vbias.push_back(torch::matmul(q.t(), bv.narrow(0, g * hd, hd)));
            }
            for (int64_t h = 0; h < H; ++h)
                ocols.push_back(torch::matmul(Wo.narrow(1, h * hd, hd), Q[static_cast<size_t>(h / rep)]));
            weights[p + "v_proj.weight"] = to_float(torch::cat(vrows, 0));
            if (has_bias)
                weights[p + "v_proj.bias"] = to_float(torch::cat(vbias, 0));
            weights[p + "o_proj.weight"] = to_float(torch::cat(ocols, 1));
        }

        dims[static_cast<size_t>(l)] = r;
        report.mlp_width = c.intermediate_size;
        if (options.mlp) {
            const int64_t f = c.intermediate_size;
            const int64_t m = std::clamp<int64_t>(
                static_cast<int64_t>(std::floor(report.w * static_cast<double>(f) + 1e-9)), 1, f);
            torch::Tensor covariance = cal.mlp_covariance;
            if (mlp_with_values) {
                covariance = std::move(mlp_covariance_before);
            } else if (mlp_after_attention) {
                // With layer l's attention compressed too: the MLP's inputs as they will be.
                covariance = sequential_pass(l, {.mlp = true}).mlp_covariance;
            } else if (!mlp_in_calibration) {
                if (next_group < mlp_groups.size() && mlp_groups[next_group].first == l) {
                    const auto [first, end] = mlp_groups[next_group];
                    group.reset(); // the previous group's memory goes before this one's is allocated
                    group.emplace(sum_mlp_group(
                        model, calibration, first, end, progress,
                        static_cast<int64_t>(next_group) * calibration.options.samples, windows_total));
                    ++next_group;
                }
                covariance = group->take(l);
            }
            const auto sel = nystrom_selection(covariance, m, options.mlp_lambda,
                                               "layer " + std::to_string(l), calibration.tokens);
            covariance = torch::Tensor(); // consumed
            report.mlp_width = m;
            widths[static_cast<size_t>(l)] = m;
            report.mlp_leverage_kept = sel.leverage_kept;
            config.mlp_widths.push_back(m);
            if (gpt2) {
                const std::string p = "h." + std::to_string(l) + ".mlp.";
                weights[p + "c_fc.weight"] =
                    to_float(weights.at(p + "c_fc.weight").index_select(1, sel.keep));
                weights[p + "c_fc.bias"] = to_float(weights.at(p + "c_fc.bias").index_select(0, sel.keep));
                weights[p + "c_proj.weight"] =
                    to_float(torch::matmul(sel.projection, to_double(weights.at(p + "c_proj.weight"))));
            } else {
                const std::string p = "model.layers." + std::to_string(l) + ".mlp.";
                // Rows of the widening projections (and their biases) that survive.
                for (const char* name :
                     {"gate_proj.weight", "gate_proj.bias", "up_proj.weight", "up_proj.bias"})
                    if (weights.count(p + name))
                        weights[p + name] = to_float(weights.at(p + name).index_select(0, sel.keep));
                weights[p + "down_proj.weight"] = to_float(
                    torch::matmul(to_double(weights.at(p + "down_proj.weight")), sel.projection.t()));
            }
        }
        result.layers.push_back(std::move(report));
    }
    result.model = std::make_unique<LanguageModel>(config, std::move(weights), model.shared_token_embedding(),
                                                   "FLAT-LLM result", model.shared_position_embedding());
    result.before = model.parameter_breakdown();
    result.after = result.model->parameter_breakdown();
    result.seconds = seconds_since(t0);
    return result;
}

} // namespace embedlab
