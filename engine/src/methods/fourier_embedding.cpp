#include "embedlab/fourier_embedding.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adamw.h>

#include <chrono>
#include <cmath>
#include <numbers>
#include <numeric>
#include <random>

#include "embedlab/parallel_for.hpp"
#include "io/onnx_graph.hpp"
#include "methods/loss_check.hpp"
#include "methods/table_checks.hpp"

namespace embedlab {

namespace {

constexpr double kNormEps = 1e-6;
constexpr int64_t kBlock = 4096;

std::string shape_text(c10::IntArrayRef s)
{
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i)
        out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

torch::Tensor apply_mlp(const torch::Tensor& t, const FourierParams& p)
{
    if (p.mlp == FourierMlp::Linear)
        return torch::linear(t, p.w_in, p.b_in);
    const auto gv = torch::linear(t, p.w_in, p.b_in);
    const auto gate = gv.narrow(-1, 0, p.hidden), value = gv.narrow(-1, p.hidden, p.hidden);
    return torch::linear(torch::gelu(gate) * value, p.w_out, p.b_out);
}

torch::Tensor apply_all(const torch::Tensor& t, const FourierParams& p)
{
    auto e = t + apply_mlp(t, p);
    if (p.norm)
        e = e * torch::rsqrt(e.pow(2).mean(-1, /*keepdim=*/true) + kNormEps) * p.norm_weight;
    return e;
}

void check_ids(const torch::Tensor& ids, int64_t vocab)
{
    if (ids.numel() == 0)
        return;
    const auto lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= vocab)
        throw InputError("token id " + std::to_string(lo < 0 ? lo : hi) + " is outside the vocabulary 0.." +
                         std::to_string(vocab - 1));
}

// Full-table mean squared error and mean (1 - row cosine), block by block.
std::pair<double, double> table_losses(const torch::Tensor& table, const FourierParams& p)
{
    torch::NoGradGuard no_grad;
    const int64_t V = table.size(0);
    double se = 0, cos_loss = 0;
    for (int64_t v0 = 0; v0 < V; v0 += kBlock) {
        const int64_t n = std::min(kBlock, V - v0);
        const auto ids = torch::arange(v0, v0 + n, torch::kLong);
        const auto e = apply_all(fourier_features(ids, p.vocab, p.dim), p).to(torch::kDouble);
        const auto t = table.narrow(0, v0, n).to(torch::kDouble);
        se += (e - t).pow(2).sum().item<double>();
        cos_loss += (1 - torch::cosine_similarity(e, t, 1, 1e-12)).sum().item<double>();
    }
    return {se / static_cast<double>(V * p.dim), cos_loss / static_cast<double>(V)};
}

} // namespace

torch::Tensor fourier_features(const torch::Tensor& ids, int64_t vocab, int64_t dim)
{
    if (vocab < 2)
        throw InputError("Fourier features need a vocabulary of at least 2 tokens, got " +
                         std::to_string(vocab));
    if (dim < 1)
        throw InputError("Fourier features need a dimension of at least 1, got " + std::to_string(dim));
    const auto flat = ids.reshape({-1}).to(torch::kLong).contiguous();
    const int64_t n = flat.numel(), half = (dim + 1) / 2;
    auto out = torch::empty({n, dim}, torch::kFloat32);
    const int64_t* id = flat.data_ptr<int64_t>();
    float* o = out.data_ptr<float>();
    // float64 throughout: for a large V neighbouring ids differ by 2/(V-1) in x,
    // below float32's resolution once multiplied by the top frequency. sin and cos
    // of k theta come from the angle-addition recurrence, re-anchored with exact
    // sin/cos every 16 frequencies (error ~1e-15, far below float32's 6e-8): a
    // tied head needs all V x d features at every call, and tensor-op trig was
    // several times slower.
    at::parallel_for(0, n, 256, [&](int64_t first, int64_t last) {
        for (int64_t r = first; r < last; ++r) {
            const double x = static_cast<double>(2 * id[r]) / static_cast<double>(vocab - 1) - 1.0;
            const double theta = std::numbers::pi * x, s1 = std::sin(theta), c1 = std::cos(theta);
            double s = 0, c = 1;
            float* row = o + r * dim;
            for (int64_t j = 0; j < half; ++j) { // frequency j + 1 -> columns 2j (sin), 2j+1 (cos)
                if (j % 16 == 0) {
                    s = std::sin(static_cast<double>(j + 1) * theta);
                    c = std::cos(static_cast<double>(j + 1) * theta);
                } else {
                    const double next = s * c1 + c * s1;
                    c = c * c1 - s * s1;
                    s = next;
                }
                row[2 * j] = static_cast<float>(s);
                if (2 * j + 1 < dim)
                    row[2 * j + 1] = static_cast<float>(c);
            }
        }
    });
    auto sizes = ids.sizes().vec();
    sizes.push_back(dim);
    return out.reshape(sizes);
}

