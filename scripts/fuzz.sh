#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) in build-fuzz/ and
# runs each one: first over its regression inputs (fuzz/regressions/<target>/,
# inputs that once crashed), then for FUZZ_SECONDS (default 60) from its corpus
# (build-fuzz/corpus/<target>, seeded from fuzz/seeds/<target>). Two targets run
# at a time. A finding fails the run and is kept in build-fuzz/artifacts/.
#   FUZZ_SECONDS=600 scripts/fuzz.sh             # the 10-minute local run
#   scripts/fuzz.sh fuzz_gguf fuzz_safetensors   # some targets only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-tests  # clang and its libFuzzer runtime
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBEDLAB_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang > /dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target fuzzers
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=($(cd fuzz/seeds && ls -d fuzz_*))
mkdir -p "$BUILD_DIR/artifacts" "$BUILD_DIR/logs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

run_one() {
  local t=$1 bin="$BUILD_DIR/fuzz/$1" log="$BUILD_DIR/logs/$1.log"
  local corpus="$BUILD_DIR/corpus/$t"
  mkdir -p "$corpus"
  if [ -d "fuzz/regressions/$t" ] && [ -n "$(ls -A "fuzz/regressions/$t")" ]; then
    "$bin" "fuzz/regressions/$t"/* > "$log.regressions" 2>&1 ||
      { echo "fuzz: $t crashes on a regression input"; tail -30 "$log.regressions" | cut -c1-200; return 1; }
  fi
  if "$bin" -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 -timeout=${FUZZ_TIMEOUT:-25} \
       -print_final_stats=1 -artifact_prefix="$BUILD_DIR/artifacts/$t-" "$corpus" "fuzz/seeds/$t" > "$log" 2>&1; then
    local runs corpus_size
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    corpus_size=$(ls "$corpus" | wc -l)
    echo "fuzz: $t clean: $runs executions in ${SECONDS_EACH}s, corpus $corpus_size inputs"
  else
    echo "fuzz: $t FOUND A PROBLEM (input in $BUILD_DIR/artifacts/):"
    grep -E "ERROR|SUMMARY|#[0-9]+ 0x" "$log" | cut -c1-200 | head -30
    return 1
  fi
}
export -f run_one
export BUILD_DIR SECONDS_EACH
printf '%s\n' "${TARGETS[@]}" | xargs -P 2 -I{} bash -c 'run_one {}'
echo "fuzz: ${#TARGETS[@]} targets clean"
