// Compression runs and Tensor-Train candidates for the workbench (analyses.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>

#include "analyses.hpp"
#include "analyses_internal.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/compressed_model.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/model.hpp"

namespace embedlab::app {

namespace {

const torch::Tensor& dense_table(const LanguageModel& model, const std::string& label)
{
    const auto* dense = dynamic_cast<const DenseTokenEmbedding*>(&model.token_embedding());
    if (!dense)
        throw InputError(label + ": the token embedding is already compressed (" +
                         model.token_embedding().kind() + "); open the original model");
    return dense->table();
}

// The most balanced 3-factor shape of d: smallest largest factor, then largest
// smallest factor (8x8x12 for 768, 4x4x8 for 128).
std::vector<int64_t> balanced_shape(int64_t d, const std::string& label)
{
    auto shapes = tt_shapes(d, 3);
    if (shapes.empty())
        throw InputError(label + ": d = " + std::to_string(d) + " has no 3-factor shape for tt");
    auto spread = [](const std::vector<int64_t>& s) {
        const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
        return std::pair(*hi, -*lo);
    };
    return *std::min_element(shapes.begin(), shapes.end(),
                             [&](const auto& a, const auto& b) { return spread(a) < spread(b); });
}

std::string number(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

std::string joined(const std::vector<int64_t>& v, const char* sep)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0)
            s += sep;
        s += std::to_string(v[i]);
    }
    return s;
}

// The engine's spec for a workbench request, checked against the model's d.
CompressionSpec spec_of(const CompressionRequest& request, int64_t d, const std::string& label)
{
    CompressionSpec spec;
    spec.method = request.method;
    if (request.method == "pca" || request.method == "svd") {
        if (request.rank < 1 || request.rank > d)
            throw InputError(label + ": rank " + std::to_string(request.rank) + " outside 1.." +
                             std::to_string(d));
        spec.rank = request.rank;
    } else if (request.method == "tt") {
        if (!(request.eps > 0 && request.eps < 1))
            throw InputError(label + ": tt eps must lie strictly between 0 and 1");
        spec.shape = balanced_shape(d, label);
        spec.eps = request.eps;
    } else {
        throw InputError(label + ": the workbench runs pca, svd or tt, not '" + request.method + "'");
    }
    return spec;
}

// What the results table shows in "parameters" (the fitted TT ranks included).
std::string parameters_text(const CompressedEmbedding& c)
{
    if (c.spec.method == "tt")
        return "shape " + joined(c.spec.shape, "x") + ", eps " + number(c.spec.eps) + ", ranks " +
               joined(c.spec.ranks, ",");
    return "rank " + std::to_string(c.spec.rank);
}

} // namespace

namespace detail {

std::string host_name()
{
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0)
        return "localhost";
    return buf;
}

ProgressFn stage(const ProgressFn& progress, int64_t offset, int64_t weight, int64_t total)
{
    if (!progress)
        return {};
    return [=](int64_t done, int64_t of) {
        const int64_t part = of > 0 ? weight * done / of : 0;
        return progress(offset + part, total);
    };
}

// Original-model perplexities by model, text and length (jobs run one at a time,
// but the lock keeps this safe for any caller).
std::mutex baseline_mutex;
std::map<std::string, double> baseline_ppl;

double original_perplexity(const std::string& key, const std::function<double()>& compute)
{
    {
        std::lock_guard lock(baseline_mutex);
        if (auto it = baseline_ppl.find(key); it != baseline_ppl.end())
            return it->second;
    }
    const double ppl = compute(); // unlocked: a cancel or error caches nothing
    std::lock_guard lock(baseline_mutex);
    baseline_ppl[key] = ppl;
    return ppl;
}

std::string text_or_default(const std::string& text)
{
    return text.empty() ? default_sample_text() : text;
}

} // namespace detail

using detail::host_name;
using detail::stage;

CompressionRun compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                     const std::string& text, const ProgressFn& progress)
{
    if (!request.host.empty())
        return detail::remote_compress_and_evaluate(model, request, text, progress);
    if (request.method == "flat")
        return detail::flat_compress_and_evaluate(model, request, text, progress);
    const auto start = std::chrono::steady_clock::now();
    auto lm = load_model(model);
    auto& m = *lm.model;
    const CompressionSpec spec = spec_of(request, m.config().hidden_size, model);
    auto ids = lm.tokenizer->encode(read_text_file(text));
    if (request.eval_tokens > 0 && static_cast<int64_t>(ids.size()) > request.eval_tokens)
        ids.resize(static_cast<size_t>(request.eval_tokens));
    const PerplexityOptions options{.ctx = std::min<int64_t>(128, m.max_context())};
    // Progress: the original's evaluation 30% (unless known), fit 40%, compressed 30%.
    const std::string key = model + "\n" + text + "\n" + std::to_string(ids.size());
    const double original_ppl = detail::original_perplexity(
        key, [&] { return evaluate_perplexity(m, ids, options, stage(progress, 0, 300, 1000)).ppl; });
    const auto c = compress_table(dense_table(m, model), spec, m.parameter_breakdown().total(),
                                  stage(progress, 300, 400, 1000));
    m.set_token_embedding(c.embedding);
    const auto compressed = evaluate_perplexity(m, ids, options, stage(progress, 700, 300, 1000));

    CompressionRun r;
    r.method = spec.method;
    r.parameters = parameters_text(c);
    r.params_before = c.accounting.params_before;
    r.params_after = c.accounting.params_after;
    r.ratio = c.accounting.ratio;
    r.ppl_original = original_ppl;
    r.ppl = compressed.ppl;
    r.delta_ln_ppl = std::log(compressed.ppl) - std::log(original_ppl); // TensorSLM eq. 12
    r.mean_cosine = c.reconstruction.mean_cosine;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.host = host_name();
    return r;
}

