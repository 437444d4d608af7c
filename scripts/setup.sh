#!/usr/bin/env bash
# Installs dependencies from Debian's packages. Idempotent.
#   scripts/setup.sh               what the build and scripts/run.sh need
#   scripts/setup.sh --with-tests  also what only the tests need (or EMBEDLAB_SETUP=tests):
#                                  an sshd, clang's fuzzing runtimes, xvfb, clang-format,
#                                  Slurm and munge (scripts/slurm-local.sh), node, and
#                                  ONNX Runtime (npm's onnxruntime-node, see below)
# scripts/test.sh, sanitize.sh, fuzz.sh and .ci/run use --with-tests.
# As a user, sudo is used when it can be; without it the apt-get command to run as
# root is printed and the script exits with status 2.
# apt-get's output goes to $BUILD_DIR/logs/setup.log (build/logs/setup.log); with
# --verbose (or EMBEDLAB_VERBOSE=1) to the terminal. No service starts during the
# install (a policy-rc.d that forbids it is in place for the apt-get run, unless one is
# already there), and the services of the daemons the tests start themselves (ssh,
# munge, slurmctld, slurmd) are disabled, with or without systemd.
# Set EMBEDLAB_SKIP_SETUP=1 to skip (e.g. on a machine already set up).
set -euo pipefail
[ "${EMBEDLAB_SKIP_SETUP:-0}" = 1 ] && exit 0
cd "$(dirname "$0")/.."

MODE=${EMBEDLAB_SETUP:-main}
VERBOSE=${EMBEDLAB_VERBOSE:-0}
for arg in "$@"; do
  case $arg in
    --with-tests) MODE=tests ;;
    --verbose) VERBOSE=1 ;;
    *) echo "setup: unknown argument '$arg' (they are --with-tests and --verbose)" >&2; exit 2 ;;
  esac
done
case $MODE in
  main | tests) ;;
  *) echo "setup: EMBEDLAB_SETUP is '$MODE'; it can be main or tests" >&2; exit 2 ;;
esac

# The build (which configures and builds the test executables too) and scripts/run.sh.
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  # A compiler cache (CMakeLists.txt uses it when it is there): a clean clone on the
  # same machine rebuilds only what changed (~/.cache/ccache, outside the clone).
  ccache
  qt6-base-dev libgl-dev libqcustomplot-dev
  qt6-svg-dev  # figure export as SVG (QSvgGenerator)
  libtorch-dev libarmadillo-dev libeigen3-dev nlohmann-json3-dev
  libicu-dev libssl-dev
  # ONNX export: the ONNX project's protobuf classes and model checker.
  libonnx-dev
  libgtest-dev libgmock-dev
  # Without an optimised BLAS, libtorch and Armadillo fall back to the
  # reference BLAS and matrix products run about 20x slower.
  libopenblas0-pthread libopenblas-pthread-dev
  # Remote execution: the system OpenSSH client.
  openssh-client
  # The Python module (issue 43): pybind11 against Debian's Python 3 and NumPy.
  pybind11-dev python3-dev python3-numpy
)
# Only the tests need these (issue 24): nothing that builds or runs EmbedLab does.
TEST_PACKAGES=(
  # The remote tests start their own sshd on a loopback port; the system's ssh
  # service is stopped and disabled after the install (below).
  openssh-server
  # Fuzzing (scripts/fuzz.sh, EMBEDLAB_FUZZ): clang's libFuzzer and sanitizer runtimes.
  clang libclang-rt-dev
  # A virtual X server, for GUI runs on a machine without a display.
  xvfb xauth
  # scripts/format-check.sh (Debian 12: clang-format 14).
  clang-format
  # llama.cpp's gguf-py (../shared/tools/gguf-py) decodes GGUF blocks in the
  # dequantisation tests (tests/data/gguf_dequant_reference.py); gguf-py imports yaml.
  python3-numpy python3-yaml
  # The Python module's tests (pytest) and its example's figure (matplotlib, Agg);
  # venv and pip: the test that installs the module offline into a fresh venv; tqdm, pandas
  # and torch: progress=True, to_pandas() and to_torch() (their tests skip without them).
  python3-pytest python3-matplotlib python3-venv python3-pip python3-tqdm python3-pandas python3-torch
  # sweep --slurm (issue 22): Slurm's client tools, and the daemons that
  # scripts/slurm-local.sh starts as a single-node cluster for the `slurm` tests.
  # Their system services are stopped and disabled after the install (below).
  slurm-client slurmctld slurmd munge
  # The ONNX export tests run the exported files in ONNX Runtime, the npm package
  # onnxruntime-node (install_onnxruntime, below), under node.
  nodejs
)
# Debian's nodejs comes without npm, which is its own package; a nodejs from elsewhere
# (NodeSource's) has npm and conflicts with Debian's npm, so npm is added only when
# there is none and the nodejs installed, if any, does not conflict with it.
if ! command -v npm >/dev/null 2>&1 &&
  ! dpkg-query -W -f='${Conflicts}' nodejs 2>/dev/null | grep -qw npm; then
  TEST_PACKAGES+=(npm)
