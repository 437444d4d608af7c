#!/usr/bin/env bash
# The engine's code that reads what a user hands it, under AddressSanitizer +
# UndefinedBehaviorSanitizer (leak checking on), in a build directory of its own
# (build-asan/, override with ASAN_BUILD_DIR). CI runs it on every submission; any
# finding fails the run with the sanitizer's report (file:line).
# Covered: model files and their parsers (test_io), tokenizers (test_tokenizer), the
# forward pass and model loading (test_model, test_encoder's loading), compressed
# directories and their manifests (test_methods' CompressedModel cases), GGUF's block
# types and the zoo's refusals (test_zoo), the job, request and worker JSON
# (test_experiment's request cases, test_remote's job and worker cases), and Slurm
# sweep manifests (test_slurm's SlurmManifest and SlurmTools cases, with fake Slurm tools). The fuzz phase runs every torch-free parser
# under the same sanitizers besides.
# The build is only what these tests link (the engine, with its precompiled header, and
# no GUI), at -O1 with line tables only (-g1): the level ASan is meant for, with
# file:line in every report, and cheaper to compile than -O2 -g. A program run with
# suite filters is built from only the test files that define those suites
# (EMBEDLAB_SANITIZE_RUNS, cmake/TestSources.cmake). ccache (when installed) keeps it
# for the next run (cmake/Ccache.cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-tests
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
# PROGRAM or PROGRAM:GTEST_FILTER
SUITES=(
  test_io
  test_tokenizer
  test_model
  "test_encoder:Encoder.*:EncoderTruncation.*"
  "test_methods:CompressedModel.*"
  "test_zoo:ZooRefusals.*:ZooConfigs.*:GgufQuants.*"
  "test_experiment:MethodRegistry.*:CompressionRequestJson.*"
  "test_remote:RemoteHost.*:RemoteQuote.*:RemoteJob.*:RemotePower.*"
  "test_slurm:SlurmManifest.*:SlurmTools.*"
)
TARGETS=()
for s in "${SUITES[@]}"; do TARGETS+=("${s%%:*}"); done
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DEMBEDLAB_SANITIZE="address;undefined" -DEMBEDLAB_BUILD_GUI=OFF \
  -DEMBEDLAB_SANITIZE_RUNS="$(IFS=';'; echo "${SUITES[*]}")" > /dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One thread each, two programs at a time (as the tests phase runs them).
export EMBEDLAB_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
mkdir -p "$BUILD_DIR/logs"
run_one() {
  local spec=$1 program=${1%%:*} filter="*" log
  [ "$spec" = "$program" ] || filter=${spec#*:}
  log="$BUILD_DIR/logs/sanitize-$program.log"
  local start=$SECONDS
  if (cd "$BUILD_DIR/tests" && "./$program" --gtest_brief=1 --gtest_filter="$filter") > "$log" 2>&1; then
    echo "sanitize: $program ($filter) clean: $(grep -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$log" | head -1), $((SECONDS - start)) s"
  else
    echo "sanitize: $program ($filter) FAILED; its output ($log):"
    grep -E -A40 "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|\[  FAILED  \]" "$log" | head -80 || tail -40 "$log"
    return 1
  fi
}
export -f run_one
export BUILD_DIR
printf '%s\n' "${SUITES[@]}" | xargs -P 2 -I{} bash -c 'run_one "{}"'
echo "sanitize: ${#SUITES[@]} programs clean under address;undefined"
