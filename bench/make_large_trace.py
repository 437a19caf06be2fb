#!/usr/bin/env python3
"""Writes a large synthetic Kineto trace for analyze's memory figure (issue 49): a real trace of
data/traces repeated, each copy shifted past the previous one in time, with its ProfilerStep
numbers, correlation ids and flow ids renumbered, so that the result reads as one long run of
consecutive steps. Plain JSON (not gzip), written as it goes; never committed.

  python3 bench/make_large_trace.py OUT.json [SIZE_MB] [SOURCE.json.gz]

SIZE_MB (default 1000) is the JSON size to reach, in units of 10^6 bytes; the default source is
the li-plus ZeRO-1 trace (2 steps, 34.7 MB of JSON). Prints the copies, events and bytes written.
"""
import gzip
import json
import sys

DEFAULT_SOURCE = ("data/traces/li-plus_playground/"
                  "zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz")


def main():
    if len(sys.argv) < 2 or len(sys.argv) > 4:
        sys.exit(__doc__)
    out_path = sys.argv[1]
    size = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 10**9
    source = sys.argv[3] if len(sys.argv) > 3 else DEFAULT_SOURCE
    with gzip.open(source, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - t0
    steps = sorted({int(e["name"][13:]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")})
    step_stride = steps[-1] - steps[0] + 1 if steps else 1
    # Each copy as text templates, so that a copy costs a few string substitutions, not a dump.
    shifted_keys = []
    for e in events:
        args = e.get("args", {})
        shifted_keys.append((e, "ts" in e and isinstance(e["ts"], (int, float)),
                             isinstance(args.get("correlation"), int), isinstance(e.get("id"), int),
                             str(e.get("name", "")).startswith("ProfilerStep#")))
    written = copies = count = 0
    with open(out_path, "w") as out:
        head = json.dumps(doc)[:-1]
        out.write(head + (", " if doc else "") + '"traceEvents": [\n')
        written += len(head) + 20
        first = True
        while written < size:
            shift = copies * (span + 1000)  # 1 ms between copies
            for e, ts, corr, fid, step in shifted_keys:
                if ts or corr or fid or step:
                    e = dict(e)
                    if ts:
                        e["ts"] = round(e["ts"] + shift, 3)
                    if corr or step:
                        e["args"] = dict(e["args"]) if "args" in e else {}
                    if corr:
                        e["args"]["correlation"] += copies * 10**8
                    if fid:
                        e["id"] += copies * 10**8
                    if step:
                        e["name"] = "ProfilerStep#%d" % (int(e["name"][13:]) + copies * step_stride)
                text = ("" if first else ",\n") + json.dumps(e)
                first = False
                out.write(text)
                written += len(text)
                count += 1
            copies += 1
        out.write("\n]}\n")
    print("%s: %d copies of %s, %d events, %.1f MB" % (out_path, copies, source, count, written / 1e6))


if __name__ == "__main__":
    main()
