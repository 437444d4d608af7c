#!/usr/bin/env bash
# Configures and builds EmbedLab (Release) in build/ (override with BUILD_DIR).
# Extra CMake arguments are passed through, e.g. -DEMBEDLAB_SANITIZE="address;undefined".
# EMBEDLAB_TARGETS="a b" builds only those targets (scripts/run.sh: the programs, no tests).
# CMake's and ninja's output goes to $BUILD_DIR/logs/build.log; the terminal gets the
# progress at each quarter, every compiler warning, and on failure the log's last lines.
# EMBEDLAB_VERBOSE=1 (run.sh --verbose) shows all of it instead.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
TARGETS=()
for t in ${EMBEDLAB_TARGETS:-}; do TARGETS+=(--target "$t"); done
if [ "${EMBEDLAB_VERBOSE:-0}" = 1 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${TARGETS[@]}"
  exit
fi
mkdir -p "$BUILD_DIR/logs"
LOG=$BUILD_DIR/logs/build.log
: >"$LOG"
failed() {
  echo "build: failed; the last lines of $LOG:" >&2
  tail -n 40 "$LOG" >&2
  echo "build: the whole output is in $LOG (EMBEDLAB_VERBOSE=1 shows it as it comes)" >&2
  exit 1
}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@" >>"$LOG" 2>&1 || failed
# ninja's "[done/total]" lines become one line per quarter; warnings pass through.
set +e
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${TARGETS[@]}" 2>&1 | tee -a "$LOG" |
  awk '
    match($0, /^\[[0-9]+\/[0-9]+\]/) {
      split(substr($0, 2, RLENGTH - 2), n, "/")
      if (n[2] >= 8 && n[1] * 4 >= (q + 1) * n[2] && q < 3) { q = int(n[1] * 4 / n[2]); printf "build: %d of %d steps\n", n[1], n[2]; fflush() }
      next
    }
    / warning: / { print; fflush() }
  '
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || failed
warnings=$(grep -c ' warning: ' "$LOG" || true)
if [ "$warnings" -gt 0 ]; then
  echo "build: done, with $warnings warnings (above; the whole output is in $LOG)"
else
  echo "build: done, no warnings (output in $LOG)"
fi
