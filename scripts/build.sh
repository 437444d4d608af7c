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
ccache_before=""
if command -v ccache > /dev/null 2>&1 && grep -q '^EMBEDLAB_CCACHE_PROGRAM:.*ccache' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  ccache_before=$(ccache --print-stats 2>/dev/null | awk '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 } $1 == "cache_miss" { m += $2 } END { print h + 0, m + 0 }')
fi
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
# What the compiler cache saved (cmake/Ccache.cmake): a fresh clone after an earlier
# build should hit nearly everything.
if [ -n "$ccache_before" ]; then
  ccache_after=$(ccache --print-stats 2>/dev/null | awk '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 } $1 == "cache_miss" { m += $2 } END { print h + 0, m + 0 }')
  read -r h0 m0 <<<"$ccache_before"
  read -r h1 m1 <<<"$ccache_after"
  echo "build: ccache: $((h1 - h0)) compilations reused, $((m1 - m0)) compiled"
fi
warnings=$(grep -c ' warning: ' "$LOG" || true)
if [ "$warnings" -gt 0 ]; then
  echo "build: done, with $warnings warnings (above; the whole output is in $LOG)"
else
  echo "build: done, no warnings (output in $LOG)"
fi
