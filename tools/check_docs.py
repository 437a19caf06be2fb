#!/usr/bin/env python3
"""Runs the stepsim commands shown in README.md and docs/*.md and checks the outputs shown after them.

    tools/check_docs.py [--build build] [--update] [FILE.md ...]     (from the repository root)

A command block is a fenced block tagged `sh` whose lines run `stepsim ...` (or
`build/tools/stepsim ...`, or `diff ...` to show that a committed file is what a command
wrote); `#` comments and blank lines are ignored. The fenced block right after
it (only blank lines or HTML comments between), tagged `text` or untagged, is its expected
output: the concatenated stdout and stderr of the block's commands. Rules, as HTML comments
written just before the command block:

    <!-- skip: REASON -->        not run (needs a GPU, writes outside the tree, ...)
    <!-- exit: 3 -->             the expected exit code of the last command (default 0)

and just before the output block:

    <!-- tolerance: 1% -->       numbers may differ by this relative amount (default: exactly)

Prose that quotes checked output is checked too. An HTML comment `<!-- numbers: quoted -->` on
the line before a paragraph says that every number followed by a unit in it (ms, s, us, ns, GiB,
MiB, GB, %, tokens/s) is one of the numbers the output blocks above it in the file print,
as the prose rounds it (within one unit of its last digit: "332.7 ms" for 332.743, "24 ms" for
24.303; a time may be quoted in another time unit), or, when the word after it is "faster",
"slower", "less", "more", "lower" or "higher", the difference of two numbers that those blocks
print with the same unit ("15.5 ms faster" for 340.103 ms - 324.566 ms). Since the blocks are
checked against the commands, a quoted number that drifts from the output fails.

A command may continue over several lines (each but the last ending in `\`). An old-style
example line `$ stepsim ...` (never run, so its output goes stale unnoticed) is an error unless
its block is marked `<!-- skip: REASON -->`.

In the expected output a line `...` matches any number of lines; everything else must match
line by line (trailing blanks ignored). `--update` rewrites the output blocks from what the
commands print now; a block with `...` lines keeps its excerpts (refresh_excerpt): as many head
lines as it shows, and each later part from the line it starts with to the next blank line.
A fenced block tagged `python` is a notebook cell: with `--python PY`, the file's python blocks
run in order in one PY process from the repository root (state carries from cell to cell), and
the block after each, as above, is what it prints; without `--python` they are not run (the
docs test has no Python package to import; python/tests/test_docs.py runs them with it).
A `/tmp/` path in a command is in a private temporary directory of that file's run (shown as
`/tmp/` in the output; the blocks of one file share it, in order, so a walkthrough can write a
file in one block and read it in a later one), so concurrent runs never share a file.
Exit 0 when every block matches, 1 otherwise (each mismatch is reported with a diff).
"""
import argparse
import difflib
import fcntl
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\w*)\s*$")
COMMENT = re.compile(r"^<!--\s*(skip|exit|tolerance)\s*:\s*(.*?)\s*-->\s*$")
NUMBER = re.compile(r"[-+]?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?")


def blocks(lines):
    """Yields (start, end, lang, body_lines, directives_before) for each fenced block."""
    i, pending = 0, {}
    while i < len(lines):
        m = FENCE.match(lines[i])
        c = COMMENT.match(lines[i])
        if c:
            pending[c.group(1)] = c.group(2)
        elif m:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            yield i, j, m.group(1), lines[i + 1:j], pending
            pending = {}
            i = j
        elif lines[i].strip() and not lines[i].lstrip().startswith("<!--"):
            pending = {}
        i += 1


def commands_of(body):
    out = []
    joined, cont = [], ""
    for line in body:  # `\` at the end of a line continues the command on the next one
        s = line.strip()
        if s.endswith("\\"):
            cont += s[:-1].rstrip() + " "
            continue
        joined.append(cont + s)
        cont = ""
    if cont:
        joined.append(cont.strip())
    for s in joined:
        if not s or s.startswith("#"):
            continue
        s = s.split("  #")[0].strip()
        if s.startswith("stepsim ") or s.startswith("build/tools/stepsim ") or s.startswith("diff "):
            out.append(s)
        else:
            return []  # a block with other commands (set-up) is not a stepsim example
    return out


