#!/usr/bin/env bash
# Set up (scripts/setup.sh --with-tests: the tests' packages too), build, and run the
# test suite: the unit, slow and gui labels, then the reference label (the full-text
# reference perplexities, a few minutes more; EMBEDLAB_REFERENCE=0 leaves it out).
# Arguments replace that with one ctest run of their own, e.g.
#   scripts/test.sh -L unit        scripts/test.sh -L reference
# Tests that need ../shared skip with a message when it is absent.
# EMBEDLAB_SKIP_SETUP=1 and EMBEDLAB_SKIP_BUILD=1 skip those steps (.ci/run times
# them as phases of their own).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-tests
[ "${EMBEDLAB_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
CTEST=(ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}")
# Every ctest run closes with its summary line ("100% tests passed, 0 tests failed out of N"),
# then the reason of each skipped test (ctest prints only "***Skipped"; issue 24).
run_ctest() {
  local status=0
  "${CTEST[@]}" "$@" || status=$?
  scripts/skip-reasons.sh "$BUILD_DIR"
  return $status
}
if [ $# -gt 0 ]; then
  run_ctest "$@"
  exit
fi
# Both runs happen even when the first fails (a failure there must not hide the
# reference label's result); the exit status is non-zero if either failed.
main_status=0
run_ctest -LE reference || main_status=$?
reference="left out (EMBEDLAB_REFERENCE=0; ctest --test-dir $BUILD_DIR -L reference runs it)"
reference_status=0
if [ "${EMBEDLAB_REFERENCE:-1}" = 1 ]; then
  echo "test: the reference label (the full-text reference perplexities)"
  run_ctest -L reference || reference_status=$?
  if [ "$reference_status" = 0 ]; then reference="passed"; else reference="FAILED (ctest exit $reference_status)"; fi
fi
if [ "$main_status" = 0 ]; then main="passed"; else main="FAILED (ctest exit $main_status)"; fi
echo "test: every label but reference: $main; reference: $reference"
[ "$main_status" = 0 ] && [ "$reference_status" = 0 ]
