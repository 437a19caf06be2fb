#!/usr/bin/env bash
# Everything a session lent a GPU should run, in one call (e.g. through the device tool):
# build from this tree, run the [gpu] tests (GEMM vs an independent cuBLASLt call, world-size-1
# NCCL, mpirun -np 1 calibrate, live end to end), then tools/validate_live.sh. Results go under
# OUT (default validation/) with the device and date, ready to commit:
#   OUT/gpu/device.txt        nvidia-smi -q (device, driver, clocks) and the date
#   OUT/gpu/tests.txt         the [gpu] test run (Catch2, with every WARN line: the GEMM ratios)
#   OUT/gpu/gemm.txt          one line per large GEMM shape: runner vs cuBLASLt TFLOP/s and ratio
#   OUT/live/                 validate_live.sh: calibration profile, per-case results, results.md
#
# usage: tools/gpu_validation.sh [OUT] [--jobs N]      (run from the repository root)
# Exit status: 0 when the build, the [gpu] tests and every validation case ran.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/validation}
JOBS=${JOBS:-$(nproc)}
BUILD=$ROOT/build-gpu
mkdir -p "$OUT/gpu"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

{ date -u +"date (UTC): %Y-%m-%d %H:%M"; nvidia-smi -q 2>&1 || echo "nvidia-smi failed"; } > "$OUT/gpu/device.txt"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$OUT/gpu/build.txt" 2>&1 &&
  ninja -C "$BUILD" -j "$JOBS" >> "$OUT/gpu/build.txt" 2>&1 || { echo "build failed (see $OUT/gpu/build.txt)"; exit 1; }

STATUS=0
rm -f "$OUT/gpu/gemm.txt"
(cd "$ROOT" && STEPSIM_VALIDATION_OUT="$OUT/gpu/gemm.txt" "$BUILD/tests/stepsim_gpu_tests" "[gpu]" --durations yes) \
  > "$OUT/gpu/tests.txt" 2>&1 || STATUS=1
tail -3 "$OUT/gpu/tests.txt"
"$ROOT/tools/validate_live.sh" --build "$BUILD" --out "$OUT/live" || STATUS=1
exit $STATUS
