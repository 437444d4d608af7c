#include "embedlab/additive_quantisation.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/activation.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "embedlab/error.hpp"
#include "io/onnx_graph.hpp"
#include "methods/loss_check.hpp"
#include "methods/table_checks.hpp"

namespace embedlab {

namespace {

int64_t code_bits(int64_t codewords)
{
    return std::bit_width(static_cast<uint64_t>(codewords)) - 1;
}

void check_aq_sizes(int64_t codebooks, int64_t codewords, const std::string& what)
{
    if (codebooks < 1 || codebooks > 1024)
        throw InputError(what + ": codebooks (M) must lie in 1..1024, got " + std::to_string(codebooks));
    if (codewords < 2 || codewords > 256 || !std::has_single_bit(static_cast<uint64_t>(codewords)))
        throw InputError(what + ": codewords (K) must be a power of two in 2..256, got " +
                         std::to_string(codewords));
}

// One torch call's work between cancel checks: well under 0.1 s on one core.
constexpr double kFlopsPerCall = 1e9;
constexpr int64_t kValuesPerCall = int64_t{1} << 24;

using Clock = std::chrono::steady_clock;

// Progress after every step, and within one at most every 0.2 s: a false return (a front
// end's stop, `worker`'s SIGTERM) then stops the fit within a call's work.
struct Ticker {
    const ProgressFn& progress;
    int64_t total, done = 0;
    Clock::time_point last = Clock::now();
    void step(int64_t s)
    {
        done = s;
        report_progress(progress, done, total);
        last = Clock::now();
    }
    void tick()
    {
        if (Clock::now() - last >= std::chrono::milliseconds(200))
            step(done);
    }
};

// fn(first, count) over row blocks of about kValuesPerCall values, ticking between blocks.
template <typename Fn> void row_blocks(int64_t rows, int64_t row_values, Ticker& ticker, Fn fn)
{
    const int64_t block = std::max<int64_t>(1, kValuesPerCall / std::max<int64_t>(1, row_values));
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
        fn(r0, std::min(block, rows - r0));
        ticker.tick();
    }
}

// Rows per call at flops_per_weight a row (6: forward and back, 2: forward) within
// kFlopsPerCall, but at least the official batch of 64: fewer would spend a wide model's
// call on passes over its weights, not rows. At most 8192.
int64_t rows_per_call(int64_t d, int64_t H, int64_t MK, double flops_per_weight)
{
    const double weights = double(d) * double(H) + double(H) * double(MK) + double(MK) * double(d);
    return std::clamp<int64_t>(static_cast<int64_t>(kFlopsPerCall / (flops_per_weight * weights)), 64, 8192);
}

double physical_bytes()
{
    return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

std::string gigabytes(double bytes)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
    return text;
}

void check_options(const AqOptions& o)
{
    check_aq_sizes(o.codebooks, o.codewords, "aq");
    if (o.steps < 0)
        throw InputError("aq: steps must be at least 1 (0: 200 epochs), got " + std::to_string(o.steps));
    if (!(o.lr > 0) || !std::isfinite(o.lr))
        throw InputError("aq: the learning rate must be a positive number, got " + std::to_string(o.lr));
    if (o.batch < 1)
        throw InputError("aq: the batch (rows per step) must be at least 1, got " + std::to_string(o.batch));
    if (!(o.tau > 0) || !std::isfinite(o.tau))
        throw InputError("aq: the temperature must be a positive number, got " + std::to_string(o.tau));
    if (!(o.clip >= 0) || !std::isfinite(o.clip))
        throw InputError("aq: clip must be 0 (none) or a positive norm, got " + std::to_string(o.clip));
    if (o.holdout < 0 || o.eval_every < 0)
        throw InputError("aq: holdout and eval_every must not be negative");
}

// The encoder and the codebooks (trained, or a checkpoint's copy).
struct Coder {
    int64_t M, K;
    torch::Tensor w1, b1, w2, b2, codebooks;
    std::vector<torch::Tensor> params() const { return {w1, b1, w2, b2, codebooks}; }

