#!/usr/bin/env bash
# Installs what stepsim needs to build (Debian packages), configures and builds it.
#   tools/setup.sh [build-dir]      (default: build)
# Idempotent: installs only missing packages (apt-get; run as root, or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}

PACKAGES=(cmake ninja-build g++ ccache libboost-program-options-dev libboost-iostreams-dev
          nlohmann-json3-dev libfmt-dev catch2 libopenmpi-dev openmpi-bin
          clang libclang-rt-dev)  # clang + libFuzzer/sanitizer runtimes: the hardening build (tools/test.sh)
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

# The ground truth (../shared/data: traces, nccl-tests logs, published runs) that the tests,
# `validate` and the docs' examples read sits beside the checkout. A clone made elsewhere from a
# local checkout (git clone /path/to/stepsim "$(mktemp -d)") finds it beside its origin, or at
# $STEPSIM_SHARED, and links it in as ../shared; the default simulation does not need it.
if [ ! -d ../shared/data ] && [ ! -e ../shared ]; then
  origin=$(git config remote.origin.url 2>/dev/null || true)
  for cand in "${STEPSIM_SHARED:-}" "${origin:+$origin/../shared}"; do
    if [ -n "$cand" ] && [ -d "$cand/data" ]; then
      ln -s "$(cd "$cand" && pwd)" ../shared
      echo "setup: ../shared -> $(cd "$cand" && pwd) (the ground-truth data beside the origin checkout)"
      break
    fi
  done
fi
[ -d ../shared/data ] || echo "setup: no ../shared/data beside this checkout (nor at \$STEPSIM_SHARED): the tests and validate need it" >&2

JOBS=$(nproc)
# Optimized, with line-table debug info (-g1: backtraces and profilers name file and line; full
# -g made each file's compile a third slower, and CI's whole run must stay under 30 minutes on 2
# cores). Configure -DCMAKE_BUILD_TYPE=Debug for a debugger's variables.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
