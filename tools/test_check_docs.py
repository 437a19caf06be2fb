#!/usr/bin/env python3
"""Tests of tools/check_docs.py (ctest `docs_checker`): each case writes a small Markdown file,
runs the checker on it against the build, and states what the checker must say.

    python3 tools/test_check_docs.py BUILD_DIR      (from the repository root)
"""
import os
import subprocess
import sys
import tempfile
import unittest

BUILD = "build"
FENCE = "```"


def check(text, *options):
    """(exit code, output) of check_docs.py on a Markdown file holding `text`."""
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
        f.write(text)
    try:
        p = subprocess.run([sys.executable, "tools/check_docs.py", "--build", BUILD, *options, f.name], capture_output=True,
                           text=True, timeout=120)
        return p.returncode, p.stdout + p.stderr
    finally:
        os.remove(f.name)


class CheckDocs(unittest.TestCase):
    def test_old_style_line_fails(self):
        # A `$ stepsim` line is never executed, so its output could go stale: an error.
        code, out = check(f"{FENCE}\n$ stepsim simulate configs/examples/seed/c1-ddp-buckets.json\n{FENCE}\n")
        self.assertEqual(code, 1, out)
        self.assertIn(":2: `$ stepsim` example line is never run", out)

    def test_old_style_line_in_skipped_block_passes(self):
        code, out = check(f"<!-- skip: needs a GPU -->\n{FENCE}\n$ stepsim live exp.json\n{FENCE}\n")
        self.assertEqual(code, 0, out)
        self.assertIn("docs: 0 passed, 0 failed", out)

    def test_stale_output_fails_and_a_continued_command_runs(self):
        # The C1 seed case takes 56 ms (reference/seed-cases.md); the block claims 57 ms.
        block = (f"{FENCE}sh\nstepsim simulate configs/examples/seed/c1-ddp-buckets.json \\\n"
                 f"    | grep 'step time'\n{FENCE}\n\n{FENCE}text\n  step time                  {{}} ms   100.0%\n{FENCE}\n")
        code, out = check(block.format("56.000"))
        self.assertEqual(code, 0, out)
        code, out = check(block.format("57.000"))
        self.assertEqual(code, 1, out)
        self.assertIn("output differs from the documented block", out)

    def test_update_keeps_an_excerpt_and_refreshes_it(self):
        # An excerpt: the head line, then the "by class" table (stale numbers, a row short), then
        # the rest elided. --update keeps which lines it shows, with what the command prints now.
        stale = (f"{FENCE}sh\nstepsim simulate configs/examples/seed/c1-ddp-buckets.json\n{FENCE}\n\n{FENCE}text\n"
                 "stepsim simulate: configs/examples/seed/c1-ddp-buckets.json\n...\n"
                 "  by class                   time ms   % step   kernels\n"
                 "  compute                     51.000    89.3%        20\n...\n"
                 f"{FENCE}\n")
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write(stale)
        try:
            run = lambda *o: subprocess.run([sys.executable, "tools/check_docs.py", "--build", BUILD, *o, f.name],
                                            capture_output=True, text=True, timeout=120)
            self.assertEqual(run().returncode, 1)
            p = run("--update")
            self.assertIn("updated", p.stdout + p.stderr)
            with open(f.name) as g:
                updated = g.read()
            self.assertEqual(run().returncode, 0, updated)
            self.assertIn("stepsim simulate: configs/examples/seed/c1-ddp-buckets.json\n...\n  by class", updated)
            self.assertIn("  compute                     50.000    89.3%        20\n", updated)
            self.assertIn("  kernels per step                                   36\n...\n", updated)
        finally:
            os.remove(f.name)

    def test_blocks_of_one_file_share_tmp(self):
        # The second block reads what the first wrote under /tmp/ (the file's private directory).
        text = (f"{FENCE}sh\nstepsim schema --out /tmp/schema.json\n{FENCE}\n\n{FENCE}text\nwrote /tmp/schema.json\n{FENCE}\n\n"
                f"{FENCE}sh\ndiff /tmp/schema.json /tmp/schema.json\n{FENCE}\n")
        code, out = check(text)
        self.assertEqual(code, 0, out)
        self.assertIn("docs: 2 passed, 0 failed", out)

    def test_quoted_prose_numbers(self):
        # The C1 seed case's step time and compute (a checked block); a marked paragraph quotes them.
        block = (f"{FENCE}sh\nstepsim simulate configs/examples/seed/c1-ddp-buckets.json | grep -E '^  step time|^  compute .* ms'\n{FENCE}\n\n"
                 f"{FENCE}text\n  step time                  56.000 ms   100.0%\n  compute                    50.000 ms    89.3%\n{FENCE}\n\n")
        code, out = check(block + "<!-- numbers: quoted -->\nThe step takes 56.0 ms, of which compute is 89 %.\n")
        self.assertEqual(code, 0, out)
        # A difference of two numbers the block prints with the same unit, before "faster"/"less"/...
        code, out = check(block + "<!-- numbers: quoted -->\nCompute is 6 ms less than the step, and 0.056 s in all.\n")
        self.assertEqual(code, 0, out)
        # A number that drifted from the block fails, naming it; so does a difference without its word.
        code, out = check(block + "<!-- numbers: quoted -->\nThe step takes 57.2 ms.\n")
        self.assertEqual(code, 1, out)
        self.assertIn("the paragraph quotes 57.2 ms, which no output block above prints", out)
        code, out = check(block + "<!-- numbers: quoted -->\nThe gap is 6 ms.\n")
        self.assertEqual(code, 1, out)
        # An unmarked paragraph is not checked.
        code, out = check(block + "The step takes 57.2 ms.\n")
        self.assertEqual(code, 0, out)
    def test_python_cells_share_state_and_are_checked_only_with_python(self):
        # Cells run in order in one interpreter: the second prints what the first defined.
        text = (f"{FENCE}python\nx = 6 * 7\nprint('first', x)\n{FENCE}\n\n{FENCE}text\nfirst 42\n{FENCE}\n\n"
                f"{FENCE}python\nprint(x + {{}})\n{FENCE}\n\n{FENCE}text\n43\n{FENCE}\n")
        code, out = check(text.format(1), "--python", sys.executable)
        self.assertEqual(code, 0, out)
        self.assertIn("docs: 2 passed, 0 failed", out)
        code, out = check(text.format(2), "--python", sys.executable)
        self.assertEqual(code, 1, out)
        self.assertIn(":10: output differs from the documented block", out)
        code, out = check(text.format(2))
        self.assertEqual(code, 0, out)
        self.assertIn("docs: 0 passed, 0 failed", out)

    def test_a_failing_python_cell_fails_with_its_traceback(self):
        text = f"{FENCE}python\nraise ValueError('boom')\n{FENCE}\n\n{FENCE}python\nprint(1)\n{FENCE}\n"
        code, out = check(text, "--python", sys.executable)
        self.assertEqual(code, 1, out)
        self.assertIn("ValueError: boom", out)
        self.assertIn("docs: 0 passed, 2 failed", out)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        BUILD = sys.argv.pop(1)
    unittest.main(verbosity=1)
