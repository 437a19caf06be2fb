#!/usr/bin/env bash
# Quick start, step 2: install, build, and run the whole test suite (ctest). `.ci/run` calls this.
# Then the hardening checks: the suite under ASan+UBSan and the fuzzers (see below).
set -euo pipefail
cd "$(dirname "$0")/.."
# What the tests need that no package provides, checked before anything is built: the ground
# truth in data/ (traces, nccl-tests logs, tables, published runs), each file as its checksum
# in data/SHA256SUMS says (a partial checkout or a file changed by hand fails here, in a
# second, instead of as a test failure after the build), and python3 for the docs checker.
for tool in python3 sha256sum; do
  command -v "$tool" >/dev/null || { echo "test: $tool not found: install it (Debian: apt-get install python3 coreutils)" >&2; exit 2; }
done
if [ ! -f data/SHA256SUMS ]; then
  echo "test: data/SHA256SUMS not found in $(pwd): run from a full checkout of the repository" >&2
  exit 2
fi
if ! (cd data && sha256sum --check --quiet --strict SHA256SUMS); then
  echo "test: data/ differs from data/SHA256SUMS (above): restore it with 'git checkout -- data'" >&2
  exit 2
fi
# Disk, checked before a fresh checkout's first build: a whole run writes about 3.5 GB
# (measured on a clean clone: build/ 2.4 GB, of which the wheel's build 1.0 GB, and
# build-sanitize/ 1.1 GB). A full disk otherwise shows up minutes later as a linker's or ar's
# "No space left on device" inside pip's output.
if [ ! -d build ]; then
  need_kb=$((4 * 1024 * 1024))
  free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
  if [ "${free_kb:-0}" -lt "$need_kb" ]; then
    echo "test: $((free_kb / 1024)) MiB free on the disk holding $(pwd); a whole run needs about 4096 MiB (build/ and build-sanitize/): free some space" >&2
    exit 2
  fi
fi
tools/setup.sh build
(cd build && ctest --output-on-failure -j "$(nproc)")
# The Python package: pip install . into build/python/venv, then pytest against build's CLI.
tools/python_test.sh build

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
     ctest --output-on-failure -j "$(nproc)" -E '^(docs_checker|folder_deps|install|bench_bad_args_.*)$')
  # Left out above: the two Python-only tests (nothing to sanitize), the install (a copy of the
  # same binaries) and the bench binaries'
  # bad-argument checks (the bench binaries are not built here; the normal build runs them).
  tools/fuzz.sh "${STEPSIM_FUZZ_SECONDS:-30}" "$SAN"
fi
