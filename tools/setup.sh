#!/usr/bin/env bash
# Installs what stepsim needs to build (Debian packages), configures and builds it.
#   tools/setup.sh [build-dir]      (default: build)
# Idempotent: installs only missing packages (apt-get; run as root, or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}

PACKAGES=(cmake ninja-build g++ ccache libboost-program-options-dev libboost-iostreams-dev
          nlohmann-json3-dev libfmt-dev catch2 libopenmpi-dev openmpi-bin
          zlib1g-dev  # libz.a: the static stepsim binary (STEPSIM_STATIC_CLI)
          clang libclang-rt-dev  # clang + libFuzzer/sanitizer runtimes: the hardening build (tools/test.sh)
          python3-dev python3-venv)  # the Python package (tools/python_test.sh: pip install .)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

JOBS=$(nproc)
# Optimized, with line-table debug info (-g1: backtraces and profilers name file and line; full
# -g made each file's compile a third slower, and CI's whole run must stay under 30 minutes on 2
# cores). Configure -DCMAKE_BUILD_TYPE=Debug for a debugger's variables.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
