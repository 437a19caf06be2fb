#!/usr/bin/env bash
# Quick start, step 2: install, build, and run the whole test suite (ctest). `.ci/run` calls this.
# Then the hardening checks: the suite under ASan+UBSan and the fuzzers (see below).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
if [ ! -d ../shared/data ]; then
  echo "test: ../shared/data not found beside $(pwd): clone next to shared/, or set STEPSIM_SHARED=/path/to/shared" >&2
  exit 2
fi
(cd build && ctest --output-on-failure -j "$(nproc)")

# Hardening (issue 16), in its own build dir so `build/` is never disturbed: the whole test
# suite again under ASan+UBSan (-fno-sanitize-recover=all: the first report fails the test),
# built with clang and libFuzzer coverage so the same objects serve the fuzzers, then each
# fuzz/ harness for STEPSIM_FUZZ_SECONDS (default 30) seconds. STEPSIM_HARDENING=0 skips both.
# The sanitizer build is -O1 with line tables only (what ASan recommends and its reports need);
# the whole of .ci/run must stay under 30 minutes on 2 cores.
if [ "${STEPSIM_HARDENING:-1}" != 0 ]; then
  SAN=build-sanitize
  CC=clang CXX=clang++ cmake -S . -B "$SAN" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DSTEPSIM_SANITIZE=ON -DSTEPSIM_FUZZ=ON -DSTEPSIM_CUDA=OFF >/dev/null
  cmake --build "$SAN" -j "$(nproc)" --target stepsim stepsim_tests fuzzers
  (cd "$SAN" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure -j "$(nproc)" -E '^(docs_checker|folder_deps|bench_bad_args_.*)$')
  # Left out above: the two Python-only tests (nothing to sanitize) and the bench binaries'
  # bad-argument checks (the bench binaries are not built here; the normal build runs them).
  tools/fuzz.sh "${STEPSIM_FUZZ_SECONDS:-30}" "$SAN"
fi
