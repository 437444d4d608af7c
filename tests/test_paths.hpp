// Where the tests find the source tree and embedlab-cli. Both are defined in a file
// CMake writes (build/tests/test_paths.cpp) instead of on every test file's command
// line, so that no test object depends on the clone's folder and ccache reuses them
// in a fresh clone elsewhere (cmake/Ccache.cmake).
//
//   std::filesystem::path(EMBEDLAB_SOURCE_DIR) / "resources";  // a const char*
#pragma once

namespace embedlab::test {
const char* source_dir(); // the source tree
const char* cli_path();   // the embedlab-cli this build made
} // namespace embedlab::test

#define EMBEDLAB_SOURCE_DIR (::embedlab::test::source_dir())
#define EMBEDLAB_CLI_PATH (::embedlab::test::cli_path())
