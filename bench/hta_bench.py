#!/usr/bin/env python3
"""`stepsim analyze` against Holistic Trace Analysis on the same traces (issue 49: >= 50x on every trace).

    python bench/hta_bench.py [BUILD_DIR] [--reps N] [TRACE...]

Run with an interpreter that has HTA (`pip install HolisticTraceAnalysis`); BUILD_DIR (default
build) holds tools/stepsim. TRACE defaults to every trace of data/traces. For each trace the two
are timed alternately, `reps` times each (default 5), and the medians are compared:
  - stepsim: the wall time of one `stepsim analyze TRACE` process (start-up included), which
    reads the trace and prints its step, class, overlap and memory tables;
  - HTA: in a child interpreter that has already imported hta, the wall time of
    `TraceAnalysis(trace_files={0: TRACE})` (HTA's parse) and of the analyses that answer what
    analyze prints: get_temporal_breakdown, get_comm_comp_overlap, get_gpu_kernel_breakdown.
    The interpreter's start-up and HTA's import are not counted (they would add ~1-2 s to HTA).
A trace HTA cannot read is reported with its error, not counted.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import logging, os, sys, time
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
f = os.path.abspath(sys.argv[1])
t0 = time.perf_counter()
a = TraceAnalysis(trace_files={0: f}, trace_dir=os.path.dirname(f))
a.get_temporal_breakdown(visualize=False)
a.get_comm_comp_overlap(visualize=False)
a.get_gpu_kernel_breakdown(visualize=False)
print(time.perf_counter() - t0)
"""


def stepsim_seconds(stepsim: str, trace: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([stepsim, "analyze", trace], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def hta_seconds(trace: str) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, trace], capture_output=True, text=True)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RuntimeError(last[:160])
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("traces", nargs="*")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    stepsim = os.path.join(a.build, "tools", "stepsim")
    if not os.access(stepsim, os.X_OK):
        print(f"hta_bench: {stepsim} not found: build stepsim first (tools/setup.sh)", file=sys.stderr)
        return 2
    if subprocess.run([sys.executable, "-c", "import hta"], capture_output=True).returncode != 0:
        print(f"hta_bench: {sys.executable} cannot import hta: pip install HolisticTraceAnalysis", file=sys.stderr)
        return 2
    if a.reps < 1:
        print(f"hta_bench: --reps {a.reps}: expected at least 1", file=sys.stderr)
        return 2
    traces = a.traces or sorted(glob.glob("data/traces/*/*.json.gz"))
    ratios = []
    print(f"{'trace':<60} {'stepsim s':>10} {'HTA s':>8} {'ratio':>7}")
    for trace in traces:
        ours, theirs = [], []
        try:
            for _ in range(a.reps):
                ours.append(stepsim_seconds(stepsim, trace))
                theirs.append(hta_seconds(trace))
        except RuntimeError as e:
            print(f"{os.path.basename(trace)[:60]:<60} HTA failed: {e}")
            continue
        s, h = statistics.median(ours), statistics.median(theirs)
        ratios.append(h / s)
        print(f"{os.path.basename(trace)[:60]:<60} {s:10.3f} {h:8.3f} {h / s:6.1f}x")
    if ratios:
        print(f"{len(ratios)} traces: HTA / stepsim analyze {min(ratios):.1f}x - {max(ratios):.1f}x, median "
              f"{statistics.median(ratios):.1f}x (target >= 50x on every trace); medians of {a.reps} alternating runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
