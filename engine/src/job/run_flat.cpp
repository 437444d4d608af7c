// FLAT-LLM's part of a compression run (METHODS 3; compression_unit.hpp): the calibration
// text and windows, the calibration pass on the original, the fit (the value heads and,
// when asked, the MLPs narrowed), its record and its stored form (save_flat_model:
// model.safetensors at the narrowed shapes and embedlab.json).
#include <cmath>

#include "embedlab/file_output.hpp"
#include "embedlab/flat_llm.hpp"
#include "job/compression_unit.hpp"
#include "model/flat_settings.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;
using run_steps::RunInputs;
using run_steps::StagedProgress;

namespace {

Json text_json(const std::string& path, size_t tokens)
{
    return {{"path", fs::absolute(path).lexically_normal().string()},
            {"sha256", sha256_file(path)},
            {"tokens", tokens}};
}

FlatOptions flat_options(const CompressionRequest& request, double remaining)
{
    FlatOptions options;
    options.remaining = remaining;
    options.target_ratio = request.target_ratio;
    options.allocation = parse_rank_allocation(request.allocation);
    options.mlp = request_compresses_mlp(request);
    options.mlp_lambda = request.mlp_lambda;
    options.calibration = parse_flat_calibration(request.calibration);
    options.mlp_calibration = parse_flat_mlp_calibration(request.mlp_calibration);
    return options;
}

// One flat run: its calibration windows and remaining ratio, read and checked against
// the model before the long steps.
class FlatFit final : public MethodFit {
public:
    FlatFit(const CompressionRequest& request, const LoadedModel& lm) : request_(request)
    {
        read_remaining(*lm.model);
        read_calibration(lm);
    }

    run_steps::Stages stages_before(double per_token) const override
    {
        return {{"calibrate", double(calib_.samples) * double(calib_.seqlen) * per_token}};
    }

    double fit_work(const CompressionRequest&, const ModelConfig& c) const override
    {
        const double d = double(c.hidden_size), layers = double(c.num_layers);
        double work = 8 * layers * d * d * d; // per-head eigendecompositions, absorbed products
        if (calib_.mlp) { // MLP covariances beyond the budget: a pass (to its group's last layer) per group
            const double f = double(c.intermediate_size), bytes = layers * f * f * 8;
            if (bytes > double(calib_.mlp_covariance_budget))
                work += std::ceil(bytes / double(calib_.mlp_covariance_budget)) * 0.5 *
                        double(calib_.samples) * double(calib_.seqlen) *
                        run_steps::decoder_work_per_position(c);
        }
        return work;
    }

    void prepare(CompressionRun& run, const StagedProgress& bar) override
    {
        run.calibration =
            std::make_shared<Calibration>(calibrate(*run.model.model, ids_, calib_, bar.stage("calibrate")));
        run.extra["calibration_text"] = text_json(request_.calib_text, ids_.size());
    }

    // The narrowed model and the part it compressed (METHODS 0: V and O, and the MLPs
    // when narrowed), in values and in bytes.
    void fit(CompressionRun& run, const RunInputs&, const StagedProgress& bar) override
    {
        const auto& model = *run.model.model;
        const FlatOptions options = flat_options(request_, remaining_);
        report_progress(bar.stage("compress"), 0, 1);
        run.flat = std::make_shared<FlatResult>(
            flat_compress(model, *run.calibration, options, bar.stage("compress")));
        report_progress(bar.stage("compress"), 1, 1);
        RunSummary& s = run.summary;
        s.parameters = flat_settings_words(*run.flat);
        s.params_before = flat_compressed_params(model, options.mlp);
        s.params_after = flat_compressed_params(*run.flat->model, options.mlp);
        s.part = options.mlp ? "attention_values_and_mlp" : "attention_values";
        // In bytes too (issue 38): the part as a Hugging Face source of one dtype stores it,
        // and as the export writes the narrowed tensors (at the width the model holds them).
        if (const double bits = run.model.files.format == ModelFormat::HuggingFace
                                    ? stored_bits_per_value(run.model.files.stored_dtype)
                                    : 0.0;
            bits > 0) {
            s.bytes_before = static_cast<double>(s.params_before) * bits / 8;
            s.bytes_after = static_cast<double>(s.params_after) * value_bytes(run);
        }
        s.mean_cosine = run_steps::kNaN; // the embedding is untouched: no rows to compare
    }

