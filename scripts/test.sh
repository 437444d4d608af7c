#!/usr/bin/env bash
# Set up, build, and run the whole test suite (unit, slow and gui labels).
# Tests that need ../shared skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
# The ctest summary line ("100% tests passed, 0 tests failed out of N") closes the run.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}" "$@"
