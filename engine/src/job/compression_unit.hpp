// A method's part of a compression run behind one interface (issue 59 item 4), so that
// run_compression, run_json and export_run (experiment.cpp) call the same steps for
// every method and name none: a CompressionUnit per part a method compresses (its
// registry row's CompressedPart), found by compression_unit; the token-table methods
// share one (run_table.cpp, over TableMethod), FLAT-LLM's attention values have theirs
// (run_flat.cpp). A unit begins a MethodFit per run, which holds what the method read
// for that run (the lle family's frequency text, flat's calibration windows).
//
//   const CompressionUnit& unit = compression_unit(method_descriptor(request.method));
//   unit.check_model(request, loaded);               // InputError: not on this model
//   auto fit = unit.begin(request, loaded);          // its own texts, read and checked
//   fit->prepare(run, bar);                          // on the original (flat: calibrate)
//   fit->fit(run, inputs, bar);                      // the compressed part in the run
//   unit.save(run, dir, options, progress);          // its stored form and manifest
//
// Thread safety: units are stateless singletons; a MethodFit belongs to one run.
#pragma once

#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "job/run_steps.hpp"

namespace embedlab {

// One run of a method: what it read, its stages' work, its fit and its figures.
class MethodFit {
public:
    virtual ~MethodFit() = default;
    // Its stages before the original is measured, each with its work ("calibrate"); a
    // forward pass costs per_token a token.
    virtual run_steps::Stages stages_before(double /*per_token*/) const { return {}; }
    // The fit's floating-point work, roughly: the "compress" stage's pace.
    virtual double fit_work(const CompressionRequest& request, const ModelConfig& config) const = 0;
    // Work on the original model before it is measured (flat: the calibration pass).
    virtual void prepare(CompressionRun&, const run_steps::StagedProgress&) {}
    // Compresses: the run's compressed part and, in its summary, part, parameters,
    // params and bytes before and after, and mean_cosine.
    virtual void fit(CompressionRun& run, const run_steps::RunInputs& inputs,
                     const run_steps::StagedProgress& bar) = 0;
    // The model the compressed one is compared with (the divergence), after fit.
    virtual const LanguageModel& reference(const CompressionRun& run) const = 0;
    // The whole model's bytes as the export writes them, given the input's (`before`,
    // at `bits` a value): summary.model_bytes_after.
    virtual double model_bytes_after(const CompressionRun& run, double before, double bits) const = 0;
    // Its own figures in run.evaluation, after the perplexities (the lle family's coverage).
    virtual void record_evaluation(CompressionRun&) const {}
};

// What a method's run is made of, for every method compressing one part.
class CompressionUnit {
public:
    virtual ~CompressionUnit() = default;
    virtual CompressedPart part() const = 0;
    // The request against the loaded model, beyond the common checks. InputError.
    virtual void check_model(const CompressionRequest&, const LoadedModel&) const {}
    // A run's fit, its own inputs read (after the common ones: `inputs`) and checked.
    virtual std::unique_ptr<MethodFit> begin(const CompressionRequest& request, const LoadedModel& model,
                                             const run_steps::RunInputs& inputs) const = 0;
    // The model that evaluates (CompressionRun::compressed_model).
    virtual const LanguageModel& compressed_model(const CompressionRun& run) const = 0;
    // The run's record (run_json): "method" and the fit's own blocks, as its manifest
    // names them.
    virtual void record(const CompressionRun& run, nlohmann::ordered_json& j) const = 0;
    // Refuses what its stored form cannot write (before anything is written), then
    // writes it into `out` (export_run's temporary directory): its tensors and
    // embedlab.json, which it returns.
    virtual void check_export(const CompressionRun& run, const std::filesystem::path& dir,
                              const ExportOptions& options) const = 0;
    virtual nlohmann::ordered_json save(const CompressionRun& run, const std::filesystem::path& out,
                                        const ExportOptions& options, const ProgressFn& progress) const = 0;
};

const CompressionUnit& table_compression_unit();            // run_table.cpp
const CompressionUnit& attention_values_compression_unit(); // run_flat.cpp
// The unit of the part `method` compresses.
const CompressionUnit& compression_unit(const MethodDescriptor& method);

} // namespace embedlab
