// Locating bundled resources (the default model, sample texts).
//
//   auto model = embedlab::default_model_path();  // resources/models/tinygpt2-f16
//
// Search order: $EMBEDLAB_RESOURCES, then <exe>/../share/embedlab/resources
// (installed), then the source tree's resources/ (build tree). The shared data
// (../shared, not bundled) is looked up with find_shared_data("models/qwen3").
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <vector>

namespace embedlab {

std::filesystem::path resource_dir();
std::filesystem::path default_model_path();       // the bundled tinygpt2-f16
std::filesystem::path default_sample_text_path(); // bundled held-out sample text

// The project's shared data that is not bundled (models, data sets, tools): the
// folders to look in, in order: $EMBEDLAB_SHARED_DIR when set, then ../shared
// beside the checkout (resources/ sits in it).
std::vector<std::filesystem::path> shared_data_dirs();
// The first shared_data_dirs() / relative that exists; empty when there is none.
std::filesystem::path find_shared_data(const std::filesystem::path& relative);

} // namespace embedlab
