// Compression runs and Tensor-Train candidates for the workbench (analyses.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <list>
#include <mutex>
#include <optional>

#include "analyses.hpp"
#include "analyses_internal.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/compressed_model.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/model.hpp"
#include "embedlab/model_files.hpp"
#include "embedlab/pipeline.hpp"
#include "embedlab/table_method.hpp"
#include "embedlab/tensor_train.hpp"

namespace embedlab::app {

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

} // namespace detail

using detail::host_name;
using detail::stage;

namespace {

ExperimentProgressFn one_bar(const ProgressFn& progress)
{
    if (!progress)
        return {};
    return [progress](const ExperimentProgress& p) {
        return progress(static_cast<int64_t>(1000 * p.overall), 1000);
    };
}

// The latest runs, kept in memory so that exporting a row writes the model it
// measured without fitting again (each holds a whole model: only a few are kept).
std::mutex kept_mutex;
std::list<std::pair<std::string, std::shared_ptr<const embedlab::CompressionRun>>> kept;
constexpr size_t kKeptRuns = 3;

std::string run_key(const embedlab::CompressionRequest& e)
{
    return request_json(e).dump();
}

void keep(const embedlab::CompressionRequest& e, std::shared_ptr<const embedlab::CompressionRun> run)
{
    std::lock_guard lock(kept_mutex);
    const auto key = run_key(e);
    kept.remove_if([&](const auto& k) { return k.first == key; });
    kept.emplace_front(key, std::move(run));
    while (kept.size() > kKeptRuns)
        kept.pop_back();
}

std::shared_ptr<const embedlab::CompressionRun> kept_run(const embedlab::CompressionRequest& e)
{
    std::lock_guard lock(kept_mutex);
    for (const auto& [key, run] : kept)
        if (key == run_key(e))
            return run;
    return nullptr;
}

} // namespace

std::shared_ptr<const embedlab::CompressionRun> detail::kept_compression(const CompressionRequest& request)
{
    return kept_run(request);
}

RunSummary compress_and_evaluate(const CompressionRequest& request, const RunTarget& target,
                                 const ProgressFn& progress, const StatusFn& status)
{
    if (target.slurm)
        return detail::slurm_compress_and_evaluate(request, target, progress, status);
    if (!target.host.empty())
        return detail::remote_compress_and_evaluate(request, target, progress);
    auto run =
        std::make_shared<embedlab::CompressionRun>(embedlab::run_compression(request, one_bar(progress)));
    RunSummary row = run->summary;
    keep(request, std::move(run));
    return row;
}

void check_chain(const nlohmann::ordered_json& pipeline)
{
    const PipelineRequest p = pipeline_from_json(pipeline);
    if (p.trim)
        check_trim_options(*p.trim);
    check_pipeline_request(p, read_model_files(p.request.model, WeightValues::ShapesOnly).config);
}

RunSummary compress_chain_and_evaluate(const nlohmann::ordered_json& pipeline, const RunTarget& target,
                                       const ProgressFn& progress, const StatusFn& status)
{
    check_chain(pipeline);
    if (target.slurm)
        return detail::slurm_chain_and_evaluate(pipeline, target, progress, status);
    if (!target.host.empty())
        return detail::remote_chain_and_evaluate(pipeline, target, progress);
    return run_pipeline(pipeline_from_json(pipeline), {}, {}, one_bar(progress)).summary;
}

std::string export_compressed(const CompressionRequest& request, const std::string& out_dir, bool dense,
                              bool overwrite, const ProgressFn& progress)
{
    // Before any work: a taken name should fail in a second.
    check_export_target(out_dir, overwrite, request_inputs(request));
    auto run = kept_run(request);
    const int64_t w_run = run ? 0 : 700; // a row no longer kept runs again (every method is seeded)
    if (!run)
        run = std::make_shared<embedlab::CompressionRun>(
            embedlab::run_compression(request, one_bar(detail::stage(progress, 0, w_run, 1000))));
    // export_run's last progress call (1000 of 1000) comes just before its rename:
    // a cancel there still leaves nothing.
    export_run(*run, out_dir, {.dense = dense, .overwrite = overwrite},
               detail::stage(progress, w_run, 1000 - w_run, 1000));
    return run->summary.method + " " + run->summary.parameters;
}

std::string export_chain(const nlohmann::ordered_json& pipeline, const std::string& out_dir, bool dense,
                         bool overwrite, const ProgressFn& progress)
{
    check_chain(pipeline);
    const PipelineRequest p = pipeline_from_json(pipeline);
    run_pipeline(p, out_dir, {.overwrite = overwrite, .dense = dense}, one_bar(progress));
    return pipeline_label(p);
}

void write_file(const std::string& path, const std::string& bytes)
{
    write_file_atomic(path, bytes);
}