std::string export_compressed(const std::string& model, const CompressionRequest& request,
                              const std::string& out_dir, bool dense, bool overwrite,
                              const ProgressFn& progress)
{
    if (request.method == "flat")
        return detail::flat_export(model, request, out_dir, dense, overwrite, progress);
    namespace fs = std::filesystem;
    std::error_code ec;
    // Before the fit: a taken name should fail in a second, not after the work.
    if (fs::exists(fs::symlink_status(out_dir, ec))) {
        if (!overwrite)
            throw InputError(out_dir +
                             ": already exists (confirm replacing it, or choose another directory)");
        // Replacing removes the old directory: never anything but a model we wrote.
        if (!fs::is_regular_file(fs::path(out_dir) / "embedlab.json", ec))
            throw InputError(out_dir +
                             ": is not an EmbedLab compressed model (no embedlab.json); not replacing it");
    }
    // Also checks the parent; removed again unless committed.
    AtomicDirectory out(out_dir, overwrite);
    report_progress(progress, 0, 1000);
    auto lm = load_model(model, {.need_tokenizer = false});
    auto& m = *lm.model;
    const CompressionSpec spec = spec_of(request, m.config().hidden_size, model);
    const auto c = compress_table(dense_table(m, model), spec, m.parameter_breakdown().total(),
                                  stage(progress, 0, 600, 1000));
    // The engine's writer publishes its directory by the time it returns; writing it
    // inside ours keeps a cancel possible until our commit, the last step.
    save_compressed_model(lm, c, out.path(), {.dense = dense, .overwrite = true},
                          stage(progress, 600, 400, 1000));
    report_progress(progress, 1000, 1000);
    out.commit();
    return c.spec.method + " " + parameters_text(c);
}

void check_request(const CompressionRequest& request, int64_t d)
{
    if (request.method != "flat")
        spec_of(request, d, "request");
}

void write_file(const std::string& path, const std::string& bytes)
{
    write_file_atomic(path, bytes);
}

TensorTrainResult tensor_train_candidates(const std::string& model, const std::vector<double>& eps,
                                          int max_shapes, const ProgressFn& progress)
{
    auto lm = load_model(model, {.need_tokenizer = false});
    const auto& table = dense_table(*lm.model, model);
    TensorTrainResult r;
    r.vocab = table.size(0);
    r.dim = table.size(1);
    std::vector<std::vector<int64_t>> shapes;
    for (int n : {2, 3})
        for (auto& s : tt_shapes(r.dim, n))
            if (std::all_of(s.begin(), s.end(), [](int64_t f) { return f >= 4; })) // tiny factors: no savings
                shapes.push_back(s);
    if (static_cast<int>(shapes.size()) > max_shapes)
        shapes.resize(static_cast<size_t>(max_shapes));
    const int64_t total = static_cast<int64_t>(shapes.size() * eps.size());
    int64_t done = 0;
    for (const auto& shape : shapes)
        for (double e : eps) {
            CompressionSpec spec{.method = "tt", .shape = shape, .eps = e};
            const auto c = compress_table(table, spec, 0, stage(progress, done, 1, total));
            ++done;
            TensorTrainCandidate t;
            t.shape = shape;
            t.ranks = c.spec.ranks;
            t.eps = e;
            t.ratio = c.accounting.ratio;
            t.params_after = c.accounting.params_after;
            t.relative_error = c.reconstruction.relative_frobenius;
            t.mean_cosine = c.reconstruction.mean_cosine;
            t.svd_rank = c.accounting.svd_equal_size_rank;
            const auto& en = c.accounting.energy;
            t.energy_original = en.original_nu + en.original_tau;
            t.energy_tt = en.compressed_nu + en.compressed_tau;
            const auto& sv = c.accounting.svd_equal_size_energy;
            t.energy_svd = sv.compressed_nu + sv.compressed_tau;
            const EnergyOptions weights; // the weights compress_table used
            t.accesses_original = en.original_nu / weights.nu;
            t.operations_original = en.original_tau / weights.tau;
            t.accesses_tt = en.compressed_nu / weights.nu;
            t.operations_tt = en.compressed_tau / weights.tau;
            t.accesses_svd = sv.compressed_nu / weights.nu;
            t.operations_svd = sv.compressed_tau / weights.tau;
            r.candidates.push_back(t);
        }
    return r;
}

} // namespace embedlab::app