OLD_STYLE = re.compile(r"^\s*\$\s+(build/tools/)?stepsim\b")


def old_style_lines(lines, all_blocks):
    """Line numbers (0-based) of `$ stepsim ...` lines outside a block marked skip."""
    skipped = set()
    for start, end, _lang, _body, directives in all_blocks:
        if "skip" in directives:
            skipped.update(range(start, end + 1))
    return [i for i, l in enumerate(lines) if OLD_STYLE.match(l) and i not in skipped]


def tree_files():
    out = set()
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if d not in (".git", "build") and not d.startswith("build-")]
        out.update(os.path.join(root, f) for f in files)
    return out


def run(cmds, build, private):
    """Runs the block from the repository root; files it writes into the tree are removed after."""
    before = tree_files()
    try:
        return run_in_tree(cmds, build, private)
    finally:
        for f in tree_files() - before:
            os.remove(f)


def run_in_tree(cmds, build, private):
    env = dict(os.environ)
    env["PATH"] = os.path.abspath(os.path.join(build, "tools")) + os.pathsep + env.get("PATH", "")
    text, code = "", 0
    # The documented /tmp/ paths become the file's private directory (and back in the output),
    # so two runs at once (ctest -j, two checkouts) never write each other's files.
    for c in cmds:
        # The documented paths first: the build path itself may lie under /tmp/ (a clone
        # made with mktemp -d) and must stay as it is.
        c = c.replace("/tmp/", private + "/")
        c = re.sub(r"^build/tools/stepsim ", os.path.join(build, "tools", "stepsim") + " ", c)
        p = subprocess.run(c, shell=True, env=env, capture_output=True, text=True, timeout=300)
        text += (p.stdout + p.stderr).replace(private + "/", "/tmp/")
        code = p.returncode
    return text, code


def numbers_close(expected, actual, tol):
    e, a = NUMBER.findall(expected), NUMBER.findall(actual)
    if NUMBER.sub("#", expected) != NUMBER.sub("#", actual) or len(e) != len(a):
        return False
    for x, y in zip(e, a):
        fx, fy = float(x.replace(",", "")), float(y.replace(",", ""))
        if abs(fx - fy) > tol * max(abs(fx), abs(fy)) + 1e-12:
            return False
    return True


def refresh_excerpt(documented, actual):
    """A documented excerpt (parts between `...` lines) rebuilt from what the command prints now:
    the head keeps its line count; each later part restarts at the printed line equal to its
    first line (searched after the previous part) and runs to the next blank line, or keeps its
    length when it holds blank lines itself. None when a part's first line is no longer printed."""
    parts, cur = [], []
    for line in documented:
        if line.rstrip() == "...":
            parts.append(cur)
            cur = []
        else:
            cur.append(line)
    parts.append(cur)
    out = actual[:len(parts[0])]
    pos = len(out)
    for part in parts[1:]:
        out.append("...")
        if not part:
            continue
        anchor = part[0].rstrip()
        start = next((i for i in range(pos, len(actual)) if actual[i].rstrip() == anchor), None)
        if start is None:
            return None
        if any(not l.strip() for l in part):
            end = min(start + len(part), len(actual))
        else:
            end = start
            while end < len(actual) and actual[end].strip():
                end += 1
        out.extend(actual[start:end])
        pos = end
    return out


def matches(expected, actual, tol):
    """expected may hold `...` lines (any number of lines)."""
    exp = [l.rstrip() for l in expected]
    act = [l.rstrip() for l in actual]
    while act and not act[-1]:
        act.pop()
    while exp and not exp[-1]:
        exp.pop()

    def same(e, a):
        return e == a or (tol > 0 and numbers_close(e, a, tol))

    def rec(i, j):
        if i == len(exp):
            return j == len(act)
        if exp[i] == "...":
            return any(rec(i + 1, k) for k in range(j, len(act) + 1))
        return j < len(act) and same(exp[i], act[j]) and rec(i + 1, j + 1)

    return rec(0, 0)


