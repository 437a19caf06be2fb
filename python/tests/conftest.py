"""Shared fixtures: the repository root and the CLI the Python API is compared with.

The CLI is $STEPSIM_CLI (tools/test.sh sets it to build/tools/stepsim), else the repository's
build/tools/stepsim. Tests run from the repository root.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LI_PLUS_TRACE = "data/traces/li-plus_playground/zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz"


def _cli_path() -> Path:
    return Path(os.environ.get("STEPSIM_CLI", ROOT / "build" / "tools" / "stepsim"))


class Cli:
    """Runs the stepsim CLI from the repository root."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def run(self, *args: str, expect: int = 0) -> subprocess.CompletedProcess:
        p = subprocess.run([str(self.binary), *args], cwd=ROOT, capture_output=True, text=True)
        assert p.returncode == expect, f"stepsim {' '.join(args)}: exit {p.returncode}\n{p.stderr}"
        return p

    def json(self, *args: str) -> dict:
        return json.loads(self.run(*args).stdout)

    def error(self, *args: str) -> str:
        """The message of a bad-input run (exit 2), without the "error: " prefix."""
        p = self.run(*args, expect=2)
        line = p.stderr.strip().splitlines()[-1]
        assert line.startswith("error: "), p.stderr
        return line[len("error: "):]


@pytest.fixture(scope="session")
def cli() -> Cli:
    binary = _cli_path()
    if not binary.exists():
        pytest.skip(f"the stepsim CLI is not built at {binary} (set STEPSIM_CLI): the comparisons with it are skipped")
    return Cli(binary)


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)
