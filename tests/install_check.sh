#!/usr/bin/env bash
# The install as a user gets it (ctest: install): `cmake --install` into an empty prefix, then,
# from a directory with no repository in sight, the installed stepsim finds its data directory
# (<prefix>/share/stepsim): `simulate` of a shipped example (by its relative name and by its
# installed path) and `validate` print exactly what the build prints from the repository root.
# The installed binary holds no path of the source tree (it never reads it).
#   tests/install_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mkdir "$tmp/elsewhere"
inst="$tmp/prefix/bin/stepsim"
example=configs/examples/llama3-8b-ddp-8xh100.json
fail=0
check() {  # name, expected file, actual file
  if ! diff -u "$2" "$3" >"$tmp/diff"; then
    echo "install: $1 differs from the build's output:"; head -40 "$tmp/diff"; fail=1
  fi
}
(cd "$src" && "$build/tools/stepsim" simulate "$example") >"$tmp/build-sim.txt"
(cd "$tmp/elsewhere" && env -u STEPSIM_DATA_DIR "$inst" simulate "$example") >"$tmp/inst-sim.txt"
check "simulate $example" "$tmp/build-sim.txt" "$tmp/inst-sim.txt"
# By its installed path: the same report after the header line that names the file.
(cd "$tmp/elsewhere" && env -u STEPSIM_DATA_DIR "$inst" simulate "$tmp/prefix/share/stepsim/$example") >"$tmp/inst-sim-abs.txt"
check "simulate <prefix>/share/stepsim/$example" <(tail -n +2 "$tmp/build-sim.txt") <(tail -n +2 "$tmp/inst-sim-abs.txt")
(cd "$src" && "$build/tools/stepsim" validate --baseline validation/baseline.json) >"$tmp/build-val.txt"
(cd "$tmp/elsewhere" && env -u STEPSIM_DATA_DIR "$inst" validate --baseline validation/baseline.json) >"$tmp/inst-val.txt"
check "validate" "$tmp/build-val.txt" "$tmp/inst-val.txt"
if grep -q -F "$src" "$inst"; then
  echo "install: the installed binary contains the source tree's path $src"; fail=1
fi
[ "$fail" = 0 ] && echo "install: simulate and validate from $tmp/elsewhere match the build's output"
exit "$fail"
