#!/usr/bin/env bash
# Live validation on a GPU machine: calibrate -> simulate -> live -> compare over the matrix in
# configs/examples/validation/ (DDP with two bucket sizes; FSDP1 with each backward_prefetch,
# limit_all_gathers on and off; a Llama-like 8-layer model, hidden 2048, seq 2048, sized to one
# GPU), then a results table (markdown + CSV) with device, date and versions.
#
# usage: tools/validate_live.sh [--build DIR] [--out DIR] [--np N] [--steps N] [--warmup W]
#                               [--tolerance P] [--skip-calibrate]
#   --build DIR        build directory holding tools/stepsim (default: build)
#   --out DIR          where results go (default: validation/live)
#   --np N             MPI processes = GPUs (default 1; the shipped matrix is single-GPU)
#   --skip-calibrate   simulate with the shipped profile (configs/hardware/h100-sxm-8x.json)
# Exit status: 0 when every case ran (whatever the errors; the table is the result), 1 otherwise.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/validation/live
NP=1
STEPS=10
WARMUP=3
TOLERANCE=10%
CALIBRATE=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --tolerance) TOLERANCE=$2; shift 2 ;;
    --skip-calibrate) CALIBRATE=0; shift ;;
    -h|--help) sed -n 2,15p "$0"; exit 0 ;;
    *) echo "validate_live.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

STEPSIM=$BUILD/tools/stepsim
[[ -x $STEPSIM ]] || { echo "validate_live.sh: $STEPSIM not built" >&2; exit 2; }
# Containers often run as root; OpenMPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun -np "$NP" --oversubscribe)
mkdir -p "$OUT"
LOG=$OUT/run.log
: > "$LOG"

BASE_PROFILE=$ROOT/configs/hardware/h100-sxm-8x.json
PROFILE=$BASE_PROFILE
PROFILE_NOTE="shipped profile configs/hardware/h100-sxm-8x.json"
if [[ $CALIBRATE == 1 ]]; then
  echo "== calibrate" | tee -a "$LOG"
  # calibrate all: GEMM, NCCL and contention microbenchmarks into a profile based on the shipped one.
  if "${MPIRUN[@]}" "$STEPSIM" calibrate all --base "$BASE_PROFILE" --out "$OUT/profile.json" >>"$LOG" 2>&1; then
    PROFILE=$OUT/profile.json
    PROFILE_NOTE="calibrated on this machine ($(basename "$OUT")/profile.json)"
  else
    echo "calibration failed (see $LOG); simulating with the shipped profile" | tee -a "$LOG"
    PROFILE_NOTE="shipped profile configs/hardware/h100-sxm-8x.json (calibration failed, see run.log)"
  fi
fi

