#!/usr/bin/env bash
# Set up (scripts/setup.sh --with-tests: the tests' packages too), build, and run the
# test suite: the unit, slow and gui labels, then the reference label (the full-text
# reference perplexities, a few minutes more; EMBEDLAB_REFERENCE=0 leaves it out).
# Arguments replace that with one ctest run of their own, e.g.
#   scripts/test.sh -L unit        scripts/test.sh -L reference
# Tests that need ../shared skip with a message when it is absent.
# EMBEDLAB_SKIP_SETUP=1 and EMBEDLAB_SKIP_BUILD=1 skip those steps (.ci/run times
# them as phases of their own).
# One line per phase says what comes and how long it usually takes (2 cores; the README's
# set-up section); apt-get's and CMake's output go to build/logs/ unless EMBEDLAB_VERBOSE=1.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
PHASE_PREFIX=test
# shellcheck source=scripts/lib.sh
source scripts/lib.sh # XDG_RUNTIME_DIR, phase NAME TEXT
if [ "${EMBEDLAB_SKIP_SETUP:-0}" != 1 ]; then
  phase setup "setup: the tests' Debian packages too (on a fresh Debian 12 a 64 MB download more: under a minute; seconds when installed)"
  scripts/setup.sh --with-tests
fi
if [ "${EMBEDLAB_SKIP_BUILD:-0}" != 1 ]; then
  phase build "build: everything, the test programs too (from scratch about 20 min on 2 cores; after scripts/run.sh about 7 min)"
  scripts/build.sh
fi
# ctest runs a test per core, so each test computes on one thread (libtorch, OpenMP,
# OpenBLAS): two 2-thread tests on 2 cores spent a fifth of their time oversubscribed
# (three heavy suites: 145 s -> 119 s, system time 43 s -> 9 s). Set them to override.
# OMP_WAIT_POLICY: what embedlab-cli sets by restarting itself when it is unset; set here, each
# of the tests' few hundred CLI runs loads libtorch once instead of twice (0.7 s each;
# CliLle.BadInputIsRefused 20 s -> 13 s). Cli.RestartsWithAPassiveOpenmpWaitPolicy... unsets it.
CTEST=(env EMBEDLAB_THREADS="${EMBEDLAB_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
  OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
  OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}")
# Every embedlab-cli the tests start appends its CPU seconds there (cli/main.cpp), so the
# tests' cost in CLI processes is counted (issue 58); a fresh log for each ctest run.
# (absolute: the tests run the CLI from their own working directories)
EMBEDLAB_CLI_LOG=$(realpath -m "$BUILD_DIR/logs/cli-processes.log")
export EMBEDLAB_CLI_LOG
mkdir -p "$BUILD_DIR/logs"
# Every ctest run closes with its summary line ("100% tests passed, 0 tests failed out of N"),
# then the reason of each skipped test (ctest prints only "***Skipped"; issue 24).
run_ctest() {
  local status=0
  : > "$EMBEDLAB_CLI_LOG"
  "${CTEST[@]}" "$@" || status=$?
  scripts/skip-reasons.sh "$BUILD_DIR"
  count_cases
  awk '{ n++; cpu += $1; by[$3] += $1 } END {
         if (n == 0) exit
         top = ""; for (c in by) if (top == "" || by[c] > by[top]) top = c
         printf "test: the tests started %d embedlab-cli processes, %.0f CPU s in all (most: %s, %.0f s)\n", n, cpu, top, by[top] }' \
    "$EMBEDLAB_CLI_LOG"
  return $status
}
# How many ctest tests ran and how many GoogleTest cases they held (each ctest test runs
# one suite's cases; "[==========] N tests from M test suites ran." per program run),
# so that a change that drops cases shows in the last lines.
count_cases() {
  local log=$BUILD_DIR/Testing/Temporary/LastTest.log
  [ -f "$log" ] || return 0
  awk '
    /^[0-9]+\/[0-9]+ Testing: / { ctest++ }
    /^\[==========\] [0-9]+ tests? from [0-9]+ test suites? ran/ { gtest += $2 }
    /^\[  SKIPPED \] [0-9]+ tests?,/ { skipped += $4 }
    /^[0-9]+ passed/ { pytest += $1 } # pytest -q: "37 passed, 2 skipped in 12.3s"
    END { printf "test: %d ctest tests run, holding %d GoogleTest cases (%d of them skipped) and %d passed pytest cases\n", ctest, gtest, skipped, pytest }
  ' "$log"
}
if [ $# -gt 0 ]; then
  phase "" ""
  run_ctest "$@"
  exit
fi
# Both runs happen even when the first fails (a failure there must not hide the
# reference label's result); the exit status is non-zero if either failed.
main_status=0
phase tests "tests: every label but reference: unit, slow, gui, slurm (about 11 min on 2 cores)"
run_ctest -LE reference || main_status=$?
reference="left out (EMBEDLAB_REFERENCE=0; ctest --test-dir $BUILD_DIR -L reference runs it)"
reference_status=0
if [ "${EMBEDLAB_REFERENCE:-1}" = 1 ]; then
  phase reference "reference: the full-text reference perplexities (about 4 min on 2 cores)"
  run_ctest -L reference || reference_status=$?
  if [ "$reference_status" = 0 ]; then reference="passed"; else reference="FAILED (ctest exit $reference_status)"; fi
fi
phase "" ""
if [ "$main_status" = 0 ]; then main="passed"; else main="FAILED (ctest exit $main_status)"; fi
echo "test: every label but reference: $main; reference: $reference"
[ "$main_status" = 0 ] && [ "$reference_status" = 0 ]
