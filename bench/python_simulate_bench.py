#!/usr/bin/env python3
"""stepsim.simulate's cost from Python against the same in-process C++ call (target: within 1.2x).

    python bench/python_simulate_bench.py [BUILD_DIR] [EXP.json] [reps]

Run with an interpreter that has the stepsim package (pip install .); BUILD_DIR (default build)
holds bench/simulate_call_bench, which times load_experiment + run_experiment + the metrics as
JSON in C++. Here: stepsim.simulate(EXP) and its .metrics dict. Both print the median wall and
CPU time (the process's) per call; the ratio is of the CPU times, which the load of a shared
machine moves less than the wall times.

The C++ side keeps freed memory as the CLI does (sim/core/memory_policy.hpp). Each Python loop
runs in a fresh interpreter, so that no loop inherits another's heap or malloc settings:
  - glibc's defaults, or stepsim.keep_freed_memory() (the CLI's thresholds, an opt-in for the
    whole process: docs/python.md);
  - stepsim alone (it imports pandas only where a DataFrame is made), or with pandas imported
    first, as in a notebook: the same calls then run slower, though they execute the same
    instructions (docs/limits.md);
  - the Result held until the next call (`r = stepsim.simulate(exp)`) or dropped at once
    (`stepsim.simulate(exp).metrics[...]`).
The second C++ line is the C++ call run with --hold: each call's experiment and result kept until
the next call has made its own, as `r = ...` keeps the previous Result.
"""
import os
import re
import statistics
import subprocess
import sys
import time


def child(exp: str, reps: int, keep: bool, pandas: bool, hold: bool) -> None:
    """One loop in this (fresh) interpreter: prints the median wall and CPU us per call."""
    if pandas:
        import pandas  # noqa: F401  (loaded before stepsim, as a notebook has it)
    import stepsim

    if keep:
        stepsim.keep_freed_memory()
    stepsim.simulate(exp)  # warm: the profile file in the page cache, as the C++ loop's later reps
    times, cpu, r = [], [], None
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        if hold:  # `r = ...`: the previous Result is freed after this call made its own
            r = stepsim.simulate(exp)
            _ = r.metrics["step_time_ns"]
        else:  # the Result is dropped at once, as `stepsim.simulate(exp).metrics[...]` does
            _ = stepsim.simulate(exp).metrics["step_time_ns"]
        times.append((time.perf_counter() - t0) * 1e6)
        cpu.append((time.process_time() - c0) * 1e6)
    del r
    print(f"{statistics.median(times):.1f} {statistics.median(cpu):.1f}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        exp, reps, keep, pandas, hold = sys.argv[2], int(sys.argv[3]), *(a == "1" for a in sys.argv[4:7])
        child(exp, reps, keep, pandas, hold)
        return 0
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    exp = sys.argv[2] if len(sys.argv) > 2 else "configs/examples/llama3-8b-ddp-8xh100.json"
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    binary = os.path.join(build, "bench", "simulate_call_bench")
    if not os.path.exists(binary):
        print(f"python_simulate_bench: {binary} not found: build the benchmarks first (tools/setup.sh)", file=sys.stderr)
        return 2
    out = subprocess.run([binary, exp, str(reps)], capture_output=True, text=True, check=True).stdout
    cpp_us = float(re.search(r"CPU ([\d.]+) us", out).group(1))
    out_hold = subprocess.run([binary, exp, str(reps), "--hold"], capture_output=True, text=True, check=True).stdout
    cpp_hold_us = float(re.search(r"CPU ([\d.]+) us", out_hold).group(1))
    print(out.strip())
    print(out_hold.strip())
    for pandas in (False, True):
        for keep in (False, True):
            for hold in (True, False):
                flags = ["1" if x else "0" for x in (keep, pandas, hold)]
                res = subprocess.run([sys.executable, __file__, "--child", exp, str(reps), *flags], capture_output=True,
                                     text=True, check=True).stdout.split()
                wall, py_us = float(res[0]), float(res[1])
                policy = "stepsim.keep_freed_memory()" if keep else "glibc's defaults"
                how = "r = stepsim.simulate(exp)" if hold else "stepsim.simulate(exp).metrics[...]"
                print(f"from Python, {'pandas imported' if pandas else 'stepsim alone'}, {policy}, {how}: median {wall:.1f} us "
                      f"per call, CPU {py_us:.1f} us ({reps} reps); ratio to the C++ call {py_us / cpp_us:.3f} (target <= 1.2), "
                      f"to the holding one {py_us / cpp_hold_us:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