    torch::Tensor hidden(const torch::Tensor& e) const { return torch::tanh(torch::addmm(b1, e, w1)); }
    // log a of codebooks m0 .. m0 + n - 1: [rows, n, K]
    torch::Tensor log_weights(const torch::Tensor& h, int64_t m0, int64_t n) const
    {
        const auto z = torch::addmm(b2.narrow(0, m0 * K, n * K), h, w2.narrow(1, m0 * K, n * K));
        return torch::log(torch::nn::functional::softplus(z) + 1e-8).view({-1, n, K});
    }
    // Codebooks a call of `rows` rows takes within kFlopsPerCall (forward and back).
    int64_t group(int64_t rows) const
    {
        const double per_codebook = 6.0 * double(rows) * double(w2.size(0)) * double(K);
        return std::clamp<int64_t>(static_cast<int64_t>(kFlopsPerCall / per_codebook), 1, M);
    }
};

// Linear layers at torch's default initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and
// codebooks N(0, s^2 / M) with s the table's standard deviation (so a sum of M codewords
// starts at the table's scale), all from one generator, filled block by block.
Coder init_coder(const torch::Tensor& target, const AqOptions& o, int64_t H, at::Generator& gen,
                 Ticker& ticker)
{
    const int64_t d = target.size(1), M = o.codebooks, K = o.codewords;
    auto uniform = [&](std::vector<int64_t> shape, int64_t fan_in) {
        const double b = 1.0 / std::sqrt(static_cast<double>(fan_in));
        auto t = torch::empty(shape, torch::kFloat32);
        const int64_t cols = shape.size() > 1 ? shape[1] : shape[0], rows = shape.size() > 1 ? shape[0] : 1;
        auto m = t.view({rows, cols});
        row_blocks(rows, cols, ticker,
                   [&](int64_t r0, int64_t n) { m.narrow(0, r0, n).uniform_(-b, b, gen); });
        return t.requires_grad_(true);
    };
    Coder c{.M = M, .K = K};
    c.w1 = uniform({d, H}, d), c.b1 = uniform({H}, d);
    c.w2 = uniform({H, M * K}, H), c.b2 = uniform({M * K}, H);
    const double scale = target.std().item<double>() / std::sqrt(static_cast<double>(M));
    c.codebooks = (torch::empty({M, K, d}, torch::kFloat32).normal_(0, 1, gen) * scale).requires_grad_(true);
    return c;
}

// One Adam update as torch::optim::Adam's (0.9, 0.999, eps 1e-8), in row blocks.
struct Adam {
    double lr;
    int64_t t = 0;
    std::vector<torch::Tensor> m, v;
    void step(const std::vector<torch::Tensor>& params, Ticker& ticker)
    {
        ++t;
        const double bc1 = 1 - std::pow(0.9, double(t)), bc2 = 1 - std::pow(0.999, double(t));
        for (size_t i = 0; i < params.size(); ++i) {
            if (m.size() <= i)
                m.push_back(torch::zeros_like(params[i])), v.push_back(torch::zeros_like(params[i]));
            auto p = params[i].detach().view({params[i].size(0), -1}), g = params[i].grad().view_as(p);
            auto mi = m[i].view_as(p), vi = v[i].view_as(p);
            row_blocks(p.size(0), p.size(1), ticker, [&](int64_t r0, int64_t n) {
                auto gb = g.narrow(0, r0, n), mb = mi.narrow(0, r0, n), vb = vi.narrow(0, r0, n);
                mb.mul_(0.9).add_(gb, 0.1);
                vb.mul_(0.999).addcmul_(gb, gb, 0.001);
                p.narrow(0, r0, n).addcdiv_(mb, (vb.sqrt() / std::sqrt(bc2)).add_(1e-8), -lr / bc1);
            });
        }
    }
};

// The gradients' global norm; scaled to `clip` when above it (tf.clip_by_global_norm).
double clip_gradients(const std::vector<torch::Tensor>& params, double clip)
{
    double sum = 0;
    for (const auto& p : params)
        sum += p.grad().pow(2).sum().item<double>();
    const double norm = std::sqrt(sum);
    if (clip > 0 && norm > clip)
        for (const auto& p : params)
            p.grad().mul_(clip / norm);
    return norm;
}

// Gumbel-softmax one-hots y of codebooks m0 .. m0 + n - 1, from hidden rows h and uniform noise u.
torch::Tensor soft_codes(const Coder& c, const torch::Tensor& h, const torch::Tensor& u, int64_t m0,
                         int64_t n, double tau)
{
    const auto gumbel = -torch::log(-torch::log(u.narrow(1, m0, n)));
    return torch::softmax((c.log_weights(h, m0, n) + gumbel) / tau, -1);
}

// A call's loss 0.5 ||sum_m y_m A_m - e||^2 / batch, backward in one graph.
double whole_call(const Coder& c, const torch::Tensor& e, const torch::Tensor& u, double tau, int64_t batch)
{
    const auto y = soft_codes(c, c.hidden(e), u, 0, c.M, tau);
    const auto loss =
        0.5 * (torch::einsum("bmk,mkd->bd", {y, c.codebooks}) - e).pow(2).sum(1).sum() / double(batch);
    loss.backward();
    return loss.item<double>();
}

// The same loss and gradients for a wide encoder, codebook group by group (ticking between):
// the residual r from a forward without grad, then each group's sum_m y_m A_m . r / batch
// backward (r fixed, its gradient is the loss's), collecting dL/dh for the first layer.
double grouped_call(const Coder& c, const torch::Tensor& e, const torch::Tensor& u, double tau, int64_t batch,
                    int64_t group, Ticker& ticker)
{
    torch::Tensor h, r;
    {
        torch::NoGradGuard no_grad;
        h = c.hidden(e);
        r = -e;
        for (int64_t m0 = 0; m0 < c.M; m0 += group, ticker.tick()) {
            const int64_t n = std::min(group, c.M - m0);
            r = r +
                torch::einsum("bmk,mkd->bd", {soft_codes(c, h, u, m0, n, tau), c.codebooks.narrow(0, m0, n)});
        }
    }
    const auto leaf = h.detach().requires_grad_(true);
    for (int64_t m0 = 0; m0 < c.M; m0 += group, ticker.tick()) {
        const int64_t n = std::min(group, c.M - m0);
        const auto y = soft_codes(c, leaf, u, m0, n, tau);
        (torch::einsum("bmk,mkd->bd", {y, c.codebooks.narrow(0, m0, n)}) * r)
            .sum()
            .div(double(batch))
            .backward();
    }
    c.hidden(e).backward(leaf.grad());
    return 0.5 * r.pow(2).sum().item<double>() / double(batch);
}

// One step's loss 0.5 ||sum_m y_m A_m - e||^2, a batch mean, its gradients accumulated in
// calls of `rows` rows.
double accumulate_step(const Coder& c, const torch::Tensor& e, const torch::Tensor& u, double tau,
                       int64_t rows, Ticker& ticker)
{
    const int64_t batch = e.size(0);
    double total = 0;
    for (int64_t r0 = 0; r0 < batch; r0 += rows, ticker.tick()) {
        const int64_t n = std::min(rows, batch - r0), group = c.group(n);
        const auto eb = e.narrow(0, r0, n), ub = u.narrow(0, r0, n);
        total += group < c.M ? grouped_call(c, eb, ub, tau, batch, group, ticker)
                             : whole_call(c, eb, ub, tau, batch);
    }
    return total;
}

// Rows' codes [n, M] from the encoder, `rows` at a time.
torch::Tensor encode(const Coder& c, const torch::Tensor& e, int64_t rows, Ticker& ticker)
{
    torch::NoGradGuard no_grad;
    auto codes = torch::empty({e.size(0), c.M}, torch::kUInt8);
    for (int64_t r0 = 0; r0 < e.size(0); r0 += rows) {
        const int64_t n = std::min(rows, e.size(0) - r0);
        const auto h = c.hidden(e.narrow(0, r0, n));
        for (int64_t m0 = 0, group = 3 * c.group(n); m0 < c.M; m0 += group, ticker.tick()) {
            const int64_t k = std::min(group, c.M - m0); // forward only: 3 times a training call's
            codes.narrow(0, r0, n).narrow(1, m0, k).copy_(c.log_weights(h, m0, k).argmax(-1));
        }
    }
    return codes;
}

// 0.5 ||sum_m A_m[c^m] - e||^2 averaged over the rows: what the returned codes rebuild.
double code_loss(const torch::Tensor& codes, const torch::Tensor& codebooks, const torch::Tensor& e)
{
    torch::NoGradGuard no_grad;
    const int64_t M = codebooks.size(0), K = codebooks.size(1), d = codebooks.size(2);
    const auto index = codes.to(torch::kLong) + torch::arange(M, torch::kLong) * K;
    const auto rebuilt =
        codebooks.detach().view({M * K, d}).index_select(0, index.reshape({-1})).view({-1, M, d}).sum(1);
    return 0.5 * (rebuilt - e).pow(2).sum(1).mean().item<double>();
}

void copy_params(const std::vector<torch::Tensor>& from, std::vector<torch::Tensor>& to, Ticker& ticker)
{
    torch::NoGradGuard no_grad;
    if (to.empty())
        for (const auto& p : from)
            to.push_back(torch::empty_like(p, torch::TensorOptions().requires_grad(false)));
    for (size_t i = 0; i < from.size(); ++i) {
        auto a = from[i].detach().view({from[i].size(0), -1}), b = to[i].view_as(a);
        row_blocks(a.size(0), a.size(1), ticker,
                   [&](int64_t r0, int64_t n) { b.narrow(0, r0, n).copy_(a.narrow(0, r0, n)); });
    }
}

// Scores the held-out rows' codes at `step`; the curve's first minimum is kept.
void score_checkpoint(const Coder& c, const torch::Tensor& heldout, int64_t step, int64_t rows, AqFit& fit,
                      std::vector<torch::Tensor>& best, Ticker& ticker)
{
    const double loss = code_loss(encode(c, heldout, rows, ticker), c.codebooks, heldout);
    fit.heldout_steps.push_back(step);
    fit.heldout_loss_curve.push_back(loss);
    if (best.empty() || loss < fit.best_heldout_loss) {
        fit.best_step = step, fit.best_heldout_loss = loss;
        copy_params(c.params(), best, ticker);
    }
}

struct Schedule {
    int64_t batch, every;           // rows a step, steps between scorings
    int64_t call_rows, encode_rows; // rows a call: training, encoding
};

// fit.steps Adam steps on clipped gradients; the held-out rows' codes are scored every
// `every` steps (and at the last) and the best parameters copied to `best`.
void train(const Coder& c, const torch::Tensor& target, const torch::Tensor& heldout, const AqOptions& o,
           const Schedule& s, at::Generator& gen, AqFit& fit, std::vector<torch::Tensor>& best,
           Ticker& ticker)
{
    const int64_t V = target.size(0), batch = s.batch;
    Adam adam{.lr = o.lr};
    fit.loss_curve.reserve(static_cast<size_t>(fit.steps));
    for (int64_t step = 1; step <= fit.steps; ++step) {
        const auto ids = torch::randint(V, {batch}, gen, torch::kLong);
        const auto u = torch::rand({batch, c.M, c.K}, gen).clamp(1e-10, 1.0 - 1e-7);
        for (const auto& p : c.params())
            p.mutable_grad() = torch::Tensor();
        const double loss = accumulate_step(c, target.index_select(0, ids), u, o.tau, s.call_rows, ticker);
        fit.loss_curve.push_back(methods::finite_loss(torch::tensor(loss), "aq", step));
        fit.grad_norms.push_back(clip_gradients(c.params(), o.clip));
        fit.clipped_steps += o.clip > 0 && fit.grad_norms.back() > o.clip;
        adam.step(c.params(), ticker);
        if (heldout.size(0) > 0 && (step % s.every == 0 || step == fit.steps))
            score_checkpoint(c, heldout, step, s.encode_rows, fit, best, ticker);
        ticker.step(step);
    }
}

} // namespace

