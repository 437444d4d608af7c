#!/usr/bin/env bash
# The main job: set up, build, then inspect and evaluate the bundled default model
# (tinygpt2-f16) on the bundled sample text, compress its embedding and evaluate the
# compressed model, and open the GUI when a display is there (otherwise run the demo).
#   scripts/run.sh            # everything
#   scripts/run.sh --no-gui   # engine only (no GUI, no demo)
#   scripts/run.sh --verbose  # apt-get's, CMake's and ninja's output on the terminal too
# One line per phase says what comes and how long it usually takes (2 cores, the README's
# set-up section); apt-get's output is in build/logs/setup.log, CMake's and ninja's in
# build/logs/build.log.
set -euo pipefail
cd "$(dirname "$0")/.."
GUI=1
for arg in "$@"; do
  case $arg in
    --no-gui) GUI=0 ;;
    --verbose) export EMBEDLAB_VERBOSE=1 ;;
    *) echo "run: unknown argument '$arg' (they are --no-gui and --verbose)" >&2; exit 2 ;;
  esac
done
BUILD_DIR=${BUILD_DIR:-build}
CLI="$BUILD_DIR/cli/embedlab-cli"
PHASE_PREFIX=run
# shellcheck source=scripts/lib.sh
source scripts/lib.sh # XDG_RUNTIME_DIR, phase NAME TEXT

phase setup "[1/4] setup: the Debian packages the build and the main job need (on a fresh Debian 12 a 369 MB download: 1 to 8 min, by the mirror; seconds when installed)"
scripts/setup.sh
phase build "[2/4] build: the programs embedlab-cli, embedlab and embedlab-figure, and the Python module (from scratch about 13 min on 2 cores)"
EMBEDLAB_TARGETS="embedlab-cli embedlab embedlab-figure embedlab_python" scripts/build.sh
phase main "[3/4] the main job on the bundled models: inspect, evaluate, compress (PCA, k = 32), evaluate the result (about 30 s)"
"$CLI" inspect
"$CLI" eval --text resources/texts/tinystories-heldout.txt
"$CLI" eval resources/models/stories260K.gguf --text resources/texts/tinystories-heldout.txt --ctx 256
# Compress the bundled model's embedding (PCA, k = 32), evaluate before and after,
# write the compressed directory with a dense export, and reload it.
"$CLI" compress --method pca --rank 32 --eval-text resources/texts/tinystories-heldout.txt \
  --out "$BUILD_DIR/run/tinygpt2-f16-pca32" --dense --force
"$CLI" eval "$BUILD_DIR/run/tinygpt2-f16-pca32" --text resources/texts/tinystories-heldout.txt

# With a display: the GUI. Without one: the demo, the workbench's headless face
# (every figure and a report in $BUILD_DIR/demo).
if [ "$GUI" = 1 ] && [ -x "$BUILD_DIR/app/embedlab" ]; then
  if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    phase "" ""
    echo "run: [4/4] the GUI ($BUILD_DIR/app/embedlab)"
    exec "$BUILD_DIR/app/embedlab"
  else
    phase demo "[4/4] no display, so the demo instead of the GUI: every method, every figure and a report in $BUILD_DIR/demo (about 7 min on 2 cores)"
    "$CLI" demo --out "$BUILD_DIR/demo" --force # replaces the previous demo (only what EmbedLab wrote)
    phase "" ""
    echo "run: the demo report is $BUILD_DIR/demo/report.html (the GUI is $BUILD_DIR/app/embedlab)"
  fi
else
  phase "" ""
fi
echo "run: done in $SECONDS s"