FourierTokenEmbedding::FourierTokenEmbedding(FourierParams params) : p_(std::move(params))
{
    if (p_.vocab < 2)
        throw InputError("fourier: the vocabulary must have at least 2 tokens, got " +
                         std::to_string(p_.vocab));
    if (p_.dim < 1)
        throw InputError("fourier: the dimension must be at least 1, got " + std::to_string(p_.dim));
    const int64_t d = p_.dim, h = p_.hidden;
    if (p_.mlp == FourierMlp::GeGLU && h < 1)
        throw InputError("fourier: the geglu hidden size must be at least 1, got " + std::to_string(h));
    auto check = [](torch::Tensor& t, const char* name, std::vector<int64_t> shape) {
        if (!t.defined())
            throw InputError(std::string("fourier: tensor '") + name + "' is missing");
        if (t.sizes().vec() != shape)
            throw InputError(std::string("fourier: tensor '") + name + "' has shape " +
                             shape_text(t.sizes()) + ", expected " + shape_text(shape));
        t = t.to(torch::kFloat32).contiguous();
    };
    if (p_.mlp == FourierMlp::Linear) {
        check(p_.w_in, "w_in", {d, d});
        check(p_.b_in, "b_in", {d});
        p_.hidden = 0;
    } else {
        check(p_.w_in, "w_in", {2 * h, d});
        check(p_.b_in, "b_in", {2 * h});
        check(p_.w_out, "w_out", {d, h});
        check(p_.b_out, "b_out", {d});
    }
    if (p_.norm)
        check(p_.norm_weight, "norm", {d});
}

torch::Tensor FourierTokenEmbedding::mlp(const torch::Tensor& features) const
{
    return apply_mlp(features, p_);
}

torch::Tensor FourierTokenEmbedding::rows_from_features(const torch::Tensor& features) const
{
    return apply_all(features, p_);
}

torch::Tensor FourierTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    check_ids(ids, p_.vocab);
    return apply_all(fourier_features(ids, p_.vocab, p_.dim), p_);
}

torch::Tensor FourierTokenEmbedding::rebuilt_rows() const
{
    if (p_.mlp == FourierMlp::Linear && !p_.norm)
        return {};
    c10::InferenceMode guard;
    auto rows = torch::empty({p_.vocab, p_.dim}, torch::kFloat32);
    for (int64_t v0 = 0; v0 < p_.vocab; v0 += kBlock) {
        const int64_t n = std::min(kBlock, p_.vocab - v0);
        rows.narrow(0, v0, n).copy_(
            apply_all(fourier_features(torch::arange(v0, v0 + n, torch::kLong), p_.vocab, p_.dim), p_));
    }
    return rows;
}

torch::Tensor FourierTokenEmbedding::project(const torch::Tensor& hidden) const
{
    const auto h = hidden.reshape({-1, p_.dim});
    const bool fold = p_.mlp == FourierMlp::Linear && !p_.norm;
    auto sizes = hidden.sizes().vec();
    sizes.back() = p_.vocab;
    if (torch::GradMode::is_enabled() && (h.requires_grad() || p_.w_in.requires_grad())) {
        // Training (train --embedding fourier, finetune of the MLP): one differentiable
        // product with all V rows; the blocks below write into slices of one tensor,
        // which autograd would replay as one copy of the whole logits per block.
        const auto features = fourier_features(torch::arange(p_.vocab, torch::kLong), p_.vocab, p_.dim);
        const auto logits = fold ? torch::addmm(torch::matmul(h, p_.b_in).unsqueeze(1),
                                                h + torch::matmul(h, p_.w_in), features.t())
                                 : torch::matmul(h, apply_all(features, p_).t());
        return logits.reshape(sizes);
    }
    auto logits = torch::empty({h.size(0), p_.vocab}, h.options());
    // linear without norm: h E^T = h (T + T W^T + 1 b^T)^T = (h + h W) T^T + h b,
    // so the V rows need only their features, not the MLP.
    const auto hw = fold ? h + torch::matmul(h, p_.w_in) : torch::Tensor();
    const auto hb = fold ? torch::matmul(h, p_.b_in).unsqueeze(1) : torch::Tensor();
    for (int64_t v0 = 0; v0 < p_.vocab; v0 += kBlock) {
        const int64_t n = std::min(kBlock, p_.vocab - v0);
        const auto ids = torch::arange(v0, v0 + n, torch::kLong);
        if (fold)
            logits.narrow(1, v0, n).copy_(torch::addmm(hb, hw, fourier_features(ids, p_.vocab, p_.dim).t()));
        else
            logits.narrow(1, v0, n).copy_(
                torch::matmul(h, apply_all(fourier_features(ids, p_.vocab, p_.dim), p_).t()));
    }
    return logits.reshape(sizes);
}

