#!/usr/bin/env bash
# Checks that the C++ sources follow .clang-format (clang-format --dry-run -Werror;
# the project formats with Debian 12's clang-format 14). About a second for the whole
# tree, so CI runs it before the build.
#   scripts/format-check.sh         every git-tracked *.cpp, *.hpp, *.h (and new ones not ignored)
#   scripts/format-check.sh BASE    only those changed against BASE (a branch or commit)
# Fix a file with: clang-format -i FILE
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
if ! command -v "$CLANG_FORMAT" > /dev/null 2>&1; then
  echo "format-check: $CLANG_FORMAT not found (scripts/setup.sh --with-tests installs it)" >&2
  exit 2
fi
PATTERNS=('*.cpp' '*.hpp' '*.h')

listed=()
if [ $# -ge 1 ]; then
  if ! base=$(git merge-base "$1" HEAD 2> /dev/null); then
    echo "format-check: '$1' is not a branch or commit here" >&2
    exit 2
  fi
  # Changed since the common ancestor, committed or not, and new files.
  mapfile -d '' listed < <(git diff -z --name-only --diff-filter=ACMR "$base" -- "${PATTERNS[@]}"
                           git ls-files -z --others --exclude-standard -- "${PATTERNS[@]}")
  what="changed against $1"
else
  mapfile -d '' listed < <(git ls-files -z --cached --others --exclude-standard -- "${PATTERNS[@]}")
  what="tracked"
fi
files=()
for f in "${listed[@]}"; do
  [ -f "$f" ] && files+=("$f")
done
if [ ${#files[@]} -eq 0 ]; then
  echo "format-check: no C++ files $what"
  exit 0
fi

version=$("$CLANG_FORMAT" --version | grep -o 'version [0-9.]*' | head -1 || true)
if printf '%s\0' "${files[@]}" | xargs -0 "$CLANG_FORMAT" --dry-run -Werror > /dev/null 2>&1; then
  echo "format-check: ${#files[@]} C++ files ($what) follow .clang-format ($CLANG_FORMAT $version)"
  exit 0
fi
# Say which files, then the first differences.
bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --dry-run -Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done
echo "format-check: ${#bad[@]} of ${#files[@]} C++ files ($what) do not follow .clang-format ($CLANG_FORMAT $version):"
printf '  %s\n' "${bad[@]}"
"$CLANG_FORMAT" --dry-run -Werror "${bad[@]}" 2>&1 | head -40 || true
echo "format-check: fix with: $CLANG_FORMAT -i ${bad[*]}"
exit 1
