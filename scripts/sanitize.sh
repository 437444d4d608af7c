#!/usr/bin/env bash
# The engine's unit tests (model I/O, tokenizers, forward pass) under
# AddressSanitizer + UndefinedBehaviorSanitizer (leak checking on), in a build
# directory of their own (build-asan/, override with ASAN_BUILD_DIR). CI runs it
# after the test suite; any finding fails the run.
# The build is only what the three tests link (the engine, with its precompiled
# header, and no GUI), at -O1 with line tables only (-g1): the level ASan is meant
# for, with file:line in every report, and cheaper to compile than -O2 -g.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-tests
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
TESTS=(test_io test_tokenizer test_model)
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DEMBEDLAB_SANITIZE="address;undefined" -DEMBEDLAB_BUILD_GUI=OFF
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target "${TESTS[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in "${TESTS[@]}"; do
  echo "sanitize: $t"
  "$BUILD_DIR/tests/$t" --gtest_brief=1
done
echo "sanitize: ${TESTS[*]} clean under address;undefined"
