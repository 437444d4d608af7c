#!/usr/bin/env bash
# Builds the llama.cpp sampling oracle of tests/sampler_test.cpp:
# $BUILD_DIR/test-tools/llamacpp-sampler/llamacpp-sampler (tests/tools/llamacpp_sampler.cpp),
# linked against the prebuilt ../shared/tools/llama.cpp/libllama.so (EMBEDLAB_SHARED_DIR
# overrides ../shared). llama.h is not in shared/: it comes from the llama.cpp that
# node-llama-cpp 3.22.1 carries as a git bundle (the source that library was built from),
# fetched with npm (a 36 MB download, removed afterwards). Idempotent.
# Offline-tolerant: without npm, git, g++, the registry or shared/, it says why and exits 0;
# the oracle tests then skip, naming this script.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=3.22.1
COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6 # shared/tools/llama.cpp/README.md's
OUT=${BUILD_DIR:-build}/test-tools/llamacpp-sampler
LLAMA=${EMBEDLAB_SHARED_DIR:-../shared}/tools/llama.cpp
SOURCE=tests/tools/llamacpp_sampler.cpp

skip() {
  echo "build-llamacpp-sampler: $1; the llama.cpp sampler oracle tests will skip" >&2
  exit 0
}

if [ -x "$OUT/llamacpp-sampler" ] && [ "$OUT/llamacpp-sampler" -nt "$SOURCE" ]; then
  echo "build-llamacpp-sampler: $OUT/llamacpp-sampler is up to date"
  exit 0
fi
[ -f "$LLAMA/libllama.so.0.5.0" ] || skip "no prebuilt llama.cpp at $LLAMA"
for tool in npm git g++ objdump; do
  command -v "$tool" >/dev/null 2>&1 || skip "no $tool"
done

# The soname links, made from the real files: shared/'s may be text files naming their
# target (a copy without symlinks), which the linker cannot read.
mkdir -p "$OUT/lib"
for f in "$LLAMA"/lib*.so*; do
  [ "$(head -c 4 "$f" | tr -d '\0')" = $'\x7fELF' ] || continue
  soname=$(objdump -p "$f" | awk '/SONAME/ { print $2 }')
  [ -n "$soname" ] || continue
  ln -sfn "$(realpath "$f")" "$OUT/lib/$soname"
  ln -sfn "$(realpath "$f")" "$OUT/lib/${soname%%.so*}.so"
done

work=$OUT/work
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
echo "build-llamacpp-sampler: fetching node-llama-cpp@$VERSION with npm for llama.h"
# A bound on the time: npm retries an unreachable registry for minutes.
if ! (cd "$work" && timeout 300 npm pack --loglevel error --cache "$PWD/.npm-cache" --fetch-retries 1 \
  --fetch-timeout 60000 "node-llama-cpp@$VERSION") >"$work/npm.log" 2>&1; then
  skip "npm pack node-llama-cpp@$VERSION failed (registry unreachable?): $(grep -m 1 '^npm error' "$work/npm.log" || tail -n 1 "$work/npm.log")"
fi
tar -xzf "$work/node-llama-cpp-$VERSION.tgz" -C "$work" package/llama/gitRelease.bundle ||
  skip "node-llama-cpp@$VERSION has no llama/gitRelease.bundle"
git clone -q --no-checkout "$work/package/llama/gitRelease.bundle" "$work/llama.cpp" 2>"$work/git.log" ||
  skip "cannot read the bundle: $(tail -n 1 "$work/git.log")"
head=$(git -C "$work/llama.cpp" rev-parse HEAD)
[ "$head" = "$COMMIT" ] || echo "build-llamacpp-sampler: warning: the bundle is llama.cpp $head, the library $COMMIT" >&2
mkdir -p "$work/headers"
git -C "$work/llama.cpp" archive HEAD include/llama.h ggml/include | tar -x -C "$work/headers" ||
  skip "the bundle has no include/llama.h"

# $ORIGIN is the loader's (the harness finds lib/ beside it), not the shell's.
# shellcheck disable=SC2016
g++ -O2 -std=c++17 "$SOURCE" -I"$work/headers/include" -I"$work/headers/ggml/include" \
  -L"$OUT/lib" -lllama -Wl,-rpath,'$ORIGIN/lib' -o "$OUT/llamacpp-sampler" ||
  skip "compiling $SOURCE failed"
echo 2 1 0 | "$OUT/llamacpp-sampler" 0 0.8 0.05 0.5 >/dev/null || {
  rm -f "$OUT/llamacpp-sampler"
  skip "the harness does not run"
}
echo "build-llamacpp-sampler: built $OUT/llamacpp-sampler (llama.cpp ${head:0:12})"