std::optional<TrainableCopy> FourierTokenEmbedding::trainable_shared_weights() const
{
    c10::InferenceMode no_inference(false);
    FourierParams p = p_;
    for (auto* t : p.learned())
        *t = t->detach().clone().requires_grad_(true);
    auto copy = std::make_shared<FourierTokenEmbedding>(std::move(p));
    const auto& q = copy->params(); // the tensors the copy holds
    return TrainableCopy{.embedding = copy,
                         .tensors = q.learned_tensors(),
                         .description =
                             std::string("the Fourier MLP (") +
                             (q.mlp == FourierMlp::GeGLU ? "w_in, b_in, w_out, b_out" : "w_in, b_in") +
                             (q.norm ? ", norm" : "") + ")"};
}

int64_t FourierTokenEmbedding::parameter_count() const
{
    int64_t n = p_.w_in.numel() + p_.b_in.numel();
    if (p_.mlp == FourierMlp::GeGLU)
        n += p_.w_out.numel() + p_.b_out.numel();
    if (p_.norm)
        n += p_.norm_weight.numel();
    return n;
}

int64_t FourierTokenEmbedding::flops_per_row() const
{
    const int64_t d = p_.dim, h = p_.hidden;
    int64_t f = d; // one sin or cos per feature
    if (p_.mlp == FourierMlp::Linear)
        f += 2 * d * d + d;
    else
        f += 2 * (2 * h) * d + 2 * h + 2 * h /* gelu, product */ + 2 * h * d + d;
    f += d; // residual
    if (p_.norm)
        f += 4 * d; // square, sum, scale, weight
    return f;
}