namespace {
// The accounting of a TT fitted on n evenly spaced rows, for all V tokens: token t
// takes the ranks of its nearest sampled row, round(t (n - 1) / (V - 1)).
EmbeddingAccounting spread_sample_accounting(const CompressedEmbedding& c, int64_t v, int64_t n)
{
    const auto& shape = c.spec.shape;
    // Per-token ranks are part of the TT's stored form (stored_form.hpp): "tt.token_ranks".
    torch::Tensor sampled;
    for (const auto& [name, tensor] : c.embedding->stored_tensors())
        if (name == "tt.token_ranks")
            sampled = tensor.to(torch::kInt32).contiguous(); // [n, N - 1]
    if (!sampled.defined())
        return account_tensor_train(v, shape, c.spec.ranks, EnergyOptions{}, 0);
    const int64_t inner = static_cast<int64_t>(shape.size()) - 1;
    const int32_t* r = sampled.data_ptr<int32_t>();
    std::vector<int32_t> ranks(static_cast<size_t>(v * inner));
    for (int64_t t = 0; t < v; ++t) {
        const int64_t j = v > 1 ? std::llround(static_cast<double>(t) * static_cast<double>(n - 1) /
                                               static_cast<double>(v - 1))
                                : 0;
        std::copy_n(r + j * inner, inner, ranks.begin() + t * inner);
    }
    return account_tensor_train_per_token(v, shape, ranks, EnergyOptions{}, 0);
}
} // namespace

TensorTrainResult tensor_train_candidates(const std::string& model, const std::vector<double>& grid,
                                          int max_shapes, const ProgressFn& progress, int64_t max_rows,
                                          double chosen_eps)
{
    std::vector<double> eps = grid;
    if (chosen_eps > 0 && std::find(eps.begin(), eps.end(), chosen_eps) == eps.end()) {
        eps.push_back(chosen_eps);
        std::sort(eps.begin(), eps.end()); // each shape's curve runs in eps order
    }
    auto lm = load_model(model, {.need_tokenizer = false});
    const auto* dense = dense_table(&lm.model->token_embedding());
    if (!dense)
        throw InputError(model + ": the token embedding is already compressed (" +
                         lm.model->token_embedding().kind() + "); open the original model");
    TensorTrainResult r;
    r.vocab = dense->size(0);
    r.dim = dense->size(1);
    const bool sampled = max_rows > 0 && r.vocab > max_rows;
    r.fitted_rows = sampled ? max_rows : r.vocab;
    const torch::Tensor table =
        sampled ? dense->index_select(0, evenly_spaced_rows(r.vocab, max_rows)).to(torch::kFloat).contiguous()
                : *dense;
    if (sampled)
        lm.model.reset(); // the sample is all the fits read
    std::vector<std::vector<int64_t>> shapes;
    for (int n : {2, 3})
        for (auto& s : tt_shapes(r.dim, n))
            if (std::all_of(s.begin(), s.end(), [](int64_t f) { return f >= 4; })) // tiny factors: no savings
                shapes.push_back(s);
    if (static_cast<int>(shapes.size()) > max_shapes)
        shapes.resize(static_cast<size_t>(max_shapes));
    std::vector<int64_t> balanced;
    if (chosen_eps > 0) { // the shape the panel's run uses is always a candidate
        try {
            balanced = balanced_tt_shape(r.dim, "tt");
        } catch (const InputError&) {
            // a width with no 3-factor shape: tt refuses it, no candidate is the panel's
        }
        if (!balanced.empty() && std::find(shapes.begin(), shapes.end(), balanced) == shapes.end()) {
            if (!shapes.empty() && static_cast<int>(shapes.size()) >= max_shapes)
                shapes.pop_back();
            shapes.push_back(balanced);
        }
    }
    const int64_t total = static_cast<int64_t>(shapes.size() * eps.size());
    int64_t done = 0;
    for (const auto& shape : shapes)
        for (double e : eps) {
            CompressionSpec spec{.method = "tt", .shape = shape, .eps = e};
            const auto c = compress_table(table, spec, 0, stage(progress, done, 1, total));
            ++done;
            const EmbeddingAccounting a =
                sampled ? spread_sample_accounting(c, r.vocab, max_rows) : c.accounting;
            TensorTrainCandidate t;
            t.shape = shape;
            t.ranks = a.ranks;
            t.mean_ranks = a.mean_ranks;
            t.eps = e;
            t.ratio = a.ratio;
            t.params_after = a.params_after;
            t.relative_error = c.reconstruction.relative_frobenius;
            t.mean_cosine = c.reconstruction.mean_cosine;
            t.svd_rank = a.svd_equal_size_rank;
            const auto& en = a.energy;
            t.energy_original = en.original_nu + en.original_tau;
            t.energy_tt = en.compressed_nu + en.compressed_tau;
            const auto& sv = a.svd_equal_size_energy;
            t.energy_svd = sv.compressed_nu + sv.compressed_tau;
            const EnergyOptions weights; // the weights the accounting used
            t.accesses_original = en.original_nu / weights.nu;
            t.operations_original = en.original_tau / weights.tau;
            t.accesses_tt = en.compressed_nu / weights.nu;
            t.operations_tt = en.compressed_tau / weights.tau;
            t.accesses_svd = sv.compressed_nu / weights.nu;
            t.operations_svd = sv.compressed_tau / weights.tau;
            if (chosen_eps > 0 && e == chosen_eps && shape == balanced)
                r.chosen = static_cast<int64_t>(r.candidates.size());
            r.candidates.push_back(t);
        }
    return r;
}

} // namespace embedlab::app

namespace embedlab::app {

std::optional<TableDefault> table_default(const std::string& model, const CompressionRequest& base,
                                          const ProgressFn& progress)
{
    if (!picks_default_from_table(base.method))
        return std::nullopt;
    auto lm = load_model(model, {.need_tokenizer = false});
    const auto* dense = dense_table(&lm.model->token_embedding());
    if (!dense)
        return std::nullopt; // a compressed table is not compressed again; nothing to choose
    return table_method(base.method).default_from_table(*dense, base, progress);
}

} // namespace embedlab::app