    // flat leaves the run's model as it was: the reference.
    const LanguageModel& reference(const CompressionRun& run) const override { return *run.model.model; }

    // The export writes every weight at the width the narrowed model holds them.
    double model_bytes_after(const CompressionRun& run, double, double) const override
    {
        return static_cast<double>(run.flat->model->parameter_breakdown().total()) * value_bytes(run);
    }

private:
    static double value_bytes(const CompressionRun& run)
    {
        return static_cast<double>(run.flat->model->weights().begin()->second.element_size());
    }

    void read_remaining(const LanguageModel& model)
    {
        remaining_ = request_.remaining;
        if (request_.target_ratio <= 0)
            return;
        try {
            remaining_ =
                remaining_for_target(model.config(), request_.target_ratio, request_compresses_mlp(request_));
        } catch (const InputError& e) {
            throw InputError(request_.model + ": " + e.what());
        }
    }

    void read_calibration(const LoadedModel& lm)
    {
        const auto& r = request_;
        ids_ = lm.tokenizer->encode(read_text_file(r.calib_text));
        if (ids_.empty())
            throw InputError(r.calib_text + ": the calibration text has no tokens");
        const int64_t context = calibration_context(*lm.model);
        calib_ = {.samples = r.samples,
                  .seqlen = r.seqlen > 0 ? r.seqlen : std::min<int64_t>(256, context),
                  .seed = r.seed,
                  // Sequential calibration sums the MLP covariances itself, layer by layer.
                  .mlp = request_compresses_mlp(r) && r.calibration == "parallel"};
        if (calib_.seqlen > context)
            throw InputError(r.calib_text + ": calibration seqlen " + std::to_string(calib_.seqlen) +
                             " is beyond the model's context (" + std::to_string(context) + ")");
        try {
            calibration_window_starts(static_cast<int64_t>(ids_.size()), calib_.samples, calib_.seqlen,
                                      calib_.seed);
        } catch (const InputError& e) {
            throw InputError(r.calib_text + ": " + e.what());
        }
    }

    CompressionRequest request_;
    double remaining_ = 0; // remaining, or what target_ratio asks for
    std::vector<int32_t> ids_;
    CalibrationOptions calib_;
};

class AttentionValuesUnit final : public CompressionUnit {
public:
    CompressedPart part() const override { return CompressedPart::AttentionValues; }

    void check_model(const CompressionRequest& request, const LoadedModel& lm) const override
    {
        if (!lm.model->config().value_head_dims.empty())
            throw InputError(request.model + ": is already FLAT-compressed; use the original model");
    }

    std::unique_ptr<MethodFit> begin(const CompressionRequest& request, const LoadedModel& lm,
                                     const RunInputs&) const override
    {
        return std::make_unique<FlatFit>(request, lm);
    }

    // A run that has not fitted yet evaluates as its model.
    const LanguageModel& compressed_model(const CompressionRun& run) const override
    {
        return run.flat ? *run.flat->model : *run.model.model;
    }

    // embedlab.json's names for the same blocks.
    void record(const CompressionRun& run, Json& j) const override
    {
        if (!run.flat)
            return;
        j["method"] = method_descriptor(run.request.method).name;
        j["model_params"] = flat_params_json(*run.flat);
        j["layers"] = flat_layers_json(*run.flat, false);
        j["calibration"] = calibration_json(*run.calibration);
    }

    void check_export(const CompressionRun& run, const fs::path& dir,
                      const ExportOptions& options) const override
    {
        if (options.dense)
            throw InputError(dir.string() + ": a dense copy does not apply to flat: model.safetensors "
                                            "already holds standard tensors at the narrowed shapes");
        if (run.model.files.format != ModelFormat::HuggingFace)
            throw InputError(run.request.model +
                             ": compressed models are written from Hugging Face directories, not " +
                             model_format_name(run.model.files.format) + " files");
    }

    Json save(const CompressionRun& run, const fs::path& out, const ExportOptions&,
              const ProgressFn& progress) const override
    {
        return save_flat_model(run.model, *run.flat, *run.calibration, out,
                               {.overwrite = true,
                                .evaluation = run.evaluation,
                                .calibration_text = run.extra.value("calibration_text", Json())},
                               progress);
    }
};

} // namespace

const CompressionUnit& attention_values_compression_unit()
{
    static const AttentionValuesUnit unit;
    return unit;
}

} // namespace embedlab
