// Locating bundled resources (the default model, sample texts).
//
//   auto model = embedlab::default_model_path();  // resources/models/tinygpt2-f16
//
// Search order: $EMBEDLAB_RESOURCES, then <exe>/../share/embedlab/resources
// (installed), then the source tree's resources/ (build tree).
// Thread safety: reentrant.
#pragma once

#include <filesystem>

namespace embedlab {

std::filesystem::path resource_dir();
std::filesystem::path default_model_path();       // the bundled tinygpt2-f16
std::filesystem::path default_sample_text_path(); // bundled held-out sample text

} // namespace embedlab
