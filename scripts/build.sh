#!/usr/bin/env bash
# Configures and builds EmbedLab (Release) in build/ (override with BUILD_DIR).
# Extra CMake arguments are passed through, e.g. -DEMBEDLAB_SANITIZE="address;undefined".
# EMBEDLAB_TARGETS="a b" builds only those targets (scripts/run.sh: the programs, no tests).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
TARGETS=()
for t in ${EMBEDLAB_TARGETS:-}; do TARGETS+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${TARGETS[@]}"