fi
if [ "$MODE" = tests ]; then
  PACKAGES+=("${TEST_PACKAGES[@]}")
fi

# ONNX Runtime for the tests (--with-tests only): npm's onnxruntime-node, at an exact
# version, in $BUILD_DIR/test-tools/onnxruntime (tests/onnx_runtime.hpp finds it there;
# nothing under git). The only download that is not a Debian package: Debian has no ONNX
# Runtime. Its install scripts are not run (--ignore-scripts: they fetch CUDA libraries);
# the package brings its CPU libraries (Linux x64 and arm64 are kept; macOS's and Windows'
# are removed). npm's cache and logs are in the directory while it runs (its output in
# $BUILD_DIR/logs/setup-onnxruntime.log). Without npm or the registry, a warning says that
# the ONNX Runtime tests will skip, and the set-up goes on.
ONNXRUNTIME_VERSION=1.30.0
TRANSFORMERS_JS_VERSION=4.3.2
# The test-only tools from npm (--with-tests only): ONNX Runtime, transformers.js, and the sampler tests'
# oracle, llama.cpp's own samplers (tests/tools/llamacpp_sampler.cpp) built against
# ../shared/tools/llama.cpp with node-llama-cpp's bundled headers.
install_test_tools() {
  install_onnxruntime
  install_transformers_js
  [ "$MODE" != tests ] || scripts/build-llamacpp-sampler.sh
}

install_onnxruntime() {
  local dir=${BUILD_DIR:-build}/test-tools/onnxruntime
  install_npm_tool "ONNX Runtime" onnxruntime-node "$ONNXRUNTIME_VERSION" "$dir" "a 115 MB download" \
    "the ONNX Runtime tests will skip" || return 0
  # The package's macOS and Windows libraries (220 MB).
  rm -rf "$dir/node_modules/onnxruntime-node/bin/napi-v6/"{darwin,win32}
}

# transformers.js's tokenizers (no model is downloaded): the oracle of the trimmed
# tokenizer.json files (tests/trim_test.cpp), in $BUILD_DIR/test-tools/transformers.
install_transformers_js() {
  install_npm_tool "transformers.js" @huggingface/transformers "$TRANSFORMERS_JS_VERSION" \
    "${BUILD_DIR:-build}/test-tools/transformers" "475 MB installed" \
    "the transformers.js tokenizer checks will skip" || return 0
}

# install_npm_tool LABEL PACKAGE VERSION DIR SIZE SKIPPED: npm's PACKAGE@VERSION into DIR
# (--with-tests only; nothing when that version is there). Returns 1 when it is not
# installed (a warning says SKIPPED), 0 otherwise.
install_npm_tool() {
  local label=$1 package=$2 version=$3 dir=$4 size=$5 skipped=$6
  [ "$MODE" = tests ] || return 1
  local manifest=$dir/node_modules/$package/package.json
  if [ -f "$manifest" ] &&
    [ "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$manifest" | head -n 1)" = "$version" ]; then
    echo "setup: $label for the tests (npm $package $version) already installed in $dir"
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "setup: warning: no npm (or no node): $label (npm $package) is not installed, and $skipped" >&2
    return 1
  fi
  local log_dir=${BUILD_DIR:-build}/logs
  local log=$log_dir/setup-$(basename "$dir").log
  mkdir -p "$log_dir" "$dir"
  echo "setup: installing $label for the tests with npm ($package $version, $size, usually 10-30 s) into $dir; npm's output goes to $log"
  printf '{\n  "description": "%s for EmbedLab'"'"'s tests: written by scripts/setup.sh --with-tests",\n  "private": true\n}\n' "$label" >"$dir/package.json"
  local start=$SECONDS status=0
  # A bound on the time: npm retries an unreachable registry for minutes.
  (cd "$dir" && timeout 900 npm install --ignore-scripts --no-audit --no-fund --save-exact \
    --cache "$PWD/.npm-cache" --fetch-retries 1 --fetch-timeout 60000 \
    "$package@$version") >"$log" 2>&1 || status=$?
  if [ "$VERBOSE" = 1 ]; then
    cat "$log"
  fi
  if [ "$status" != 0 ] || [ ! -f "$manifest" ]; then
    echo "setup: warning: npm install $package@$version failed (exit $status; registry unreachable?) after $((SECONDS - start)) s: $skipped. npm said (all of it is in $log):" >&2
    grep -m 4 '^npm error' "$log" >&2 || tail -n 5 "$log" >&2
    return 1
  fi
  rm -rf "$dir/.npm-cache"
  echo "setup: installed $label $version for the tests in $((SECONDS - start)) s ($(du -sh "$dir" | cut -f1) in $dir)"
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} Debian packages ($MODE) already installed"
  install_test_tools
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  # sudo without a password, or one that can ask for it on this terminal.
  if command -v sudo > /dev/null 2>&1 && { sudo -n true 2> /dev/null || [ -t 0 ]; }; then
    SUDO="sudo"
  else
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: not root, and sudo is not available here. As root, run:" >&2
    echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 2
  fi
