#!/usr/bin/env bash
# Quick start, step 2: install, build, and run the whole test suite (ctest). `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
cd build
ctest --output-on-failure -j 1