double aq_training_bytes(int64_t V, int64_t d, const AqOptions& o)
{
    const int64_t MKi = o.codebooks * o.codewords, Hi = std::max<int64_t>(1, MKi / 2);
    const double MK = double(MKi), H = double(Hi);
    const double params = double(d) * H + H + H * MK + MK + MK * double(d);
    const double rows = double(std::min(o.batch, V)); // the step's rows and their noise
    const double call = double(std::min(rows_per_call(d, Hi, MKi, 2), V));
    // value, gradient, two moments, best copy; the table; noise; one call's activations.
    return 4 * (5 * params + double(V) * double(d) + rows * MK + call * (8 * MK + 3 * H + 3 * double(d)));
}

AqFit fit_additive_quantisation(const torch::Tensor& table, const AqOptions& o, const ProgressFn& progress)
{
    const auto t0 = Clock::now();
    if (table.dim() != 2 || table.size(0) < 1 || table.size(1) < 1)
        throw InputError("aq: the table must be a matrix with rows and columns");
    check_options(o);
    const int64_t V = table.size(0), d = table.size(1), M = o.codebooks, K = o.codewords;
    AqFit fit;
    fit.options = o;
    fit.estimated_bytes = aq_training_bytes(V, d, o);
    if (const double have = physical_bytes(); have > 0 && fit.estimated_bytes > 0.8 * have)
        throw InputError("aq: training M " + std::to_string(M) + ", K " + std::to_string(K) + " on a " +
                         std::to_string(V) + " x " + std::to_string(d) + " table needs about " +
                         gigabytes(fit.estimated_bytes) +
                         " (the encoder's M K / 2 x M K weights, Adam's state) " + "and this machine has " +
                         gigabytes(have) + ": use fewer codebooks or codewords");

    c10::InferenceMode no_inference(false); // callers may hold InferenceMode; this trains
    torch::AutoGradMode grad(true);
    auto target = table.to(torch::kFloat32).contiguous();
    methods::check_finite_rows(target);
    if (target.is_inference())
        target = target.clone();
    const int64_t H = std::max<int64_t>(1, M * K / 2); // the encoder's width, as the paper's
    const int64_t batch = std::min(o.batch, V), epoch = (V + batch - 1) / batch;
    fit.steps = o.steps > 0 ? o.steps : 200 * epoch;
    const int64_t every = o.eval_every > 0 ? o.eval_every : epoch;
    const int64_t call_rows = rows_per_call(d, H, M * K, 6), encode_rows = rows_per_call(d, H, M * K, 2);
    Ticker ticker{progress, fit.steps};
    ticker.step(0);

    auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
    Coder c = init_coder(target, o, H, gen, ticker);
    // Held-out rows from a generator of their own: the training's draws stay as without.
    auto holdout_gen = at::make_generator<at::CPUGeneratorImpl>(o.seed ^ 0x5eed'0001u);
    fit.holdout_ids = torch::randperm(V, holdout_gen, torch::kLong).narrow(0, 0, std::min(o.holdout, V));
    const auto heldout = target.index_select(0, fit.holdout_ids);
    std::vector<torch::Tensor> best;
    train(c, target, heldout, o,
          {.batch = batch, .every = every, .call_rows = call_rows, .encode_rows = encode_rows}, gen, fit,
          best, ticker);
    if (best.empty()) { // no held-out rows: the last step's
        fit.best_step = fit.steps;
        for (const auto& p : c.params())
            best.push_back(p.detach());
    }
    Coder kept{
        .M = M, .K = K, .w1 = best[0], .b1 = best[1], .w2 = best[2], .b2 = best[3], .codebooks = best[4]};
    fit.codes = encode(kept, target, encode_rows, ticker);
    fit.codebooks = kept.codebooks.clone();
    fit.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return fit;
}

torch::Tensor pack_aq_codes(const torch::Tensor& codes, int64_t codewords)
{
    const int64_t V = codes.size(0), M = codes.size(1), bits = code_bits(codewords);
    const int64_t row_bytes = (M * bits + 7) / 8;
    auto packed = torch::zeros({V, row_bytes}, torch::kUInt8);
    const auto c = codes.to(torch::kUInt8).contiguous();
    const uint8_t* from = c.data_ptr<uint8_t>();
    uint8_t* to = packed.data_ptr<uint8_t>();
    for (int64_t v = 0; v < V; ++v)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t b = 0; b < bits; ++b) {
                const int64_t at = m * bits + b; // bit `at` of the row, little-endian
                if ((from[v * M + m] >> b) & 1)
                    to[v * row_bytes + at / 8] |= static_cast<uint8_t>(1u << (at % 8));
            }
    return packed;
}