fi
LOG_DIR=${BUILD_DIR:-build}/logs
LOG=$LOG_DIR/setup.log
mkdir -p "$LOG_DIR"
: >"$LOG"
echo "setup: installing ${#missing[@]} Debian packages with apt-get, and what they need: ${missing[*]}"
[ "$VERBOSE" = 1 ] || echo "setup: apt-get's output goes to $LOG (--verbose or EMBEDLAB_VERBOSE=1 shows it)"
# run CMD...: the command's output goes to the log (and the terminal with --verbose); on
# failure, its last lines and the log's path are printed.
run() {
  local status=0
  if [ "$VERBOSE" = 1 ]; then
    "$@" 2>&1 | tee -a "$LOG" || status=$?
  else
    "$@" >>"$LOG" 2>&1 || status=$?
  fi
  if [ "$status" != 0 ]; then
    echo "setup: failed (exit $status): $*" >&2
    [ "$VERBOSE" = 1 ] || tail -n 20 "$LOG" >&2
    echo "setup: the whole output is in $LOG" >&2
    exit "$status"
  fi
}

# No service starts while the packages are installed: a policy-rc.d that forbids it
# (invoke-rc.d honours it with or without systemd), removed again at the end, unless
# the machine already has one (containers often do).
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\n# Written by EmbedLab scripts/setup.sh for its apt-get run; removed after it.\nexit 101\n' |
    $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod 755 "$POLICY"
  trap '$SUDO rm -f "$POLICY"' EXIT
fi
start=$SECONDS
run $SUDO apt-get update -q
# env: sudo does not pass DEBIAN_FRONTEND through.
run $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: installed in $((SECONDS - start)) s"

# disable SERVICE...: stopped, and not started at boot, with or without systemd:
# systemctl when it is there; otherwise deb-systemd-helper removes the enable links in
# /etc/systemd/system/*.wants/, and update-rc.d disables the SysV links.
disable() {
  local service
  for service in "$@"; do
    if command -v systemctl >/dev/null 2>&1; then
      # --now needs a running systemd; without one, disable still removes the links.
      $SUDO systemctl disable --now "$service" >/dev/null 2>&1 || $SUDO systemctl disable "$service" >/dev/null 2>&1 || true
    elif command -v deb-systemd-helper >/dev/null 2>&1; then
      $SUDO deb-systemd-helper disable "$service.service" >/dev/null 2>&1 || true
      # It leaves the unit's aliases (ssh's sshd.service), which systemctl disable removes.
      local link
      for link in /etc/systemd/system/*.service; do
        if [ -L "$link" ] && [ "$(readlink "$link")" = "/lib/systemd/system/$service.service" ]; then
          $SUDO rm -f "$link"
        fi
      done
    fi
    if command -v service >/dev/null 2>&1; then
      $SUDO service "$service" stop >/dev/null 2>&1 || true
    fi
    if command -v update-rc.d >/dev/null 2>&1 && [ -e "/etc/init.d/$service" ]; then
      $SUDO update-rc.d "$service" disable >/dev/null 2>&1 || true
    fi
  done
}

# Debian's openssh-server enables and starts the ssh service (the policy-rc.d above
# stops the start). No daemon is left running or enabled: the tests start their own
# sshd on a loopback port with a private configuration.
case " ${missing[*]} " in
  *" openssh-server "*)
    disable ssh
    echo "setup: the system ssh service is stopped and disabled (the tests start their own sshd)"
    ;;
esac
# Likewise Slurm's and munge's services: scripts/slurm-local.sh runs its own,
# with a private configuration and key.
services=()
for service in slurmctld slurmd munge; do
  case " ${missing[*]} " in
    *" $service "*) services+=("$service") ;;
  esac
done
if [ ${#services[@]} -gt 0 ]; then
  disable "${services[@]}"
  echo "setup: the system ${services[*]} services are stopped and disabled (scripts/slurm-local.sh starts its own)"
fi

install_test_tools
