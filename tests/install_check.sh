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
# By its relative name (found in the data directory) and by its installed path: the same report,
# whose first line names the installed file it read.
for name in "$example" "$tmp/prefix/share/stepsim/$example"; do
  (cd "$tmp/elsewhere" && env -u STEPSIM_DATA_DIR "$inst" simulate "$name") >"$tmp/inst-sim.txt"
  check "simulate $name" <(tail -n +2 "$tmp/build-sim.txt") <(tail -n +2 "$tmp/inst-sim.txt")
  if [ "$(head -n 1 "$tmp/inst-sim.txt")" != "stepsim simulate: $tmp/prefix/share/stepsim/$example" ]; then
    echo "install: simulate $name read $(head -n 1 "$tmp/inst-sim.txt"), not the installed example"; fail=1
  fi
done
(cd "$src" && "$build/tools/stepsim" validate --baseline validation/baseline.json) >"$tmp/build-val.txt"
(cd "$tmp/elsewhere" && env -u STEPSIM_DATA_DIR "$inst" validate --baseline validation/baseline.json) >"$tmp/inst-val.txt"
check "validate" "$tmp/build-val.txt" "$tmp/inst-val.txt"
# Debug line tables name the source files (for debuggers); nothing else in the binary may.
objcopy --strip-debug "$inst" "$tmp/stepsim-nodebug"
if grep -q -a -F "$src" "$tmp/stepsim-nodebug"; then
  echo "install: the installed binary contains the source tree's path $src"; fail=1
fi
[ "$fail" = 0 ] && echo "install: simulate and validate from $tmp/elsewhere match the build's output"
exit "$fail"
