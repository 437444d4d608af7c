// A results row (RunSummary) read back from a compressed directory's embedlab.json: the
// row the run that wrote it made (its settings, parameters and bytes before and after,
// perplexities, delta ln PPL, bits per byte, divergence, task), from the record's
// parameters, accounting, reconstruction, source and evaluation (flat's: its settings,
// storage and model_params). The record keeps no timing or machine: `seconds` is NaN
// and `host` empty.
//
//   auto manifest = nlohmann::ordered_json::parse(read_text_file(dir / "embedlab.json"));
//   embedlab::RunSummary row = embedlab::summary_from_record(manifest, dir.string());
//
// Thread safety: reads the method registry only; call once methods are registered.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "embedlab/results.hpp"

namespace embedlab {

// A table method's or flat's directory (compress --out, export_run). InputError, naming
// `where`, for a record that is not one (a fine-tuned model's), one missing the fields
// above, or a flat record written before 2026-11-29 (no storage.params_before, settings).
RunSummary summary_from_record(const nlohmann::ordered_json& manifest, const std::string& where);

} // namespace embedlab
