#include "embedlab/additive_quantisation.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/activation.h>
#include <torch/optim/adam.h>

#include <bit>
#include <chrono>
#include <cmath>

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

} // namespace

AqFit fit_additive_quantisation(const torch::Tensor& table, const AqOptions& o, const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    if (table.dim() != 2 || table.size(0) < 1 || table.size(1) < 1)
        throw InputError("aq: the table must be a matrix with rows and columns");
    check_aq_sizes(o.codebooks, o.codewords, "aq");
    if (o.steps < 1)
        throw InputError("aq: steps must be at least 1, got " + std::to_string(o.steps));
    if (!(o.lr > 0) || !std::isfinite(o.lr))
        throw InputError("aq: the learning rate must be a positive number, got " + std::to_string(o.lr));
    if (o.batch < 1)
        throw InputError("aq: the batch (rows per step) must be at least 1, got " + std::to_string(o.batch));
    if (!(o.tau > 0) || !std::isfinite(o.tau))
        throw InputError("aq: the temperature must be a positive number, got " + std::to_string(o.tau));

    c10::InferenceMode no_inference(false); // callers may hold InferenceMode; this trains
    torch::AutoGradMode grad(true);
    auto target = table.to(torch::kFloat32).contiguous();
    methods::check_finite_rows(target);
    if (target.is_inference())
        target = target.clone();
    const int64_t V = target.size(0), d = target.size(1), M = o.codebooks, K = o.codewords;
    const int64_t H = std::max<int64_t>(1, M * K / 2); // the encoder's width, as the paper's

    // Linear layers at torch's default initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    // and codebooks N(0, s^2 / M) with s the table's standard deviation (so a sum of M
    // codewords starts at the table's scale), all from a generator of our own.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
    auto uniform = [&](std::vector<int64_t> shape, int64_t fan_in) {
        const double b = 1.0 / std::sqrt(static_cast<double>(fan_in));
        return torch::empty(shape, torch::kFloat32).uniform_(-b, b, gen).requires_grad_(true);
    };
    auto w1 = uniform({d, H}, d), b1 = uniform({H}, d);
    auto w2 = uniform({H, M * K}, H), b2 = uniform({M * K}, H);
    const double scale = target.std().item<double>() / std::sqrt(static_cast<double>(M));
    auto codebooks =
        (torch::empty({M, K, d}, torch::kFloat32).normal_(0, 1, gen) * scale).requires_grad_(true);
    torch::optim::Adam optimizer({w1, b1, w2, b2, codebooks}, torch::optim::AdamOptions(o.lr));

    auto log_weights = [&](const torch::Tensor& e) { // log a: [n, M, K]
        const auto h = torch::tanh(torch::addmm(b1, e, w1));
        return torch::log(torch::nn::functional::softplus(torch::addmm(b2, h, w2)) + 1e-8).view({-1, M, K});
    };

    AqFit fit;
    fit.options = o;
    const int64_t batch = std::min(o.batch, V);
    fit.loss_curve.reserve(static_cast<size_t>(o.steps));
    for (int64_t step = 1; step <= o.steps; ++step) {
        const auto ids = torch::randint(V, {batch}, gen, torch::kLong);
        const auto e = target.index_select(0, ids);
        const auto u = torch::rand({batch, M, K}, gen).clamp(1e-10, 1.0 - 1e-7);
        const auto gumbel = -torch::log(-torch::log(u));
        const auto y = torch::softmax((log_weights(e) + gumbel) / o.tau, -1);
        const auto rebuilt = torch::einsum("bmk,mkd->bd", {y, codebooks});
        const auto loss = 0.5 * (rebuilt - e).pow(2).sum(1).mean();
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        fit.loss_curve.push_back(methods::finite_loss(loss, "aq", step));
        report_progress(progress, step, o.steps);
    }

    // Discrete codes: each codebook's most likely codeword, every row, without noise.
    torch::NoGradGuard no_grad;
    auto codes = torch::empty({V, M}, torch::kUInt8);
    for (int64_t v0 = 0; v0 < V; v0 += 8192) {
        const int64_t n = std::min<int64_t>(8192, V - v0);
        codes.narrow(0, v0, n).copy_(log_weights(target.narrow(0, v0, n)).argmax(-1).to(torch::kUInt8));
    }
    fit.codes = codes;
    fit.codebooks = codebooks.detach().clone();
    fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
