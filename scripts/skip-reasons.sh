#!/usr/bin/env bash
# Prints why each skipped test skipped, from the last ctest run's log (ctest's own
# summary says only "***Skipped"). Usage: scripts/skip-reasons.sh [BUILD_DIR]
set -euo pipefail
LOG="${1:-build}/Testing/Temporary/LastTest.log"
[ -f "$LOG" ] || exit 0
# GoogleTest prints "<file>:<line>: Skipped", the message, then "[  SKIPPED ] <name> (<ms> ms)".
awk '
  /: Skipped$/ { collecting = 1; reason = ""; next }
  collecting && /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ {
    name = $0; sub(/^\[  SKIPPED \] /, "", name); sub(/ \([0-9]+ ms\)$/, "", name)
    printf "  skipped %s: %s\n", name, (reason == "" ? "(no reason given)" : reason)
    collecting = 0; count++; next
  }
  collecting { reason = (reason == "" ? $0 : reason " " $0) }
  END { if (count) printf "test: %d skipped, reasons above\n", count }
' "$LOG"