FourierFit fit_fourier_embedding(const torch::Tensor& table, const FourierOptions& o,
                                 const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    if (table.dim() != 2)
        throw InputError("the embedding table must be a matrix, got " + std::to_string(table.dim()) +
                         " dimensions");
    const int64_t V = table.size(0), d = table.size(1);
    if (V < 2 || d < 1)
        throw InputError("fourier: the table must have at least 2 rows and 1 column, got " +
                         shape_text(table.sizes()));
    if (o.steps < 1)
        throw InputError("fourier: steps must be at least 1, got " + std::to_string(o.steps));
    if (!(o.lr > 0) || !std::isfinite(o.lr))
        throw InputError("fourier: the learning rate must be a positive number, got " + std::to_string(o.lr));
    if (o.batch < 1)
        throw InputError("fourier: the batch (ids per step) must be at least 1, got " +
                         std::to_string(o.batch));
    if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
        throw InputError("fourier: weight decay must be 0 or more, got " + std::to_string(o.weight_decay));
    if (!(o.hidden_ratio > 0) || !std::isfinite(o.hidden_ratio))
        throw InputError("fourier: the hidden ratio must be positive, got " + std::to_string(o.hidden_ratio));
    if (o.loss != "mse" && o.loss != "cosine")
        throw InputError("fourier: unknown loss '" + o.loss + "' (use mse or cosine)");

    // Callers (the CLI, measure_reconstruction) may hold InferenceMode; training
    // needs autograd, and inference tensors cannot be saved for backward.
    c10::InferenceMode no_inference(false);
    torch::AutoGradMode grad(true);
    auto target = table.to(torch::kFloat32).contiguous();
    methods::check_finite_rows(target);
    if (target.is_inference())
        target = target.clone();

    FourierFit fit;
    fit.options = o;
    auto& p = fit.params;
    p.mlp = o.mlp;
    p.vocab = V;
    p.dim = d;
    p.norm = o.norm;
    p.hidden = o.mlp == FourierMlp::GeGLU ? fourier_hidden_size(d, o.hidden_ratio) : 0;

    // torch::nn::Linear's default initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    // from a generator of our own so that the global one is left alone.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
    auto uniform = [&](std::vector<int64_t> shape, int64_t fan_in) {
        const double b = 1.0 / std::sqrt(static_cast<double>(fan_in));
        auto t = torch::empty(shape, torch::kFloat32);
        t.uniform_(-b, b, gen);
        return t.requires_grad_(true);
    };
    const int64_t width = p.mlp == FourierMlp::Linear ? d : 2 * p.hidden;
    p.w_in = uniform({width, d}, d);
    p.b_in = uniform({width}, d);
    std::vector<torch::Tensor> decay{p.w_in}, no_decay{p.b_in};
    if (p.mlp == FourierMlp::GeGLU) {
        p.w_out = uniform({d, p.hidden}, p.hidden);
        p.b_out = uniform({d}, p.hidden);
        decay.push_back(p.w_out);
        no_decay.push_back(p.b_out);
    }
    if (p.norm) {
        p.norm_weight = torch::ones({d}, torch::kFloat32).requires_grad_(true);
        no_decay.push_back(p.norm_weight);
    }
    const auto [mse0, cosine0] = table_losses(target, p);
    fit.initial_loss = o.loss == "mse" ? mse0 : cosine0;

    // Weight decay on the matrices only; biases and the norm weight are not shrunk.
    using torch::optim::AdamWOptions;
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay,
                        std::make_unique<AdamWOptions>(AdamWOptions(o.lr).weight_decay(o.weight_decay)));
    groups.emplace_back(no_decay, std::make_unique<AdamWOptions>(AdamWOptions(o.lr).weight_decay(0)));
    torch::optim::AdamW optimizer(std::move(groups), AdamWOptions(o.lr).weight_decay(o.weight_decay));

    // Batches walk a seeded shuffle of all ids (an explicit Fisher-Yates: std::shuffle
    // differs between standard libraries, and the fit must replay exactly).
    std::mt19937_64 rng(o.seed);
    std::vector<int64_t> order(static_cast<size_t>(V));
    for (int64_t v = 0; v < V; ++v)
        order[static_cast<size_t>(v)] = v;
    auto shuffle = [&] {
        for (size_t i = order.size() - 1; i > 0; --i)
            std::swap(order[i], order[static_cast<size_t>(rng() % (i + 1))]);
    };
    const int64_t batch = std::min(o.batch, V);
    int64_t cursor = V; // shuffle before the first batch
    fit.loss_curve.reserve(static_cast<size_t>(o.steps));
    for (int64_t step = 1; step <= o.steps; ++step) {
        if (cursor + batch > V) {
            shuffle();
            cursor = 0;
        }
        const auto ids = torch::from_blob(order.data() + cursor, {batch}, torch::kLong).clone();
        cursor += batch;
        const auto e = apply_all(fourier_features(ids, V, d), p);
        const auto t = target.index_select(0, ids);
        const auto loss =
            o.loss == "mse" ? (e - t).pow(2).mean() : (1 - torch::cosine_similarity(e, t, 1, 1e-8)).mean();
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        const double value = methods::finite_loss(loss, "fourier", step);
        fit.loss_curve.push_back({step, value});
        report_progress(progress, step, o.steps);
    }

    // The stored parameters: plain tensors, no autograd history.
    for (auto* t : p.learned())
        *t = t->detach().clone();
    const auto [mse, cosine] = table_losses(target, p);
    fit.final_mse = mse;
    fit.final_loss = o.loss == "mse" ? mse : cosine;
    fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return fit;
}

// --- ONNX export (onnx_export.hpp) ------------------------------------------------

