#!/usr/bin/env python3
"""The calibration split of the validation suite (docs/validation.md, "The calibration split").

The rule, fixed before any error was looked at and never moved after: within each source, order
the cases by the 64-bit FNV-1a hash of their name (ties by name); the case at rank r (0-based) is
"fit" when r % 3 == 2, else "test". A third of each source's rows (rounded down) is the fit
split; a source of one or two cases has none. validate/suite.cpp applies the same rule and
refuses a case file whose "split" differs from it.

  python3 validation/tools/split_rule.py            # writes "split" into every case of validation/cases/*.json
"""
import glob
import json
import os
import re
import sys


def fnv1a64(text):
    h = 14695981039346656037
    for byte in text.encode("utf-8"):
        h ^= byte
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def splits(names):
    """name -> "fit" | "test" for the cases of one source."""
    ranked = sorted(names, key=lambda n: (fnv1a64(n), n))
    return {n: ("fit" if r % 3 == 2 else "test") for r, n in enumerate(ranked)}


def write_splits(path):
    """Inserts (or rewrites) the line "split": ... right after each case's "name" line, keeping the
    file's own layout (hand-written files are not re-serialised)."""
    with open(path) as f:
        text = f.read()
    doc = json.loads(text)
    by_source = {}
    for c in doc["cases"]:
        by_source.setdefault(c.get("source", doc["source"]), []).append(c["name"])
    assigned = {}
    for names in by_source.values():
        assigned.update(splits(names))
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = re.fullmatch(r'(\s*)"name": "([^"]+)",', line)
        if m and m.group(2) in assigned:
            if i + 1 < len(lines) and re.fullmatch(r'\s*"split": "[a-z]+",', lines[i + 1]):
                i += 1  # replaced below
            out.append(f'{m.group(1)}"split": "{assigned.pop(m.group(2))}",')
        i += 1
    if assigned:
        sys.exit(f"{path}: no '\"name\": ...,' line found for {sorted(assigned)}")
    with open(path, "w") as f:
        f.write("\n".join(out))
    print(f"{path}: {sum(1 for c in json.loads(chr(10).join(out))['cases'] if c['split'] == 'fit')} fit of {len(doc['cases'])}",
          file=sys.stderr)


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for p in sorted(glob.glob(os.path.join(here, "..", "cases", "*.json"))):
        write_splits(p)