QUOTED = re.compile(r"^<!--\s*numbers\s*:\s*quoted\s*-->\s*$")
UNIT = r"(ms|s|us|µs|ns|GiB|MiB|GB|%|tokens/s)"
PROSE_NUMBER = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?" + UNIT + r"(?![\w/])(?:[\s,;:)]+(\w+))?")
BLOCK_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s?" + UNIT + r"(?![\w/]))?")
TIME_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1}
DIFFERENCE_WORDS = {"faster", "slower", "less", "more", "lower", "higher"}


def quoted_number_errors(paragraph, block_lines):
    """The numbers with a unit in `paragraph` that the output lines `block_lines` do not print
    (rounded as the prose shows them, or as a difference; see the module docstring)."""
    plain, by_unit = [], {}
    for line in block_lines:
        for m in BLOCK_NUMBER.finditer(line):
            v = float(m.group(1))
            plain.append(v)
            if m.group(2):
                by_unit.setdefault(m.group(2), []).append(v)
    errors = []
    for m in PROSE_NUMBER.finditer(paragraph):
        text, unit, word = m.group(1).replace(",", ""), m.group(2), (m.group(3) or "").lower()
        value = float(text)
        step = 10 ** -(len(text.split(".")[1]) if "." in text else 0)
        candidates = list(plain)
        if unit in TIME_NS:  # a block number in another time unit, converted to the prose's
            for u, vs in by_unit.items():
                if u in TIME_NS and u != unit:
                    candidates += [v * TIME_NS[u] / TIME_NS[unit] for v in vs]
        if any(abs(value - c) < step for c in candidates):
            continue
        if word in DIFFERENCE_WORDS:
            same = by_unit.get(unit, [])
            if any(abs(value - abs(a - b)) < step for i, a in enumerate(same) for b in same[i + 1:]):
                continue
        errors.append(f"{m.group(1)} {unit}")
    return errors


def check_quoted_prose(path, lines, all_blocks):
    """(paragraphs checked, failures) for the paragraphs marked `<!-- numbers: quoted -->`."""
    checked = failures = 0
    for i, line in enumerate(lines):
        if not QUOTED.match(line):
            continue
        checked += 1
        j = i + 1
        while j < len(lines) and lines[j].strip():
            j += 1
        paragraph = " ".join(lines[i + 1:j])
        above = [l for (start, end, lang, body, _) in all_blocks if end < i and lang in ("", "text") for l in body]
        if not paragraph.strip():
            failures += 1
            print(f"{path}:{i + 1}: <!-- numbers: quoted --> is not followed by a paragraph")
            continue
        errors = quoted_number_errors(paragraph, above)
        if errors:
            failures += 1
            print(f"{path}:{i + 2}: the paragraph quotes {', '.join(errors)}, which no output block above prints "
                  f"(rounded as written, or as a difference before 'faster'/'slower'/...)")
    return checked, failures


CELL_MARK = "@@stepsim-docs-cell@@"


def run_cells(cells, python, private, path):
    """Runs the python cells in order in one `python` process; returns [(output, exit code)] per cell.

    A cell that raises ends the run: it gets the traceback and exit 1, the cells after it exit 1."""
    sources = ["\n".join(c).replace("/tmp/", private + "/") for c in cells]
    driver = (
        "import sys, traceback\n"
        f"cells = {sources!r}\n"
        "g = {'__name__': '__main__'}\n"
        "for i, src in enumerate(cells):\n"
        f"    print({CELL_MARK!r}, flush=True)\n"
        "    try:\n"
        f"        exec(compile(src, {path!r} + ' python cell ' + str(i + 1), 'exec'), g)\n"
        "    except BaseException:\n"
        "        traceback.print_exc(file=sys.stdout)\n"
        "        sys.exit(1)\n"
        "    sys.stdout.flush(); sys.stderr.flush()\n")
    p = subprocess.run([python, "-c", driver], capture_output=True, text=True, timeout=600)
    parts = p.stdout.replace(private + "/", "/tmp/").split(CELL_MARK + "\n")[1:]
    out = []
    for i in range(len(cells)):
        if i < len(parts):
            failed = p.returncode != 0 and i == len(parts) - 1
            text = parts[i] + (p.stderr.replace(private + "/", "/tmp/") if failed or i == len(cells) - 1 else "")
            out.append((text, 1 if failed else 0))
        else:
            out.append((p.stderr if not parts else "(not run: an earlier cell failed)\n", 1))
    return out


