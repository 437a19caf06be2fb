#!/usr/bin/env bash
# Runs every libFuzzer harness in fuzz/ for SECONDS each (default 60), nproc at a time.
#   tools/fuzz.sh [SECONDS] [BUILD_DIR]     (BUILD_DIR default: build-sanitize)
# Configures BUILD_DIR with clang, ASan+UBSan and libFuzzer coverage if needed (tools/test.sh
# shares that build with its sanitizer test run), seeds each corpus from configs/ and
# data/, and fails on the first finding (the crashing input is saved as
# BUILD_DIR/fuzz-artifacts/NAME-crash-*; rerun it with BUILD_DIR/fuzz/NAME FILE).
# Corpora grow in BUILD_DIR/fuzz-corpus/NAME across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
BUILD_DIR=${2:-build-sanitize}
ROOT=$(pwd)
DATA="$ROOT/data"
FUZZERS=(fuzz_config fuzz_profile fuzz_nccl_tests fuzz_kineto fuzz_sweep_merge fuzz_deepspeed fuzz_init_trace)

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] || ! grep -q "STEPSIM_FUZZ:BOOL=ON" "$BUILD_DIR/CMakeCache.txt"; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSTEPSIM_SANITIZE=ON -DSTEPSIM_FUZZ=ON -DSTEPSIM_CUDA=OFF >/dev/null
fi
[ "${STEPSIM_FUZZ_NO_BUILD:-0}" = 1 ] || cmake --build "$BUILD_DIR" -j "$(nproc)" --target fuzzers stepsim

seeds="$BUILD_DIR/fuzz-seeds"
rm -rf "$seeds"
mkdir -p "$seeds" "$BUILD_DIR/fuzz-artifacts"
for f in "${FUZZERS[@]}"; do mkdir -p "$seeds/$f" "$BUILD_DIR/fuzz-corpus/$f"; done

# Seeds: every shipped config and profile; an include and --set lines in the config format.
n=0
for f in configs/examples/*.json configs/examples/*/*.json; do
  [ -f "$f" ] && cp "$f" "$seeds/fuzz_config/$((n++)).json"
done
printf '{"include": "inc.json", "cluster": {"nodes": 2}}\n--include--\n%s\n--set--\nstrategy.bucket_cap_mb=5\ntraining.grad_accum=2\n' \
  "$(cat configs/examples/seed/c1-ddp-buckets.json)" >"$seeds/fuzz_config/with-include-and-set"
