#!/usr/bin/env bash
# Installs every build and run dependency from Debian's packages. Idempotent.
# Set EMBEDLAB_SKIP_SETUP=1 to skip (e.g. on a machine already set up).
set -euo pipefail
[ "${EMBEDLAB_SKIP_SETUP:-0}" = 1 ] && exit 0

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  qt6-base-dev libgl-dev libqcustomplot-dev
  qt6-svg-dev  # figure export as SVG (QSvgGenerator)
  libtorch-dev libarmadillo-dev libeigen3-dev nlohmann-json3-dev
  libicu-dev libssl-dev
  libgtest-dev libgmock-dev
  # Without an optimised BLAS, libtorch and Armadillo fall back to the
  # reference BLAS and matrix products run about 20x slower.
  libopenblas0-pthread libopenblas-pthread-dev
  xvfb xauth
  # Remote execution: the system OpenSSH client; the tests start a real sshd on loopback.
  openssh-client openssh-server
  # Fuzzing (EMBEDLAB_FUZZ): clang's libFuzzer and sanitizer runtimes.
  clang libclang-rt-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} Debian packages already installed"
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
