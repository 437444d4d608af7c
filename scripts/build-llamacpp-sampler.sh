#!/usr/bin/env bash
# Builds the llama.cpp oracles of the tests, each linked against
# the prebuilt ../shared/tools/llama.cpp/libllama.so:
# - $BUILD_DIR/test-tools/llamacpp-sampler/llamacpp-sampler (tests/tools/llamacpp_sampler.cpp),
#   llama.cpp's samplers for tests/sampler_test.cpp;
# - $BUILD_DIR/test-tools/llamacpp-tokenize/llamacpp-tokenize (tests/tools/llamacpp_tokenize.cpp),
#   llama.cpp's tokenizer for tests/trim_llamacpp_test.cpp;
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
TOOLS=${BUILD_DIR:-build}/test-tools
LLAMA=${EMBEDLAB_SHARED_DIR:-../shared}/tools/llama.cpp
HARNESSES="sampler tokenize" # tests/tools/llamacpp_<name>.cpp -> $TOOLS/llamacpp-<name>/

skip() {
  echo "build-llamacpp-sampler: $1; the llama.cpp oracle tests (sampler, tokenizer) will skip" >&2
  exit 0
}

up_to_date=yes
for name in $HARNESSES; do
  binary=$TOOLS/llamacpp-$name/llamacpp-$name
  [ -x "$binary" ] && [ "$binary" -nt "tests/tools/llamacpp_$name.cpp" ] || up_to_date=no
done
if [ $up_to_date = yes ]; then
  echo "build-llamacpp-sampler: the harnesses in $TOOLS are up to date"
  exit 0
fi
OUT=$TOOLS/llamacpp-sampler
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

for name in $HARNESSES; do
  dir=$TOOLS/llamacpp-$name
  if [ "$dir" != "$OUT" ]; then # the same soname links beside each harness
    mkdir -p "$dir"
    rm -rf "${dir:?}/lib"
    cp -a "$OUT/lib" "$dir/lib"
  fi
  # $ORIGIN is the loader's (the harness finds lib/ beside it), not the shell's.
  # shellcheck disable=SC2016
  g++ -O2 -std=c++17 "tests/tools/llamacpp_$name.cpp" -I"$work/headers/include" -I"$work/headers/ggml/include" \
    -L"$dir/lib" -lllama -Wl,-rpath,'$ORIGIN/lib' -o "$dir/llamacpp-$name" ||
    skip "compiling tests/tools/llamacpp_$name.cpp failed"
done
# Each runs: the sampler on three logits, the tokenizer's usage line (exit status 2).
status=0
echo 2 1 0 | "$OUT/llamacpp-sampler" 0 0.8 0.05 0.5 >/dev/null || status=$?
"$TOOLS/llamacpp-tokenize/llamacpp-tokenize" 2>/dev/null || [ $? = 2 ] || status=1
if [ $status != 0 ]; then
  for name in $HARNESSES; do rm -f "$TOOLS/llamacpp-$name/llamacpp-$name"; done
  skip "the harnesses do not run"
fi
echo "build-llamacpp-sampler: built $(for name in $HARNESSES; do printf '%s ' "$TOOLS/llamacpp-$name/llamacpp-$name"; done)(llama.cpp ${head:0:12})"
