// Compression runs and Tensor-Train candidates for the workbench (analyses.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "analyses.hpp"
#include "analyses_internal.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/compressed_model.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/finetune.hpp"
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

// How many of the evaluation text's ids a row's perplexity is measured on.
int64_t evaluated_count(int64_t text_ids, int64_t eval_tokens)
{
    return eval_tokens > 0 ? std::min(text_ids, eval_tokens) : text_ids;
}

} // namespace

namespace detail {

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

void check_replaceable(const std::string& out_dir, bool overwrite)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(out_dir, ec)))
        return;
    if (!overwrite)
        throw InputError(out_dir + ": already exists (confirm replacing it, or choose another directory)");
    // Replacing removes the old directory: never anything but a model we wrote.
    if (!fs::is_regular_file(fs::path(out_dir) / "embedlab.json", ec))
        throw InputError(out_dir +
                         ": is not an EmbedLab compressed model (no embedlab.json); not replacing it");
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
    const CompressionSpec spec = detail::embedding_spec(request, lm, model);
    auto ids = lm.tokenizer->encode(read_text_file(text));
    ids.resize(static_cast<size_t>(evaluated_count(static_cast<int64_t>(ids.size()), request.eval_tokens)));
    const bool lora = request.lora_rank > 0;
    // Before the fit: a training text that cannot serve should fail in a second.
    std::optional<detail::RecoveryTraining> training;
    if (lora)
        training =
            detail::recovery_training(*lm.tokenizer, m, request, text, static_cast<int64_t>(ids.size()));
    const PerplexityOptions options{.ctx = std::min<int64_t>(128, m.max_context())};
    // Progress: the original's evaluation (unless known), the fit, LoRA training, the compressed evaluation.
    const int64_t w_original = lora ? 150 : 300, w_fit = lora ? 250 : 400, w_train = lora ? 400 : 0;
    const int64_t w_eval = 1000 - w_original - w_fit - w_train;
    const std::string key = model + "\n" + text + "\n" + std::to_string(ids.size());
    const double original_ppl = detail::original_perplexity(
        key, [&] { return evaluate_perplexity(m, ids, options, stage(progress, 0, w_original, 1000)).ppl; });
    const torch::Tensor table = dense_table(m, model); // a handle: the model drops its dense table next
    const auto c = compress_table(table, spec, m.parameter_breakdown().total(),
                                  stage(progress, w_original, w_fit, 1000));
    m.set_token_embedding(c.embedding);

    CompressionRun r;
    r.method = spec.method;
    r.parameters = detail::parameters_text(c);
    r.params_before = c.accounting.params_before;
    r.params_after = c.accounting.params_after;
    r.mean_cosine = c.reconstruction.mean_cosine;
    if (lora) {
        const auto recovery = detail::recover_with_lora(m, *training, request,
                                                        stage(progress, w_original + w_fit, w_train, 1000));
        r.parameters += detail::recovery_parameters(request);
        // METHODS 0: unmerged adapters are stored values (an export keeps them beside the table).
        r.params_after += recovery.adapter_params;
        r.mean_cosine = measure_reconstruction(table, m.token_embedding()).mean_cosine; // rows with dZ, dP
    }
    const auto compressed =
        evaluate_perplexity(m, ids, options, stage(progress, 1000 - w_eval, w_eval, 1000));
    r.ratio = static_cast<double>(r.params_after) / static_cast<double>(r.params_before);
    r.ppl_original = original_ppl;
    r.ppl = compressed.ppl;
    r.delta_ln_ppl = std::log(compressed.ppl) - std::log(original_ppl); // TensorSLM eq. 12
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.host = host_name();
    return r;
}

namespace {

// A LoRA row as `embedlab-cli finetune` writes it: the compressed model first
// (the finetuned directory takes its support files and manifest from it), then
// the row's seeded training redone in memory, its adapters stored unmerged.
void save_recovered(LoadedModel& lm, const CompressedEmbedding& c, const CompressionRequest& request,
                    const std::filesystem::path& dir, const ProgressFn& progress)
{
    auto& m = *lm.model;
    // The row's evaluation text: its evaluated ids were not trained on, so they are not here either.
    const std::string eval_text = detail::text_or_default(request.eval_text);
    const auto eval_ids = static_cast<int64_t>(lm.tokenizer->encode(read_text_file(eval_text)).size());
    const auto training = detail::recovery_training(*lm.tokenizer, m, request, eval_text,
                                                    evaluated_count(eval_ids, request.eval_tokens));
    const auto base_dir = dir / "compressed";
    save_compressed_model(lm, c, base_dir, {}, stage(progress, 0, 100, 1000));
    m.set_token_embedding(c.embedding);
    const auto recovery = detail::recover_with_lora(m, training, request, stage(progress, 100, 700, 1000));
    auto base = load_model(base_dir, {.need_tokenizer = false});
    attach_lora(*base.model, m.shared_lora()); // the trained adapters on the table as stored
    auto manifest = save_finetuned_model(
        base, *base.model, dir,
        {.overwrite = true, .lora = recovery.record["lora"], .finetune = recovery.record},
        stage(progress, 800, 200, 1000));
    // The intermediate directory went with the swap: record where the table came from instead.
    manifest["finetuned_from"] = {
        {"model", std::filesystem::absolute(lm.files.path).lexically_normal().string()},
        {"compressed", c.spec.method + " " + detail::parameters_text(c)},
        {"note", "compressed and fine-tuned in one workbench export"}};
    write_file_atomic(dir / "embedlab.json", manifest.dump(1) + "\n");
}

} // namespace

std::string export_compressed(const std::string& model, const CompressionRequest& request,
                              const std::string& out_dir, bool dense, bool overwrite,
                              const ProgressFn& progress)
{
    if (request.method == "flat")
        return detail::flat_export(model, request, out_dir, dense, overwrite, progress);
    const bool lora = request.lora_rank > 0;
    if (lora && dense)
        throw InputError(out_dir + ": a LoRA row is written with its adapters stored beside the table, as "
                                   "embedlab-cli finetune writes it; it has no dense/ export");
    // Before the fit: a taken name should fail in a second, not after the work.
    detail::check_replaceable(out_dir, overwrite);
    // Also checks the parent; removed again unless committed.
    AtomicDirectory out(out_dir, overwrite);
    report_progress(progress, 0, 1000);
    auto lm = load_model(model, {.need_tokenizer = lora || request.method == "lle"});
    auto& m = *lm.model;
    const CompressionSpec spec = detail::embedding_spec(request, lm, model);
    const int64_t w_fit = lora ? 300 : 600;
    const auto c = compress_table(dense_table(m, model), spec, m.parameter_breakdown().total(),
                                  stage(progress, 0, w_fit, 1000));
    // The engine's writers publish their directory by the time they return; writing
    // inside ours keeps a cancel possible until our commit, the last step.
    if (lora)
        save_recovered(lm, c, request, out.path(), stage(progress, w_fit, 1000 - w_fit, 1000));
    else
        save_compressed_model(lm, c, out.path(), {.dense = dense, .overwrite = true},
                              stage(progress, w_fit, 1000 - w_fit, 1000));
    report_progress(progress, 1000, 1000);
    out.commit();
    return c.spec.method + " " + detail::parameters_text(c) +
           (lora ? detail::recovery_parameters(request) : "");
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
