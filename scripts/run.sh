#!/usr/bin/env bash
# The main job: set up, build, then inspect and evaluate the bundled default model
# (tinygpt2-f16) on the bundled sample text, and open the GUI when a display is there.
#   scripts/run.sh            # everything
#   scripts/run.sh --no-gui   # engine only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
CLI="$BUILD_DIR/cli/embedlab-cli"

"$CLI" inspect
"$CLI" eval --text resources/texts/tinystories-heldout.txt
"$CLI" eval resources/models/stories260K.gguf --text resources/texts/tinystories-heldout.txt --ctx 256

if [ "${1:-}" != "--no-gui" ] && [ -x "$BUILD_DIR/app/embedlab" ]; then
  if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    exec "$BUILD_DIR/app/embedlab"
  else
    echo "run: no display; the GUI is $BUILD_DIR/app/embedlab (headless screenshot:"
    echo "     xvfb-run -a $BUILD_DIR/app/embedlab --screenshot embedlab.png)"
  fi
fi
