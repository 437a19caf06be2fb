#!/usr/bin/env python3
"""stepsim.simulate's cost from Python against the same C++ call (target: within 1.2x).

    python bench/python_simulate_bench.py [BUILD_DIR] [EXP.json] [reps] [rounds]

Run with an interpreter that has the stepsim package (pip install .). The target is the calling
overhead: stepsim.simulate(EXP) and its .metrics dict against the C++ call it makes (load the
experiment, run it, the metrics as JSON) in the same process, stepsim._core.time_simulate_in_cpp,
so on the same heap with the same malloc settings, and holding each simulation until the next
call has made its own, as stepsim.simulate does. Each loop alternates them, `rounds` times `reps`
calls each, and prints the median over the rounds of (median Python CPU time a call) / (median
C++ CPU time a call), with the rounds' range: a shared machine's speed moves between processes
and over seconds by more than the overhead measured, so only side-by-side calls are compared.
CPU times are the process's (time.process_time, std::clock). Printed besides: the ratio to the
C++ call that frees each simulation at once (with glibc's defaults it faults ~420 pages a call
in again, the reason stepsim.simulate holds; with keep_freed_memory() it is the cheaper loop).

Each loop runs in a fresh interpreter, so that no loop inherits another's heap or malloc settings:
  - glibc's defaults, or stepsim.keep_freed_memory() (the CLI's thresholds, an opt-in for the
    whole process: docs/python.md);
  - stepsim alone (it imports pandas only where a DataFrame is made), or with pandas imported
    first, as in a notebook;
  - the Result held until the next call (`r = stepsim.simulate(exp)`) or dropped at once
    (`stepsim.simulate(exp).metrics[...]`).
BUILD_DIR (default build) holds bench/simulate_call_bench, the same C++ call in a C++ process of
its own (with the CLI's malloc settings): each loop's Python time against it is printed too, as
the "separate process" ratio, which also carries the interpreter's heap (docs/limits.md).
"""
import os
import re
import statistics
import subprocess
import sys
import time


def child(exp: str, reps: int, rounds: int, keep: bool, pandas: bool, hold: bool) -> None:
    """One loop in this (fresh) interpreter. Each round times `reps` C++ calls that hold each
    simulation until the next has made its own (as stepsim.simulate does, whether the Result is
    kept or dropped), `reps` that free it at once, and `reps` Python calls. Prints the median over
    the rounds of the Python time's ratio to the holding C++ loop, its range, the median ratio to
    the dropping one, and the median Python, holding and dropping C++ CPU us a call."""
    if pandas:
        import pandas  # noqa: F401  (loaded before stepsim, as a notebook has it)
    import stepsim
    from stepsim import _core

    if keep:
        stepsim.keep_freed_memory()
    stepsim.simulate(exp)  # warm: the profile cache, the page cache
    _core.time_simulate_in_cpp(exp, 1, True)
    same, to_dropping, py_all, held_all, dropped_all, r = [], [], [], [], [], None
    for _ in range(rounds):
        held = statistics.median(_core.time_simulate_in_cpp(exp, reps, True))
        dropped = statistics.median(_core.time_simulate_in_cpp(exp, reps, False))
        py = []
        for _ in range(reps):
            c0 = time.process_time()
            if hold:  # `r = ...`: the previous Result is freed after this call made its own
                r = stepsim.simulate(exp)
                _ = r.metrics["step_time_ns"]
            else:  # the Result is dropped at once, as `stepsim.simulate(exp).metrics[...]` does
                _ = stepsim.simulate(exp).metrics["step_time_ns"]
            py.append((time.process_time() - c0) * 1e6)
        r = None
        same.append(statistics.median(py) / held)
        to_dropping.append(statistics.median(py) / dropped)
        py_all += py
        held_all.append(held)
        dropped_all.append(dropped)
    print(f"{statistics.median(same):.3f} {min(same):.3f} {max(same):.3f} {statistics.median(to_dropping):.3f} "
          f"{statistics.median(py_all):.1f} {statistics.median(held_all):.1f} {statistics.median(dropped_all):.1f}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        exp, reps, rounds, keep, pandas, hold = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), *(a == "1" for a in sys.argv[5:8])
        child(exp, reps, rounds, keep, pandas, hold)
        return 0
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    exp = sys.argv[2] if len(sys.argv) > 2 else "configs/examples/llama3-8b-ddp-8xh100.json"
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 7
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
    in_target = 0
    for pandas in (False, True):
        for keep in (False, True):
            for hold in (True, False):
                flags = ["1" if x else "0" for x in (keep, pandas, hold)]
                res = subprocess.run([sys.executable, __file__, "--child", exp, str(reps), str(rounds), *flags],
                                     capture_output=True, text=True, check=True).stdout.split()
                ratio, lo, hi, to_dropping, py_us, held_us, dropped_us = (float(x) for x in res)
                in_target += ratio <= 1.2
                policy = "stepsim.keep_freed_memory()" if keep else "glibc's defaults"
                how = "r = stepsim.simulate(exp)" if hold else "stepsim.simulate(exp).metrics[...]"
                print(f"from Python, {'pandas imported' if pandas else 'stepsim alone'}, {policy}, {how}: CPU {py_us:.1f} us "
                      f"a call; beside it the C++ call {held_us:.1f} us holding, {dropped_us:.1f} us dropping each result; "
                      f"ratio to the holding one {ratio:.3f} (rounds {lo:.3f}-{hi:.3f}; target <= 1.2), "
                      f"to the dropping one {to_dropping:.3f}; to the separate process's call {py_us / cpp_us:.3f}, its holding "
                      f"one {py_us / cpp_hold_us:.3f}")
    print(f"{in_target} of 8 loops within 1.2x of the C++ call in their process ({rounds} rounds of {reps} calls each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