FAILED=0
for exp in "$ROOT"/configs/examples/validation/*.json; do
  name=$(basename "$exp" .json)
  echo "== $name" | tee -a "$LOG"
  set_profile=(--set "cluster.profile=$PROFILE")
  if ! "$STEPSIM" simulate "$exp" "${set_profile[@]}" --json-out "$OUT/$name.predicted.json" \
       --trace "$OUT/$name.predicted.trace.json" >>"$LOG" 2>&1; then
    echo "simulate failed: $name" | tee -a "$LOG"; FAILED=1; continue
  fi
  if ! "${MPIRUN[@]}" "$STEPSIM" live "$exp" "${set_profile[@]}" --out "$OUT/$name.measured.json" \
       --trace "$OUT/$name.measured.trace.json" --steps "$STEPS" --warmup "$WARMUP" >>"$LOG" 2>&1; then
    echo "live failed: $name" | tee -a "$LOG"; FAILED=1; continue
  fi
  "$STEPSIM" compare "$OUT/$name.predicted.json" "$OUT/$name.measured.json" --tolerance "$TOLERANCE" \
      > "$OUT/$name.compare.txt" 2>>"$LOG"
  rc=$?
  "$STEPSIM" compare "$OUT/$name.predicted.json" "$OUT/$name.measured.json" --tolerance "$TOLERANCE" --json \
      > "$OUT/$name.compare.json" 2>>"$LOG"
  echo "$rc" > "$OUT/$name.compare.rc"
  [[ $rc == 0 || $rc == 3 ]] || FAILED=1
done

# The table: one row per case, from the compare JSON and the live document.
python3 - "$OUT" "$PROFILE_NOTE" "$TOLERANCE" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import csv, glob, json, os, sys, datetime
out, profile_note, tolerance, commit = sys.argv[1:5]
rows, meta = [], {}
for cmp_file in sorted(glob.glob(os.path.join(out, "*.compare.json"))):
    name = os.path.basename(cmp_file)[:-len(".compare.json")]
    c = json.load(open(cmp_file))
    live = json.load(open(os.path.join(out, name + ".measured.json")))
    meta = {"device": live["device"], "versions": live["live"]["versions"], "world": live["live"]["mpi_world_size"]}
    r = {x["name"]: x for x in c["rows"] if x["section"] in ("metric", "memory")}
    st, pk = r["step time"], r["peak memory"]
    fmt = lambda v: "" if v is None else f"{v:+.1f}"
    rows.append({
        "case": name,
        "framework": live["summary"]["framework"],
        "predicted_step_ms": f"{st['subject'] / 1e6:.2f}",
        "measured_step_ms": f"{st['reference'] / 1e6:.2f}",
        "measured_spread_pct": f"{live['live']['step_time_ns']['spread_pct']:.1f}",
        "step_err_pct": fmt(st["rel_error_pct"]),
        "predicted_peak_mib": f"{pk['subject'] / 2**20:.0f}",
        "measured_peak_mib": f"{pk['reference'] / 2**20:.0f}",
        "peak_err_pct": fmt(pk["rel_error_pct"]),
        "exposed_comm_pred_ms": f"{r['exposed comm']['subject'] / 1e6:.2f}",
        "exposed_comm_meas_ms": f"{r['exposed comm']['reference'] / 1e6:.2f}",
        "gate": "pass" if c["pass"] else "fail",
    })
if not rows:
    sys.exit("no compare results to tabulate")
with open(os.path.join(out, "results.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader(); w.writerows(rows)
def mean_abs(key):
    v = [abs(float(x[key])) for x in rows if x[key]]
    return (sum(v) / len(v), max(v)) if v else (float("nan"), float("nan"))
with open(os.path.join(out, "results.md"), "w") as f:
    v = meta["versions"]
    f.write(f"# Live validation: predicted vs measured\n\n")
    f.write(f"- device: {meta['device']} (MPI world size {meta['world']})\n")
    f.write(f"- date (UTC): {datetime.datetime.utcnow():%Y-%m-%d %H:%M}\n")
    f.write(f"- versions: CUDA runtime {v.get('cuda_runtime')}, driver {v.get('cuda_driver')}, NCCL {v.get('nccl')}, "
            f"MPI {v.get('mpi')} ({v.get('mpi_library')}); stepsim commit {commit}\n")
    f.write(f"- profile: {profile_note}; compare tolerance {tolerance}\n")
    if meta["world"] == 1:
        f.write("- one GPU: every collective ran as a world-size-1 NCCL call (a local copy, no network); "
                "FSDP1 at world size 1 is NO_SHARD, as in PyTorch\n")
    f.write("\n| " + " | ".join(rows[0].keys()) + " |\n|" + "---|" * len(rows[0]) + "\n")
    for x in rows: f.write("| " + " | ".join(x.values()) + " |\n")
    s, p = mean_abs("step_err_pct"), mean_abs("peak_err_pct")
    f.write(f"\nstep time |error|: mean {s[0]:.1f}%, max {s[1]:.1f}%; peak memory |error|: mean {p[0]:.1f}%, max {p[1]:.1f}%\n")
print(open(os.path.join(out, "results.md")).read())
PY
[[ $? == 0 ]] || FAILED=1
exit $FAILED