torch::Tensor unpack_aq_codes(const torch::Tensor& packed, int64_t codebooks, int64_t codewords)
{
    check_aq_sizes(codebooks, codewords, "aq codes");
    const int64_t V = packed.size(0), M = codebooks, bits = code_bits(codewords);
    const int64_t row_bytes = (M * bits + 7) / 8;
    if (packed.dim() != 2 || packed.scalar_type() != torch::kUInt8 || packed.size(1) != row_bytes)
        throw InputError("aq.codes must be uint8 [V, " + std::to_string(row_bytes) + "] (M = " +
                         std::to_string(M) + " codes of " + std::to_string(bits) + " bits a row)");
    auto codes = torch::zeros({V, M}, torch::kUInt8);
    const auto p = packed.contiguous();
    const uint8_t* from = p.data_ptr<uint8_t>();
    uint8_t* to = codes.data_ptr<uint8_t>();
    for (int64_t v = 0; v < V; ++v)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t b = 0; b < bits; ++b) {
                const int64_t at = m * bits + b;
                if ((from[v * row_bytes + at / 8] >> (at % 8)) & 1)
                    to[v * M + m] |= static_cast<uint8_t>(1u << b);
            }
    return codes;
}

AdditiveQuantisedTokenEmbedding::AdditiveQuantisedTokenEmbedding(torch::Tensor codes, torch::Tensor codebooks)
    : codes_(std::move(codes)), codebooks_(std::move(codebooks))
{
    if (codebooks_.dim() != 3 || codebooks_.scalar_type() != torch::kFloat32 || codebooks_.numel() == 0)
        throw InputError("aq.codebooks must be float32 [M, K, d]");
    const int64_t M = codebooks_.size(0), K = codebooks_.size(1);
    check_aq_sizes(M, K, "aq.codebooks");
    if (codes_.dim() != 2 || codes_.scalar_type() != torch::kUInt8 || codes_.size(1) != M ||
        codes_.size(0) < 1)
        throw InputError("aq codes must be uint8 [V, " + std::to_string(M) + "]");
    if (codes_.max().item<int64_t>() >= K)
        throw InputError("aq codes must each be below K = " + std::to_string(K) + ", found " +
                         std::to_string(codes_.max().item<int64_t>()));
    if (!torch::isfinite(codebooks_).all().item<bool>())
        throw InputError("aq.codebooks has NaN or Inf values");
    codebooks_ = codebooks_.contiguous();
}

