#!/usr/bin/env bash
# The main job: set up, build, then inspect and evaluate the bundled default model
# (tinygpt2-f16) on the bundled sample text, compress its embedding and evaluate the
# compressed model, and open the GUI when a display is there (otherwise run the demo).
#   scripts/run.sh            # everything
#   scripts/run.sh --no-gui   # engine only (no GUI, no demo)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The programs only (no test executables): about half the build.
EMBEDLAB_TARGETS="embedlab-cli embedlab embedlab-figure" scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
CLI="$BUILD_DIR/cli/embedlab-cli"

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
if [ "${1:-}" != "--no-gui" ] && [ -x "$BUILD_DIR/app/embedlab" ]; then
  if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    exec "$BUILD_DIR/app/embedlab"
  else
    echo "run: no display; running the demo (the GUI is $BUILD_DIR/app/embedlab)"
    "$CLI" demo --out "$BUILD_DIR/demo"
    echo "run: the demo report is $BUILD_DIR/demo/report.html"
  fi
fi