# The foreign configs, named as the include (inc.json): every hf_config and deepspeed_config
# the tree ships or the tests keep, with the experiments that name them. Without these the
# fuzzer never reached the DeepSpeed translation (issue 50, F1).
for hf in configs/models/hf/*.json tests/data/repro/hf-*.json; do
  [ -f "$hf" ] || continue
  for fw in fsdp2 ddp zero; do
    printf '{"workload": {"model": {"hf_config": "inc.json"}, "seq_len": 1024, "micro_batch": 1, "dtype": "bf16"},
 "cluster": {"profile": "configs/hardware/h100-sxm-8x.json", "nodes": 1, "gpus_per_node": 8},
 "strategy": {"framework": "%s"}, "training": {"optimizer": "adamw"}}
--include--
%s
' \
      "$fw" "$(cat "$hf")" >"$seeds/fuzz_config/hf-$fw-$(basename "$hf")"
  done
done
for ds in configs/examples/deepspeed/*.json tests/data/repro/ds-*.json; do
  [ -f "$ds" ] || continue
  printf '{"workload": {"preset": "opt-1.3b", "seq_len": 512, "dtype": "bf16"},
 "cluster": {"profile": "configs/hardware/a800-sxm-8x.json", "nodes": 1, "gpus_per_node": 8},
 "strategy": {"deepspeed_config": "inc.json"}, "training": {"optimizer": "adamw"}}
--include--
%s
--set--
cluster.nodes=2
' \
    "$(cat "$ds")" >"$seeds/fuzz_config/ds-$(basename "$ds")"
  cp "$ds" "$seeds/fuzz_deepspeed/$(basename "$ds")"
done
for exp in tests/data/repro/r0[1-5]*.json; do  # the reproducers' experiments, naming ds.json
  ds=$(grep -o '"deepspeed_config": "[^"]*"' "$exp" | sed 's/.*: "//; s/"$//') || true
  [ -n "$ds" ] && [ -f "tests/data/repro/$ds" ] || continue
  printf '%s
--experiment--
%s
' "$(cat "tests/data/repro/$ds")" "$(sed "s|$ds|ds.json|" "$exp")" \
    >"$seeds/fuzz_deepspeed/exp-$(basename "$exp")"
done
# Nesting: 20,000 brackets (mutation rarely builds that many; F2 needed more than 15,000).
head -c 20000 /dev/zero | tr '\0' '[' >"$seeds/fuzz_config/deep-20000"
head -c 20000 /dev/zero | tr '\0' '[' >"$seeds/fuzz_profile/deep-20000"
# Trace edge cases (issue 50, F11, F5): events without ts/dur/ph, negative and zero durations, a
# repeated step, odd world sizes, a root key twice, collectives of 0 us.
trace_seed() {  # NAME KERNEL_FIELDS STEP_FIELDS ROOT_PREFIX WORLD
  printf '{%s"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": %s},
"traceEvents": [
' "$4" "$5"
  printf '{"cat": "user_annotation", "name": "ProfilerStep#3", "pid": 10, "tid": 1, "ts": 1000, %s},
' "$3"
  printf '{"cat": "kernel", "name": "gemm_A", "pid": 0, "tid": 7, %s, "args": {"device": 0, "stream": 7}},
' "$2"
  printf '{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Broadcast_RING_LL(x)", "pid": 0, "tid": 20, "ts": 1500, "dur": 0,
'
  printf ' "args": {"device": 0, "stream": 20, "Collective name": "broadcast", "In msg nelems": 1024, "Out msg nelems": 1024,
'
  printf '          "Group size": 8, "dtype": "Float"}}]}
'
}
for dst in fuzz_kineto fuzz_init_trace; do
  d="$seeds/$dst"
  trace_seed ok '"ph": "X", "ts": 1100, "dur": 200' '"ph": "X", "dur": 1000' '' 8 >"$d/edge-ok.json"
  trace_seed nots '"ph": "X", "dur": 200' '"ph": "X", "dur": 1000' '' 8 >"$d/edge-nots.json"
  trace_seed noph '"ts": 1100, "dur": 200' '"ph": "X", "dur": 1000' '' 8 >"$d/edge-noph.json"
  trace_seed durneg '"ph": "X", "ts": 1100, "dur": -5' '"ph": "X", "dur": -100' '' 8 >"$d/edge-durneg.json"
  trace_seed ws '"ph": "X", "ts": 1100, "dur": 200' '"ph": "X", "dur": 1000' '' -8 >"$d/edge-ws.json"
  trace_seed dup '"ph": "X", "ts": 1100, "dur": 200' '"ph": "X", "dur": 1000' '"traceEvents": [], ' 8 >"$d/edge-dup.json"
done
for f in configs/hardware/*.json; do cp "$f" "$seeds/fuzz_profile/"; done
# nccl-tests logs and the XLA tables (first 200 lines: the importers read the same format).
if [ -d "$DATA" ]; then
  for f in "$DATA"/nccl-tests/*.txt "$DATA"/galvatron/*sp_time*.json "$DATA"/azure_ai_benchmarking_guide/*.md; do
    [ -f "$f" ] && cp "$f" "$seeds/fuzz_nccl_tests/"
  done
  for f in "$DATA"/xla_perf_tables/*.csv "$DATA"/gemm/*.csv "$DATA"/gemm/*.md; do
    [ -f "$f" ] && head -n 200 "$f" >"$seeds/fuzz_nccl_tests/$(basename "$f")"
  done
  # Kineto traces: the first 64 KiB of the small real ones (mutations repair the tail).
  for f in "$DATA"/traces/hta/*.json.gz; do
    [ -f "$f" ] && { zcat "$f" 2>/dev/null || true; } | head -c 65536 >"$seeds/fuzz_kineto/$(basename "$f" .gz)"
  done
fi
# A complete trace, and shards of a small sweep, from stepsim itself.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$BUILD_DIR/tools/stepsim" simulate configs/examples/seed/c1-ddp-buckets.json --trace "$tmp/c1.trace.json" >/dev/null
cp "$tmp/c1.trace.json" "$seeds/fuzz_kineto/"
# The same, gzip'd: the reader inflates those on a thread of its own (trace/gunzip.hpp), and the
# fuzzer's mutations reach its errors (corrupt blocks, a wrong CRC or length, a cut stream).
gzip -c "$tmp/c1.trace.json" >"$seeds/fuzz_kineto/c1.trace.json.gz"
gzip -c "$seeds/fuzz_kineto/edge-ok.json" >"$seeds/fuzz_kineto/edge-ok.json.gz"
cp "$tmp/c1.trace.json" "$seeds/fuzz_init_trace/"
printf '{"base": {"include": "%s"}, "axes": {"strategy.bucket_cap_bytes": [1000000, 2000000, 3000000]}}\n' \
  "$ROOT/configs/examples/seed/c1-ddp-buckets.json" >"$tmp/s.json"
"$BUILD_DIR/tools/stepsim" sweep "$tmp/s.json" --no-progress --shard 0/2 --out "$tmp/p0.csv" >/dev/null
"$BUILD_DIR/tools/stepsim" sweep "$tmp/s.json" --no-progress --shard 1/2 --out "$tmp/p1.csv" >/dev/null
{ cat "$tmp/p0.csv"; printf -- '--shard--\n'; cat "$tmp/p1.csv"; } >"$seeds/fuzz_sweep_merge/two-shards"

# Each run: the grown corpus first (new inputs go there), the seeds second. No leak checking:
# the harnesses share process-wide caches on purpose; ASan still reports every memory error.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The harnesses run side by side, as many at a time as there are cores (each single-threaded).
run_one() {
  local f=$1
  "$BUILD_DIR/fuzz/$f" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=2560 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$BUILD_DIR/fuzz-artifacts/$f-" \
    "$BUILD_DIR/fuzz-corpus/$f" "$seeds/$f" 2>"$BUILD_DIR/fuzz-artifacts/$f.log"
}
JOBS=$(nproc)
declare -A pid_of
failed=()
for f in "${FUZZERS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  echo "fuzz: $f for ${SECONDS_EACH}s"
  run_one "$f" &
  pid_of[$f]=$!
done
for f in "${FUZZERS[@]}"; do
  if wait "${pid_of[$f]}"; then
    echo "fuzz: $f: $(grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$BUILD_DIR/fuzz-artifacts/$f.log" | tr -s ' \n' ' ')"
  else
    failed+=("$f")
  fi
done
for f in "${failed[@]}"; do
  echo "fuzz: $f found a problem:"
  tail -n 60 "$BUILD_DIR/fuzz-artifacts/$f.log"
done
[ ${#failed[@]} -eq 0 ] || exit 1
echo "fuzz: all ${#FUZZERS[@]} harnesses ran ${SECONDS_EACH}s each without a finding"
