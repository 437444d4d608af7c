#!/usr/bin/env bash
# Proves that embedlab-cli builds for arm64 (Raspberry Pi: Debian / Raspberry Pi OS
# bookworm, aarch64) and computes the same numbers there as on x86-64 (issue 35).
#
# What it does:
#   1. a Debian bookworm build root (debootstrap, amd64) in ROOT_DIR, with arm64 as a
#      foreign architecture, the cross compiler (crossbuild-essential-arm64) and the arm64
#      -dev packages the engine and the CLI need (libtorch-dev:arm64 cannot be installed
#      beside the amd64 one on the same system, hence the separate root);
#   2. the committed HEAD (a clone, not the working tree) checked out in the root, and
#      a cross-build of the embedlab-cli target only (-DEMBEDLAB_BUILD_GUI=OFF
#      -DEMBEDLAB_BUILD_TESTS=OFF, a CMake toolchain file for aarch64-linux-gnu);
#   3. on arm64, then on x86-64 (a build of the same checkout on this machine, or
#      X86_CLI=path, an existing x86 embedlab-cli): `inspect`, `tokenize` and `eval` of
#      the bundled default model (tinygpt2-f16) on the bundled sample text
#      (resources/texts/tinystories-heldout.txt),
#      `compress --method pca --rank 32` and `eval` of the result, and `eval` of the
#      bundled stories260K.gguf (ctx 256, as scripts/run.sh); arm64 runs under
#      qemu-aarch64 (user mode) inside the root;
#   4. a table: perplexities, relative differences (pass within 1e-5), wall times.
# Exit status: 0 when every step ran, the token ids are the same and every perplexity
# agrees within 1e-5 relative; 1 when not; 2 when a step fails.
#
# How long (2 shared cores): the root about 10 min the first time (about 1.5 GB of
# packages), the cross-build 30-60 min (ccache makes a re-run of the same commit
# minutes), the x86 build about as long, the arm64 runs a few minutes under qemu.
# Not part of CI. Needs root (debootstrap, chroot, mounts) and Debian's apt mirror.
#
# Usage:
#   scripts/check-arm64.sh [ROOT_DIR]     # default /var/tmp/embedlab-arm64-root
# An existing ROOT_DIR (made by this script) is reused; delete it to start afresh.
# Environment: EMBEDLAB_COMMIT (default HEAD), X86_CLI (skip the x86 build), JOBS
# (default nproc), QEMU_CPU (default cortex-a72, a Raspberry Pi 4's), MIRROR (default
# http://deb.debian.org/debian), SECURITY_MIRROR.
# Everything it writes is under ROOT_DIR: the build root, and ROOT_DIR/embedlab/ with the
# source checkout (src), the builds (build-arm64, build-x86), ccache, the outputs (out)
# and the table (out/summary.txt).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
ROOT=${1:-/var/tmp/embedlab-arm64-root}
case $ROOT in /*) ;; *) ROOT=$PWD/$ROOT ;; esac
ROOT=${ROOT%/}
COMMIT_REF=${EMBEDLAB_COMMIT:-HEAD}
JOBS=${JOBS:-$(nproc)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
TOLERANCE=1e-5
QEMU_CPU=${QEMU_CPU:-cortex-a72}
MARKER=$ROOT/etc/embedlab-arm64-root # written once debootstrap has succeeded

say() { echo "check-arm64: $*"; }
die() { echo "check-arm64: $*" >&2; exit 2; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount)"
case $ROOT/ in
  "$REPO"/*) die "ROOT_DIR $ROOT is inside the repository; choose one outside it" ;;
  /) die "ROOT_DIR cannot be /" ;;
esac
[ "$(dpkg --print-architecture)" = amd64 ] || die "expects an amd64 Debian host"
mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock -n 9 || die "another run uses $ROOT ($ROOT.lock)"

# Wall time of each phase, for the table.
declare -A PHASE_SECONDS=()
PHASES=()
phase_start() { PHASE=$1; PHASE_T0=$(date +%s); say "== $PHASE"; }
phase_end() {
  PHASE_SECONDS[$PHASE]=$(($(date +%s) - PHASE_T0))
  PHASES+=("$PHASE")
  say "== $PHASE: ${PHASE_SECONDS[$PHASE]} s"
}

# ---------------------------------------------------------------------------
phase_start "host packages"
host_missing=()
for p in debootstrap jq; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || host_missing+=("$p")
done
if [ ${#host_missing[@]} -gt 0 ]; then
  say "installing on the host: ${host_missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${host_missing[@]}"
fi
phase_end

# ---------------------------------------------------------------------------
# Mounts inside the root, undone on any exit.
MOUNTS=()
cleanup() {
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    umount -l "${MOUNTS[$i]}" 2>/dev/null || echo "check-arm64: could not unmount ${MOUNTS[$i]}" >&2
  done
  MOUNTS=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mount_in_root() { # TYPE-or-bind SOURCE TARGET-in-root
  local target=$ROOT$3
  mkdir -p "$target"
  # One left by an interrupted run is reused, and unmounted at the end.
  if ! mountpoint -q "$target"; then
    if [ "$1" = bind ]; then mount --bind "$2" "$target"; else mount -t "$1" "$2" "$target"; fi
  fi
  MOUNTS+=("$target")
}
# ccache caches a compilation that uses the engine's precompiled header only with these.
CCACHE_PCH_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
# in_root CMD...: runs CMD in the root with a clean environment.
in_root() {
  chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive CCACHE_DIR=/embedlab/ccache \
    CCACHE_SLOPPINESS="$CCACHE_PCH_SLOPPINESS" "$@"
}

phase_start "build root"
if [ -e "$MARKER" ]; then
  say "reusing the build root $ROOT"
else
  # debootstrap works in ROOT_DIR.partial, renamed when it has succeeded.
  [ -e "$ROOT" ] && die "$ROOT exists but is not a build root made by this script; remove it or choose another"
  if [ -e "$ROOT.partial" ]; then
    say "removing $ROOT.partial, an unfinished debootstrap"
    for m in dev/pts dev proc sys; do umount -l "$ROOT.partial/$m" 2>/dev/null || true; done
    rm -rf --one-file-system "$ROOT.partial"
  fi
  debootstrap --variant=minbase bookworm "$ROOT.partial" "$MIRROR"
  mv "$ROOT.partial" "$ROOT"
  echo "EmbedLab scripts/check-arm64.sh build root (debootstrap bookworm $MIRROR)" >"$MARKER"
fi
mount_in_root proc proc /proc
mount_in_root bind /dev /dev
mount_in_root bind /dev/pts /dev/pts
# libtorch's cpuinfo reads /sys/devices/system/cpu/{possible,present} on arm64 and aborts
# without them ("cpuinfo initialization failed").
mount_in_root bind /sys /sys
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY_MIRROR bookworm-security main
EOF
# No service starts in the root.
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"

# The packages: amd64 tools, and the arm64 -dev packages that CMakeLists.txt's
# find_package calls need (Torch, nlohmann_json, Armadillo, Eigen3, ICU, OpenSSL), the
# same as scripts/setup.sh's for the engine and the CLI (no Qt, no GoogleTest).
HOST_TOOLS=(crossbuild-essential-arm64 cmake ninja-build pkg-config ccache qemu-user-static file)
ARM64_DEV=(libtorch-dev:arm64 libarmadillo-dev:arm64 libeigen3-dev nlohmann-json3-dev
  libicu-dev:arm64 libssl-dev:arm64 libopenblas0-pthread:arm64 libopenblas-pthread-dev:arm64)
WANT="${HOST_TOOLS[*]} ${ARM64_DEV[*]}"
STAMP=$ROOT/etc/embedlab-arm64-packages
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  in_root dpkg --add-architecture arm64
  in_root apt-get update -q
  # libtorch-dev depends on python3-dev (for the Python bindings' headers), and
  # python3-dev:arm64 on python3:arm64, whose maintainer scripts run arm64 programs:
  # without binfmt_misc (a container) dpkg cannot. The C++ build does not use Python, so
  # an empty python3-dev:arm64 stands in for it.
  if ! in_root dpkg-query -W -f='${Status}' python3-dev:arm64 2>/dev/null | grep -q "install ok installed"; then
    dummy=$ROOT/tmp/python3-dev-dummy
    rm -rf "$dummy"
    mkdir -p "$dummy/DEBIAN"
    cat >"$dummy/DEBIAN/control" <<'EOF'
Package: python3-dev
Version: 99:0embedlab1
Architecture: arm64
Multi-Arch: allowed
Maintainer: EmbedLab scripts/check-arm64.sh <root@localhost>
Description: empty stand-in for python3-dev:arm64 (cross-building libtorch users only)
EOF
    in_root dpkg-deb --build /tmp/python3-dev-dummy /tmp/python3-dev-dummy.deb
    in_root dpkg -i /tmp/python3-dev-dummy.deb
  fi
  in_root apt-get install -y -q --no-install-recommends "${HOST_TOOLS[@]}" "${ARM64_DEV[@]}"
  echo "$WANT" >"$STAMP"
else
  say "packages already installed in the root"
fi
# The toolchain: Debian's cross compiler finds the multiarch headers and libraries
# (/usr/include/aarch64-linux-gnu, /usr/lib/aarch64-linux-gnu) by itself; CMake looks
# for packages' configuration files for that architecture only.
mkdir -p "$ROOT/embedlab"
cat >"$ROOT/embedlab/aarch64-linux-gnu.cmake" <<'EOF'
# Written by EmbedLab scripts/check-arm64.sh: cross-compiling for arm64 Debian (multiarch).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR /usr/bin/qemu-aarch64-static)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
EOF
phase_end

# ---------------------------------------------------------------------------
phase_start "source checkout"
COMMIT=$(git -C "$REPO" rev-parse --verify "$COMMIT_REF^{commit}")
SRC=$ROOT/embedlab/src
# A clone of the repository checked out at COMMIT: checking out another commit later
# rewrites only the files that differ, so the builds stay incremental (an archive would
# give every file the commit's time, and ninja could keep objects older than that).
if [ "$(cat "$ROOT/embedlab/src.commit" 2>/dev/null)" = "$COMMIT" ] && [ -d "$SRC" ]; then
  say "reusing the checkout of $COMMIT"
else
  rm -f "$ROOT/embedlab/src.commit"
  if [ ! -d "$SRC/.git" ]; then
    rm -rf "$SRC"
    git clone -q --no-checkout "$REPO" "$SRC"
  fi
  git -C "$SRC" fetch -q --no-tags "$REPO" "+refs/heads/*:refs/remotes/origin/*"
  git -C "$SRC" cat-file -e "$COMMIT^{commit}" 2>/dev/null || git -C "$SRC" fetch -q "$REPO" "$COMMIT"
  git -C "$SRC" checkout -q --force --detach "$COMMIT"
  git -C "$SRC" clean -q -fdx
  echo "$COMMIT" >"$ROOT/embedlab/src.commit"
  say "checked out $COMMIT ($(git -C "$REPO" log -1 --format=%s "$COMMIT" | cut -c1-80))"
fi
phase_end

CMAKE_OPTIONS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBEDLAB_BUILD_GUI=OFF -DEMBEDLAB_BUILD_TESTS=OFF
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# ---------------------------------------------------------------------------
phase_start "cross-build (arm64)"
in_root cmake -S /embedlab/src -B /embedlab/build-arm64 "${CMAKE_OPTIONS[@]}" \
  -DCMAKE_TOOLCHAIN_FILE=/embedlab/aarch64-linux-gnu.cmake
in_root cmake --build /embedlab/build-arm64 -j "$JOBS" --target embedlab-cli
in_root file /embedlab/build-arm64/cli/embedlab-cli
phase_end

# ---------------------------------------------------------------------------
# The runs. run_steps ARCH RESOURCES OUT_AS_SEEN_BY_CLI OUT_ON_HOST CLI...: inspect,
# tokenize, eval, compress, eval of the compressed model, eval of stories260K; each step's
# stdout in OUT_ON_HOST/STEP.out, its stderr in STEP.err, its wall time in STEP.seconds.
OUT=$ROOT/embedlab/out
rm -rf "$OUT"
mkdir -p "$OUT/x86" "$OUT/arm64"
run_steps() {
  local arch=$1 res=$2 out=$3 host_out=$4
  shift 4
  local model=$res/models/tinygpt2-f16 text=$res/texts/tinystories-heldout.txt
  step() { # NAME ARGS...
    local name=$1 t0 t1
    shift
    say "$arch: embedlab-cli $*"
    t0=$(date +%s.%N)
    if ! "$@" >"$host_out/$name.out" 2>"$host_out/$name.err"; then
      cat "$host_out/$name.err" >&2
      die "$arch: step $name failed"
    fi
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", b - a }' >"$host_out/$name.seconds"
  }
  step inspect "$@" inspect "$model"
  step tokenize "$@" tokenize "$model" --text "$text" --quiet
  step eval "$@" eval "$model" --text "$text" --json --quiet
  step compress "$@" compress "$model" --method pca --rank 32 --out "$out/tinygpt2-f16-pca32" --force --json --quiet
  step eval-pca32 "$@" eval "$out/tinygpt2-f16-pca32" --text "$text" --json --quiet
  # Beyond issue 35's list, cheap: the bundled llama2.c model in GGUF (another loader,
  # tokenizer and architecture), as scripts/run.sh evaluates it.
  step eval-stories260K "$@" eval "$res/models/stories260K.gguf" --text "$text" --ctx 256 --json --quiet
}

phase_start "runs (arm64, qemu-aarch64)"
# Inside the root, so that the arm64 loader and libraries are found where they are
# installed; qemu-aarch64-static runs the program (no binfmt_misc needed). The emulated CPU
# is a Raspberry Pi 4's (Cortex-A72: NEON, no SVE), so that libtorch and OpenBLAS pick the
# kernels they pick on the Pi (qemu's default "max" CPU has SVE); QEMU_CPU=cortex-a76 for a Pi 5.
run_steps arm64 /embedlab/src/resources /embedlab/out/arm64 "$OUT/arm64" \
  in_root QEMU_CPU="$QEMU_CPU" EMBEDLAB_RESOURCES=/embedlab/src/resources \
  /usr/bin/qemu-aarch64-static /embedlab/build-arm64/cli/embedlab-cli
phase_end

# ---------------------------------------------------------------------------
phase_start "x86 build"
if [ -n "${X86_CLI:-}" ]; then
  [ -x "$X86_CLI" ] || die "X86_CLI=$X86_CLI is not an executable"
  say "using X86_CLI=$X86_CLI (not necessarily built from $COMMIT)"
else
  # The host's own packages (scripts/setup.sh's list) must be there for this build.
  for p in build-essential cmake ninja-build ccache libtorch-dev libarmadillo-dev libeigen3-dev \
    nlohmann-json3-dev libicu-dev libssl-dev libopenblas-pthread-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      die "the host lacks $p for the x86 build: run scripts/setup.sh, or set X86_CLI"
  done
  export CCACHE_DIR=$ROOT/embedlab/ccache-x86 CCACHE_SLOPPINESS=$CCACHE_PCH_SLOPPINESS
  cmake -S "$SRC" -B "$ROOT/embedlab/build-x86" "${CMAKE_OPTIONS[@]}"
  cmake --build "$ROOT/embedlab/build-x86" -j "$JOBS" --target embedlab-cli
  X86_CLI=$ROOT/embedlab/build-x86/cli/embedlab-cli
fi
phase_end

phase_start "runs (x86)"
run_steps x86 "$SRC/resources" "$OUT/x86" "$OUT/x86" "$X86_CLI"
phase_end

# ---------------------------------------------------------------------------
# The table.
ppl() { jq -er '.ppl' "$1"; }
status=0
{
  echo "commit $COMMIT; $(date -u '+%Y-%m-%d %H:%M UTC'); host $(uname -m), $(nproc) cores; $(in_root qemu-aarch64-static --version | head -1), -cpu $QEMU_CPU"
  echo
  printf '%-30s %14s %14s %10s %5s %9s %9s\n' step "ppl x86" "ppl arm64" "rel diff" "" "x86 s" "arm64 s"
  for s in eval eval-pca32 eval-stories260K; do
    a=$(ppl "$OUT/x86/$s.out") || die "no ppl in $OUT/x86/$s.out"
    b=$(ppl "$OUT/arm64/$s.out") || die "no ppl in $OUT/arm64/$s.out"
    line=$(awk -v a="$a" -v b="$b" -v tol="$TOLERANCE" 'BEGIN {
      d = (b - a) / a; ad = d < 0 ? -d : d
      printf "%14.6f %14.6f %10.2e %5s", a, b, d, (ad <= tol ? "pass" : "FAIL") }')
    case $line in *FAIL*) status=1 ;; esac
    name=$s
    [ "$s" = eval ] && name="eval tinygpt2-f16"
    [ "$s" = eval-pca32 ] && name="eval pca k=32"
    [ "$s" = eval-stories260K ] && name="eval stories260K.gguf ctx 256"
    printf '%-30s %s %9s %9s\n' "$name" "$line" "$(cat "$OUT/x86/$s.seconds")" "$(cat "$OUT/arm64/$s.seconds")"
  done
  for s in inspect tokenize compress; do
    printf '%-30s %14s %14s %10s %5s %9s %9s\n' "$s" "" "" "" "" "$(cat "$OUT/x86/$s.seconds")" "$(cat "$OUT/arm64/$s.seconds")"
  done
  echo
  echo "tokens evaluated: x86 $(jq -r '.tokens' "$OUT/x86/eval.out"), arm64 $(jq -r '.tokens' "$OUT/arm64/eval.out")"
  # The shared data's PyTorch reference (what the x86 tests compare with, within 1e-4).
  ref=$REPO/../shared/reference/perplexity.json
  if [ -f "$ref" ]; then
    r=$(jq -r '.results[] | select(.model == "models/tinygpt2-f16" and .text == "data/tinystories-heldout.txt"
      and .ctx == 128) | .ppl' "$ref" | head -1)
    [ -n "$r" ] && awk -v r="$r" -v a="$(ppl "$OUT/x86/eval.out")" -v b="$(ppl "$OUT/arm64/eval.out")" 'BEGIN {
      printf "tinygpt2-f16 against ../shared/reference/perplexity.json (%.6f): x86 %.2e, arm64 %.2e relative\n",
        r, (a - r) / r, (b - r) / r }'
  fi
  if cmp -s "$OUT/x86/tokenize.out" "$OUT/arm64/tokenize.out"; then
    echo "tokenize: the same $(wc -w <"$OUT/x86/tokenize.out") token ids on both"
  else
    echo "tokenize: the token ids differ (FAIL)"
    status=1
  fi
  if diff <(sed "s#$SRC#SRC#g" "$OUT/x86/inspect.out") <(sed "s#/embedlab/src#SRC#g" "$OUT/arm64/inspect.out") >"$OUT/inspect.diff"; then
    echo "inspect: the same output on both"
  else
    echo "inspect: outputs differ ($OUT/inspect.diff)"
  fi
  echo
  for p in "${PHASES[@]}"; do printf 'phase %-28s %6s s\n' "$p" "${PHASE_SECONDS[$p]}"; done
  echo
  [ $status = 0 ] && echo "PASS: every perplexity within $TOLERANCE relative" ||
    echo "FAIL: a perplexity differs by more than $TOLERANCE relative"
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $status
