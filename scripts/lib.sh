# Sourced by scripts/run.sh and scripts/test.sh (not run on its own).
# Needs BUILD_DIR and PHASE_PREFIX ("run", "test") set by the script that sources it.

# Qt wants a private runtime directory; a machine without a login session has none.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  mkdir -p "$BUILD_DIR/xdg-runtime"
  chmod 700 "$BUILD_DIR/xdg-runtime"
  XDG_RUNTIME_DIR=$(cd "$BUILD_DIR/xdg-runtime" && pwd)
  export XDG_RUNTIME_DIR
fi
PHASE_START=$SECONDS
PHASE=""
# phase NAME TEXT: closes the previous phase with its time and announces the next.
phase() {
  [ -z "$PHASE" ] || echo "$PHASE_PREFIX: $PHASE took $((SECONDS - PHASE_START)) s"
  PHASE=$1
  PHASE_START=$SECONDS
  [ -z "$2" ] || echo "$PHASE_PREFIX: ---- $2"
}