def check_file(path, build, update, python=None):
    private = tempfile.mkdtemp(prefix="stepsim-docs-")
    try:
        return check_file_in(path, build, update, private, python)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def check_file_in(path, build, update, private, python=None):
    with open(path) as f:
        lines = f.read().split("\n")
    all_blocks = list(blocks(lines))
    failures, ran, edits = 0, 0, []
    for i in old_style_lines(lines, all_blocks):
        ran += 1
        failures += 1
        print(f"{path}:{i + 1}: `$ stepsim` example line is never run: write it as a ```sh block followed by its "
              f"output block (or mark the block <!-- skip: REASON -->)\n  {lines[i].strip()}")
    quoted, quoted_failures = check_quoted_prose(path, lines, all_blocks)
    ran += quoted
    failures += quoted_failures
    cells = [k for k, b in enumerate(all_blocks) if b[2] == "python" and "skip" not in b[4]] if python else []
    cell_outputs = run_cells([all_blocks[k][3] for k in cells], python, private, path) if cells else {}
    for k, (start, end, lang, body, directives) in enumerate(all_blocks):
        if lang not in ("sh", "python") or "skip" in directives:
            continue
        if lang == "python":
            if k not in cells:
                continue
            cmds = [f"python cell {cells.index(k) + 1}"]
        else:
            cmds = commands_of(body)
            if not cmds:
                continue
        out_block = None
        if k + 1 < len(all_blocks):
            nstart, nend, nlang, nbody, ndirs = all_blocks[k + 1]
            between = lines[end + 1:nstart]
            if nlang in ("", "text") and all(not l.strip() or l.strip().startswith("<!--") for l in between):
                out_block = (nstart, nend, nbody, ndirs)
        actual, code = cell_outputs[cells.index(k)] if lang == "python" else run(cmds, build, private)
        ran += 1
        want_code = int(directives.get("exit", "0"))
        where = f"{path}:{start + 1}"
        if code != want_code:
            failures += 1
            print(f"{where}: {' && '.join(cmds)}: exit {code}, expected {want_code}\n{actual[-2000:]}")
            continue
        if out_block is None:
            continue
        nstart, nend, nbody, ndirs = out_block
        tol = float(ndirs.get("tolerance", "0").rstrip("%")) / 100
        act_lines = actual.rstrip("\n").split("\n")
        if matches(nbody, act_lines, tol):
            continue
        if update:
            # Which lines an excerpt shows is the author's choice: kept, with what they print now.
            new = refresh_excerpt(nbody, act_lines) if "..." in (l.rstrip() for l in nbody) else act_lines
            if new is None:
                failures += 1
                print(f"{where}: the block (line {nstart + 1}) shows a line the command no longer prints: update it by hand")
                continue
            edits.append((nstart + 1, nend, new))
            print(f"{where}: updated")
            continue
        failures += 1
        diff = "\n".join(difflib.unified_diff(nbody, act_lines, "documented", "actual", lineterm="", n=1))
        print(f"{where}: output differs from the documented block (line {nstart + 1}):\n{diff}\n")
    if edits:
        for s, e, new in sorted(edits, reverse=True):
            lines[s:e] = new
        with open(path, "w") as f:
            f.write("\n".join(lines))
    return ran, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--python", help="an interpreter with the stepsim package: also run the python cells")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or ["README.md"] + sorted(glob.glob("docs/*.md"))
    total_ran = total_fail = 0
    # Some blocks write into the tree (`--trace step.json`) and every run removes what appeared
    # there: two runs on one tree at once (two ctest runs) take turns.
    tree = hashlib.sha1(os.path.abspath(".").encode()).hexdigest()[:12]
    with open(os.path.join(tempfile.gettempdir(), f"stepsim-docs-{tree}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for f in files:
            ran, fail = check_file(f, a.build, a.update, a.python)
            total_ran += ran
            total_fail += fail
    print(f"docs: {total_ran - total_fail} passed, {total_fail} failed")
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
