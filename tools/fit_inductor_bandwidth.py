#!/usr/bin/env python3
"""The achieved bandwidth of the kernels torch.compile generates, from a PyTorch profiler trace
with record_shapes (docs/workload-ops.md, "Kernels torch.compile generates").

Inductor launches each Triton kernel from a cpu_op named after it (triton_poi_* pointwise,
triton_per_* persistent and triton_red_* looped reductions) whose Input Dims and types are the
kernel's tensor arguments, inputs and outputs; the kernel is the one its runtime or driver call
launched (same External id, then the call's correlation id). Its bytes are the arguments'
elements times their dtype's size: each argument read or written once. The rule, fixed before
any prediction was compared: kernels whose arguments hold at least 64 MiB (bandwidth-bound; the
small ones are launch-bound) and whose bytes over duration stay at or under the part's HBM
bandwidth (above it an argument is broadcast or only partly read, so its bytes are not what
moved); the median per kind, reductions (per + red) and pointwise apart.

  python3 tools/fit_inductor_bandwidth.py TRACE.json.gz [--hbm-GBps 3350]
  python3 tools/fit_inductor_bandwidth.py TRACE.json.gz --check PROFILE.json   # exit 1 unless the
      profile's compute.memory_bandwidth_GBps.inductor_reduction is the median, rounded
"""
import argparse
import gzip
import json
import statistics
import sys

DTYPE_BYTES = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4, "double": 8, "long int": 8, "int": 4,
               "bool": 1, "unsigned char": 1, "signed char": 1, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1}
MIN_BYTES = 64 << 20


def medians(path, hbm_gbps):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    launches = {e["args"]["External id"]: e for e in events
                if e.get("cat") == "cpu_op" and e["name"].startswith("triton_") and "Input Dims" in e.get("args", {})}
    correlations = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "External id" in e.get("args", {}):
            correlations.setdefault(e["args"]["External id"], []).append(e["args"].get("correlation"))
    kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
    rates = {"reduction": [], "pointwise": []}
    for ext, op in launches.items():
        launched = [kernels[c] for c in correlations.get(ext, []) if c in kernels]
        if len(launched) != 1:
            continue
        args = op["args"]
        moved = 0
        for dims, dtype in zip(args["Input Dims"], args["Input type"]):
            if dtype == "Scalar":
                continue
            if dtype not in DTYPE_BYTES:
                sys.exit(f"{path}: {op['name']}: argument dtype {dtype!r} not known")
            n = 1
            for d in dims:
                n *= d
            moved += n * DTYPE_BYTES[dtype]
        gbps = moved / (launched[0]["dur"] * 1e-6) / 1e9
        if moved < MIN_BYTES or gbps > hbm_gbps:
            continue
        kind = op["name"].split("_")[1]
        rates["pointwise" if kind == "poi" else "reduction"].append(gbps)
    return {k: (statistics.median(v), len(v)) for k, v in rates.items() if v}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--hbm-GBps", type=float, default=3350.0, help="the part's HBM bandwidth (H100 SXM: 3350)")
    ap.add_argument("--check", help="a profile whose inductor_reduction must equal the median, rounded")
    a = ap.parse_args()
    m = medians(a.trace, a.hbm_GBps)
    for kind, (gbps, n) in sorted(m.items()):
        print(f"{kind:10s} {n:4d} kernels  median {gbps:7.0f} GB/s  ({gbps / a.hbm_GBps:.3f} of {a.hbm_GBps:.0f})")
    if a.check:
        with open(a.check) as f:
            shipped = json.load(f)["compute"]["memory_bandwidth_GBps"]["inductor_reduction"]
        if round(m["reduction"][0]) != shipped:
            sys.exit(f"{a.check}: inductor_reduction {shipped}, the trace's median {m['reduction'][0]:.0f}")
        print(f"{a.check}: inductor_reduction {shipped} GB/s: the trace's median")


if __name__ == "__main__":
    main()
