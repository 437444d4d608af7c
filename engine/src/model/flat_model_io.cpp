// Saving FLAT-LLM results (engine/include/embedlab/flat_llm.hpp); loading is
// the ordinary Hugging Face path plus the manifest's layer dimensions.
#include <chrono>

#include "embedlab/accounting.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/flat_llm.hpp"
#include "embedlab/json_members.hpp"
#include "embedlab/text_format.hpp"
#include "io/canonical_weights.hpp"
#include "model/flat_settings.hpp"
#include "model/manifest_support.hpp"

namespace embedlab {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string flat_settings_words(const FlatResult& flat)
{
    const FlatOptions& options = flat.options;
    std::string ranks;
    for (const auto& layer : flat.layers) { // piece by piece: GCC 12's -Wrestrict misfires on "," + string
        if (!ranks.empty())
            ranks += ',';
        ranks += std::to_string(layer.rank);
    }
    return (options.target_ratio > 0 ? "target " + short_number(options.target_ratio) + ", " : "") +
           "remaining " + short_number(options.remaining) + ", " + rank_allocation_name(options.allocation) +
           (options.mlp ? ", mlp" : "") +
           (options.calibration == FlatCalibration::Parallel ? ", parallel calibration" : "") +
           (options.calibration == FlatCalibration::Sequential && options.mlp &&
                    options.mlp_calibration == FlatMlpCalibration::AfterAttention
                ? ", mlp calibration after attention"
                : "") +
           ", ranks " + ranks;
}

Json calibration_json(const Calibration& c)
{
    Json nan = Json::array();
    for (const auto& l : c.layers)
        nan.push_back(l.nan_cosines);
    Json j = {{"samples", c.options.samples},
              {"seqlen", c.options.seqlen},
              {"seed", c.options.seed},
              {"tokens", c.tokens},
              {"mlp", c.options.mlp},
              {"seconds", c.seconds},
              {"nan_cosines", nan}};
    if (c.options.mlp)
        j["mlp_covariance_budget"] = c.options.mlp_covariance_budget;
    return j;
}

Json flat_layers_json(const FlatResult& r, bool with_spectra)
{
    Json layers = Json::array();
    for (size_t l = 0; l < r.layers.size(); ++l) {
        const auto& x = r.layers[l];
        Json j = {{"layer", l}};
        EMBEDLAB_JSON_MEMBERS(j, x, importance, normalised, w, rank, dropped_share, mlp_width,
                              mlp_leverage_kept);
        if (with_spectra)
            j["head_spectra"] = x.head_spectra;
        layers.push_back(j);
    }
    return layers;
}

Json flat_params_json(const FlatResult& r)
{
    const double before = static_cast<double>(r.before.total());
    return {{"before", r.before.total()},
            {"after", r.after.total()},
            {"ratio", before > 0 ? static_cast<double>(r.after.total()) / before : 1.0},
            {"attention_before", r.before.attention},
            {"attention_after", r.after.attention},
            {"mlp_before", r.before.mlp},
            {"mlp_after", r.after.mlp},
            // What a FLAT-LLM target ratio is about: the decoder's projections.
            {"decoder_before", r.before.attention + r.before.mlp},
            {"decoder_after", r.after.attention + r.after.mlp},
            {"decoder_ratio", r.before.attention + r.before.mlp > 0
                                  ? static_cast<double>(r.after.attention + r.after.mlp) /
                                        static_cast<double>(r.before.attention + r.before.mlp)
                                  : 1.0},
            {"conventions", {{"ranks", kFlatRankConvention}}}};
}

Json save_flat_model(const LoadedModel& source, const FlatResult& flat, const Calibration& calibration,
                     const fs::path& out, const SaveFlatOptions& options, const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    detail::require_original_hf_source(source);
    const auto& model = *flat.model;
    const auto& config = model.config();
    if (!dense_table(&model.token_embedding()))
        throw InputError(source.files.path.string() +
                         ": a flat model is saved with its dense token table; this one is compressed");

    AtomicDirectory dir(out, options.overwrite);
    detail::copy_support_files(source.files.path, dir.path());
    const auto tensors = io::native_hf_tensors(config, model.weights());
    write_safetensors(dir.path() / "model.safetensors", tensors,
                      {{"format", "pt"}, {"embedlab_method", "flat"}}, progress);

    // The tensors whose shapes differ from the source, so other tools know what to expect.
    Json changed = Json::object();
    for (const auto& [name, t] : model.weights()) {
        const auto it = source.model->weights().find(name);
        if (it == source.model->weights().end() || it->second.sizes() != t.sizes())
            changed[name] = t.sizes().vec();
    }
    Json manifest = {{"format", "embedlab-compressed-model"},
                     {"format_version", detail::kManifestFormatVersion},
                     {"method", "flat"},
                     {"parameters",
                      {{"remaining", flat.options.remaining},
                       {"allocation", rank_allocation_name(flat.options.allocation)},
                       {"mlp", flat.options.mlp},
                       {"mlp_lambda", flat.options.mlp_lambda},
                       {"calibration", flat_calibration_name(flat.options.calibration)}}},
                     {"value_head_dims", config.value_head_dims}};
    if (!config.mlp_widths.empty())
        manifest["mlp_widths"] = config.mlp_widths;
    if (flat.options.target_ratio > 0) // the remaining ratio came from this target
        manifest["parameters"]["target_ratio"] = flat.options.target_ratio;
    manifest["head_dim"] = config.head_dim();
    manifest["changed_tensors"] = changed;
    manifest["layers"] = flat_layers_json(flat);
    manifest["calibration"] = calibration_json(calibration);
    if (!options.calibration_text.is_null())
        manifest["calibration"]["text"] = options.calibration_text;
    // Issue 36 item 2: where each layer's covariances came from (METHODS 3 as the reference runs it).
    manifest["calibration"]["mode"] = flat_calibration_name(flat.options.calibration);
    if (flat.options.calibration == FlatCalibration::Sequential)
        manifest["calibration"]["sequential_passes"] = flat.sequential_passes;
    if (flat.options.calibration == FlatCalibration::Sequential && flat.options.mlp) {
        // Issue 62: layer l's MLP covariance with layer l uncompressed (the reference) or
        // after its attention was narrowed.
        manifest["parameters"]["mlp_calibration"] = flat_mlp_calibration_name(flat.options.mlp_calibration);
        manifest["calibration"]["mlp_mode"] = flat_mlp_calibration_name(flat.options.mlp_calibration);
    }
    if (flat.options.mlp) { // issue 20 item 7: the MLP covariances' passes and memory
        manifest["calibration"]["mlp_passes"] = flat.mlp_calibration_passes;
        manifest["calibration"]["mlp_covariance_peak_bytes"] = flat.mlp_covariance_peak_bytes;
    }
    manifest["tied_output_head"] = config.tied_embeddings;
    manifest["model_params"] = flat_params_json(flat);
    // What the part compressed holds on disk (issue 36): its values at the width the
    // changed tensors are written (the model's; all of them share it).
    // Nothing narrowed (remaining 1): the width the model holds every weight at.
    int64_t value_bytes =
        changed.empty() ? static_cast<int64_t>(model.weights().begin()->second.element_size()) : 0;
    for (const auto& [name, shape] : changed.items()) {
        const int64_t b = static_cast<int64_t>(model.weights().at(name).element_size());
        if (value_bytes != 0 && b != value_bytes)
            throw InputError(out.string() + ": the narrowed tensors are written at mixed widths");
        value_bytes = b;
    }
    const int64_t part_after = flat_compressed_params(model, flat.options.mlp);
    manifest["storage"] = {{"part", flat.options.mlp ? "attention_values_and_mlp" : "attention_values"},
                           {"params_after", part_after},
                           {"bytes_per_value", value_bytes},
                           {"bytes_after", part_after * value_bytes}};
    // The row's figures before narrowing (since 2026-11-29; Run.summary of load_run reads
    // them): the part's parameters in the source, and its bytes as the source stores them.
    const int64_t part_before = flat_compressed_params(*source.model, flat.options.mlp);
    manifest["storage"]["params_before"] = part_before;
    if (const double bits = stored_bits_per_value(source.files.stored_dtype); bits > 0)
        manifest["storage"]["bytes_before"] = static_cast<double>(part_before) * bits / 8;
    manifest["settings"] = flat_settings_words(flat); // the row's words for the settings
    manifest["weights_files"] = detail::file_digests(dir.path(), {"model.safetensors"});
    manifest["source"] = detail::source_json(source);
    manifest["seed"] = calibration.options.seed;
    manifest["versions"] = detail::manifest_versions();
    manifest["created"] = detail::utc_now();
    if (!options.evaluation.is_null())
        manifest["evaluation"] = options.evaluation;
    manifest["fit_seconds"] = flat.seconds;
    manifest["wall_seconds"] = calibration.seconds + flat.seconds +
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_file_atomic(dir.path() / "embedlab.json", manifest.dump(1) + "\n");
    dir.commit();
    return manifest;
}

} // namespace embedlab
