"""docs/python.md's cells run, in order, in this interpreter's environment, and print what the page shows."""
import subprocess
import sys

import pytest

from conftest import ROOT


def test_python_page_cells_print_what_the_page_shows():
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: docs/python.md plots with it (pip install '.[plot]')")
    p = subprocess.run([sys.executable, "tools/check_docs.py", "--python", sys.executable, "docs/python.md"],
                       cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert " 0 failed" in p.stdout and "docs: 0 passed" not in p.stdout
