// The words a FLAT-LLM run's results row names its settings with, from what the fit
// recorded ("target 0.5, remaining 0.41, iprs, mlp, ranks 3,5,.."): the run's summary
// (run_flat.cpp) and its embedlab.json's "settings" (save_flat_model) share them, so a
// row read back from the record (saved_summary.hpp) is the row the run made.
//
//   run.summary.parameters = embedlab::flat_settings_words(flat);
//
// Thread safety: a pure function of its argument.
#pragma once

#include <string>

#include "embedlab/flat_llm.hpp"

namespace embedlab {

std::string flat_settings_words(const FlatResult& flat);

} // namespace embedlab