torch::Tensor AdditiveQuantisedTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    const int64_t M = codebooks_.size(0), K = codebooks_.size(1), d = dim();
    const auto flat_ids = ids.reshape({-1}).to(torch::kLong);
    // Row m's codeword c is row m K + c of the codebooks viewed as [M K, d].
    const auto offsets = torch::arange(M, torch::kLong) * K;
    const auto rows = codes_.index_select(0, flat_ids).to(torch::kLong) + offsets;
    auto out = codebooks_.view({M * K, d}).index_select(0, rows.reshape({-1})).view({-1, M, d}).sum(1);
    auto shape = ids.sizes().vec();
    shape.push_back(d);
    return out.view(shape);
}

torch::Tensor AdditiveQuantisedTokenEmbedding::rebuilt_rows() const
{
    std::vector<torch::Tensor> blocks;
    for (int64_t v0 = 0; v0 < vocab_size(); v0 += 8192)
        blocks.push_back(lookup(torch::arange(v0, std::min<int64_t>(v0 + 8192, vocab_size()), torch::kLong)));
    return torch::cat(blocks, 0);
}

torch::Tensor AdditiveQuantisedTokenEmbedding::project(const torch::Tensor& hidden) const
{
    return torch::matmul(hidden, rebuilt_rows().t());
}

