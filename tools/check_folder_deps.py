#!/usr/bin/env python3
"""Report cycles between source folders.

A folder is the directory of a file under the repository root (sim/analysis, trace, ...).
Every `#include "dir/.../file.hpp"` rooted at the repository is an edge from the including
file's folder to the included file's folder. Edges inside one folder are ignored. The script
prints each strongly connected set of two or more folders (a cycle) with the includes that make
it, and exits 1 if there is one that the allow-lists below do not excuse. ctest runs it
(folder_deps).

usage: tools/check_folder_deps.py [REPO_ROOT] [--graph]
"""
import os
import re
import sys

# Sources that are not part of the library layering (tests, benchmarks, fuzzers, build output).
SKIP_TOP = {"build", "tests", "bench", "fuzz", ".git", ".ci"}
EXTENSIONS = (".cpp", ".hpp", ".cu", ".h")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# Accepted for now, each with the reason and who removes it; an allowed edge or include is
# dropped from the graph before cycles are searched (and printed, so it stays visible).
# Whole folder edges:
ALLOWED_EDGES = {
}
# Single includes (file, included path):
ALLOWED_INCLUDES = {
}


def collect(root):
    edges = {}  # (from, to) -> [(file, include)]
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        top = rel_dir.split(os.sep)[0]
        if top in SKIP_TOP or top.startswith("build"):
            dirnames[:] = []
            continue
        for name in filenames:
            if not name.endswith(EXTENSIONS):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            src = os.path.dirname(rel)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                if not os.path.exists(os.path.join(root, inc)):
                    continue  # a system or sibling-relative include
                if (rel.replace(os.sep, "/"), inc) in ALLOWED_INCLUDES:
                    continue
                dst = os.path.dirname(inc)
                if dst and dst != src:
                    edges.setdefault((src, dst), []).append((rel, inc))
    return edges


def strongly_connected(nodes, succ):
    """Tarjan's algorithm; returns the components of more than one node."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main(argv):
    root = next((a for a in argv[1:] if not a.startswith("--")), os.path.join(os.path.dirname(__file__), ".."))
    root = os.path.abspath(root)
    edges = collect(root)
    if "--graph" in argv:
        for (a, b), why in sorted(edges.items()):
            print(f"{a} -> {b}  ({len(why)} includes, e.g. {why[0][0]}: {why[0][1]})")
    succ, nodes = {}, set()
    for (a, b) in edges:
        nodes.update((a, b))
        if (a, b) in ALLOWED_EDGES:
            continue
        succ.setdefault(a, set()).add(b)
    for (a, b), reason in sorted(ALLOWED_EDGES.items()):
        if (a, b) in edges:
            print(f"allowed edge: {a} -> {b}: {reason}")
        else:
            print(f"allow-list entry no longer needed (remove it): {a} -> {b}")
    for (f, inc), reason in sorted(ALLOWED_INCLUDES.items()):
        path = os.path.join(root, f)
        text = open(path, encoding="utf-8", errors="replace").read() if os.path.exists(path) else ""
        if f'#include "{inc}"' in text:
            print(f"allowed include: {f} -> {inc}: {reason}")
        else:
            print(f"allow-list entry no longer needed (remove it): {f} -> {inc}")
    cycles = strongly_connected(nodes, succ)
    for comp in cycles:
        print("folder cycle: " + " <-> ".join(comp))
        members = set(comp)
        for (a, b), why in sorted(edges.items()):
            if a in members and b in members and (a, b) not in ALLOWED_EDGES:
                for f, inc in why:
                    print(f"  {a} -> {b}: {f} includes {inc}")
    if cycles:
        return 1
    print(f"no folder cycle among {len(nodes)} folders")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
