#!/usr/bin/env bash
# The Python package (issue 51, docs/python.md): `pip install .` into a virtual environment kept in
# BUILD_DIR/python/venv, then pytest (python/tests) against the CLI of BUILD_DIR. tools/test.sh
# runs it after ctest.
#   tools/python_test.sh [build-dir]      (default: build)
# The wheel's CMake build directory is kept too (BUILD_DIR/python/<wheel tag>): a second run
# recompiles only what changed, and ccache serves a fresh one. Skipped, saying so, only when pip
# cannot reach a package index for the build and test requirements.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
VENV=$BUILD_DIR/python/venv
REQUIREMENTS=(scikit-build-core nanobind pandas pytest matplotlib)
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
start=$(date +%s)
if ! "$VENV/bin/pip" install -q --disable-pip-version-check "${REQUIREMENTS[@]}" 2> "$BUILD_DIR/python/pip.log"; then
  if grep -qiE "could not find a version|connection|network|resolve|timed out|proxy" "$BUILD_DIR/python/pip.log"; then
    echo "python: skipped: pip cannot reach a package index for ${REQUIREMENTS[*]} ($BUILD_DIR/python/pip.log)"
    exit 0
  fi
  cat "$BUILD_DIR/python/pip.log" >&2
  exit 1
fi
# No build isolation: the venv's scikit-build-core and nanobind build it, so nothing is
# downloaded again per run.
"$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
  -Cbuild-dir="$BUILD_DIR/python/{wheel_tag}" .
echo "python: wheel built and installed in $(( $(date +%s) - start )) s"
# torch for model_from_module's tests, where PyTorch's CPU wheel index answers (about 200 MB;
# PyPI's torch brings gigabytes of CUDA libraries, so it is not tried). Without it those tests
# are skipped, and pytest's summary says why. STEPSIM_NO_TORCH=1 does not try.
if [ "${STEPSIM_NO_TORCH:-0}" != 1 ] && ! "$VENV/bin/python" -c "import torch" 2> /dev/null; then
  if "$VENV/bin/pip" install -q --disable-pip-version-check --timeout 20 --retries 1 \
       --index-url https://download.pytorch.org/whl/cpu torch 2> "$BUILD_DIR/python/torch.log"; then
    echo "python: torch (CPU wheel) installed for model_from_module's tests"
  else
    echo "python: torch's CPU wheel not installed (why: $BUILD_DIR/python/torch.log): model_from_module's tests skip"
  fi
fi
STEPSIM_CLI="$PWD/$BUILD_DIR/tools/stepsim" "$VENV/bin/python" -m pytest -q -rs python/tests