int64_t AdditiveQuantisedTokenEmbedding::parameter_count() const
{
    return codebooks_.numel() + codes_.numel();
}

// --- ONNX export (onnx_export.hpp) ------------------------------------------------

namespace {

// Every codebook's word index (m K + code) of flat ids [n] -> int64 [n, M], from the
// codes as a directory stores them: packed to log2 K bits each (pack_aq_codes, uint8
// [V, ceil(M log2 K / 8)]), unpacked with integer Div and Mod (a code may straddle two
// bytes).
std::string onnx_word_index(onnx::Graph& g, const torch::Tensor& codes, int64_t K, const std::string& flat)
{
    const int64_t M = codes.size(1), bits = code_bits(K), row_bytes = (M * bits + 7) / 8;
    const auto packed = g.initializer_once("embed.aq_codes", [&] { return pack_aq_codes(codes, K); });
    const auto rows = g.gather(packed, flat); // [n, row_bytes]
    std::string index;                        // [n, M]
    if (bits == 8) {
        index = g.cast(rows, onnx::kInt64);
    } else {
        // Code m holds bits m b .. m b + b - 1 of the row, little-endian.
        std::vector<int64_t> low(static_cast<size_t>(M)), high(low.size()), shift(low.size());
        bool straddles = false;
        for (int64_t m = 0; m < M; ++m) {
            const int64_t at = m * bits;
            low[static_cast<size_t>(m)] = at / 8;
            high[static_cast<size_t>(m)] = std::min(at / 8 + 1, row_bytes - 1);
            shift[static_cast<size_t>(m)] = int64_t{1} << (at % 8);
            straddles = straddles || at % 8 + bits > 8;
        }
        auto value = g.cast(g.gather(rows, g.ints(low), 1), onnx::kInt64);
        if (straddles) // the next byte above: bits past the code's are dropped by the Mod
            value =
                g.add(value, g.mul(g.cast(g.gather(rows, g.ints(high), 1), onnx::kInt64), g.int_scalar(256)));
        index = g.op("Mod", {g.div(value, g.ints(shift)), g.int_scalar(K)});
    }
    std::vector<int64_t> offsets(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m)
        offsets[static_cast<size_t>(m)] = m * K;
    return g.add(index, g.ints(offsets));
}

} // namespace