namespace {

constexpr int64_t kOnnxDouble = 11; // TensorProto.DOUBLE, for Cast

// fourier_features() of flat ids [n] in the graph -> [n, d] float32: x and the angles
// in float64 as there (sin and cos taken directly rather than by its recurrence, which
// agrees within 1e-15). pi is the sum of three float32 constants, exactly the double.
std::string onnx_features(onnx::Graph& g, const std::string& flat, int64_t vocab, int64_t dim)
{
    const int64_t half = (dim + 1) / 2;
    auto as_double = [&](const std::string& x) { return g.cast(x, kOnnxDouble); };
    const double pi = std::numbers::pi;
    const float pi_hi = static_cast<float>(pi), pi_mid = static_cast<float>(pi - pi_hi),
                pi_lo = static_cast<float>(pi - pi_hi - pi_mid);
    if ((static_cast<double>(pi_hi) + pi_mid) + pi_lo != pi)
        throw InputError("ONNX export: pi is not the sum of three float32 values here");
    const auto pi_d =
        g.add(g.add(as_double(g.scalar(pi_hi)), as_double(g.scalar(pi_mid))), as_double(g.scalar(pi_lo)));
    // x = 2p / (V - 1) - 1, theta = pi x
    const auto x = g.sub(g.div(as_double(g.mul(flat, g.int_scalar(2))), as_double(g.int_scalar(vocab - 1))),
                         as_double(g.scalar(1)));
    const auto theta = g.unsqueeze(g.mul(pi_d, x), {1}); // [n, 1]
    std::vector<int64_t> frequencies(static_cast<size_t>(half));
    std::iota(frequencies.begin(), frequencies.end(), int64_t{1});
    const auto angle = g.mul(theta, as_double(g.ints(frequencies))); // [n, half]: frequency j + 1
    // Columns 2j (sin) and 2j + 1 (cos), each rounded to float32 as soon as it is taken.
    auto column = [&](const char* op) { return g.unsqueeze(g.cast(g.op(op, {angle}), onnx::kFloat), {2}); };
    auto t = g.reshape(g.concat({column("Sin"), column("Cos")}, 2), {-1, 2 * half});
    return 2 * half == dim ? t : g.slice(t, {0}, {dim}, {1});
}

std::string onnx_linear(onnx::Graph& g, const std::string& x, const torch::Tensor& w, const torch::Tensor& b,
                        const std::string& name)
{
    return g.op(
        "Gemm",
        {x, g.initializer("embed." + name + ".weight", w), g.initializer("embed." + name + ".bias", b)},
        {{"transB", int64_t{1}}});
}

// apply_all(): T + MLP(T), then the RMSNorm when enabled; features [n, d].
std::string onnx_rows(onnx::Graph& g, const std::string& t, const FourierParams& p)
{
    std::string mlp;
    if (p.mlp == FourierMlp::Linear) {
        mlp = onnx_linear(g, t, p.w_in, p.b_in, "fourier_in");
    } else {
        const auto gv = onnx_linear(g, t, p.w_in, p.b_in, "fourier_in");
        const auto gate = g.slice(gv, {0}, {p.hidden}, {1}),
                   value = g.slice(gv, {p.hidden}, {2 * p.hidden}, {1});
        // gelu, the exact form: (x / 2) (1 + erf(x / sqrt 2)), as torch computes it.
        const auto erf = g.op("Erf", {g.mul(gate, g.scalar(static_cast<float>(M_SQRT1_2)))});
        const auto gelu = g.mul(g.mul(gate, g.scalar(0.5f)), g.add(g.scalar(1), erf));
        mlp = onnx_linear(g, g.mul(gelu, value), p.w_out, p.b_out, "fourier_out");
    }
    auto e = g.add(t, mlp);
    if (p.norm) {
        const auto mean =
            g.op("ReduceMean", {g.mul(e, e)}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}});
        const auto inverse =
            g.op("Reciprocal", {g.op("Sqrt", {g.add(mean, g.scalar(static_cast<float>(kNormEps)))})});
        e = g.mul(g.mul(e, inverse), g.initializer("embed.fourier_norm", p.norm_weight));
    }
    return e;
}

} // namespace

// Nothing but the MLP (and norm) is stored: the features are computed from the ids.
std::string FourierTokenEmbedding::onnx_lookup(onnx::Graph& g, const std::string& ids) const
{
    const auto rows = onnx_rows(g, onnx_features(g, g.reshape(ids, {-1}), p_.vocab, p_.dim), p_);
    return g.reshape_to(rows, g.concat({g.op("Shape", {ids}), g.ints({p_.dim})}, 0));
}

// As project(): linear without norm folds the MLP into the hidden states,
// (h + h W) T^T + h b, needing only the V rows' features; otherwise every row is built.
std::string FourierTokenEmbedding::onnx_project(onnx::Graph& g, const std::string& hidden) const
{
    if (p_.mlp != FourierMlp::Linear || p_.norm)
        return TokenEmbedding::onnx_project(g, hidden);
    const auto all = g.op("Range", {g.int_scalar(0), g.int_scalar(p_.vocab), g.int_scalar(1)}, {}, "all_ids");
    const auto features = onnx_features(g, all, p_.vocab, p_.dim); // [V, d]
    const auto hw = g.add(hidden, g.matmul(hidden, g.initializer("embed.fourier_in.weight", p_.w_in)));
    const auto hb =
        g.matmul(hidden, g.unsqueeze(g.initializer("embed.fourier_in.bias", p_.b_in), {1})); // [m, 1]
    return g.op("Gemm", {hw, features, hb}, {{"transB", int64_t{1}}});
}

} // namespace embedlab