// The codes as stored (packed, onnx_word_index) and the codebooks [M K, d]; the
// looked-up rows' codewords gathered and summed as lookup() does.
std::string AdditiveQuantisedTokenEmbedding::onnx_lookup(onnx::Graph& g, const std::string& ids) const
{
    const int64_t M = codebooks_.size(0), K = codebooks_.size(1), d = dim();
    const auto index = onnx_word_index(g, codes_, K, g.reshape(ids, {-1}));
    const auto words = g.initializer("embed.aq_codebooks", codebooks_.view({M * K, d}));
    const auto rows = g.reduce_sum(g.gather(words, index), {1}, false); // [n, M, d] -> [n, d]
    return g.reshape_to(rows, g.concat({g.op("Shape", {ids}), g.ints({d})}, 0));
}

// The head without rebuilding the V rows: hidden times every codeword once ([m, M K]),
// then each token's logit is the sum of its M codewords' products, codebook by codebook
// (the same sums as project()'s, h . sum_m A_m[c] = sum_m h . A_m[c], rounded in another
// order). Rebuilt rows would cost V M d additions, and ONNX Runtime folds them into a
// constant when the session loads, holding the [V, M, d] codewords meanwhile.
std::string AdditiveQuantisedTokenEmbedding::onnx_project(onnx::Graph& g, const std::string& hidden) const
{
    const int64_t M = codebooks_.size(0), K = codebooks_.size(1), d = dim();
    const auto words = g.initializer("embed.aq_codebooks", codebooks_.view({M * K, d}));
    const auto products = g.op("Gemm", {hidden, words}, {{"transB", int64_t{1}}}); // [m, M K]
    const auto all =
        g.op("Range", {g.int_scalar(0), g.int_scalar(vocab_size()), g.int_scalar(1)}, {}, "all_ids");
    const auto index = onnx_word_index(g, codes_, K, all); // [V, M]
    std::string logits;
    for (int64_t m = 0; m < M; ++m) {
        const auto column = g.squeeze(g.gather(index, g.ints({m}), 1), {1}); // [V]
        const auto term = g.gather(products, column, 1);                     // [m, V]
        logits = logits.empty() ? term : g.add(logits, term);
    }
    return logits;
}

} // namespace embedlab
