"""stepsim from Python: the CLI's subcommands as functions, dicts in, DataFrames out.

    >>> import stepsim
    >>> r = stepsim.simulate("configs/examples/llama3-8b-ddp-8xh100.json")
    >>> r.metrics["step_time_ns"]

Every function calls the same library code as the CLI (``stepsim simulate``, ``sweep``, ``tune``,
``explain``, ``analyze``, ``compare``, ``validate``, ``init --from-trace``), so the numbers are the
CLI's. Bad input raises :class:`InputError` (a ``ValueError``) with the CLI's message. The
shipped configs, profiles, the validation suite and its data are inside the package
(``stepsim/share``, laid out as the repository): a relative name that does not exist from the
working directory is looked up there, as the installed CLI does (``$STEPSIM_DATA_DIR`` overrides).
See docs/python.md.
"""
from __future__ import annotations

from pathlib import Path

from . import _core
from ._api import (
    Analysis,
    Result,
    analyze,
    compare,
    explain,
    init_from_trace,
    scale,
    simulate,
    sweep,
    tune,
    validate,
)
from ._errors import InputError
from ._torch import model_from_module

__version__ = "0.1.0"

_SHARE = Path(__file__).resolve().parent / "share"
if _SHARE.is_dir():
    _core.set_default_data_dir(str(_SHARE))


def data_dir() -> str:
    """The data directory in force ($STEPSIM_DATA_DIR, else the package's share/; "" if none)."""
    return _core.data_dir()


__all__ = [
    "Analysis",
    "InputError",
    "Result",
    "analyze",
    "compare",
    "data_dir",
    "explain",
    "init_from_trace",
    "model_from_module",
    "scale",
    "simulate",
    "sweep",
    "tune",
    "validate",
]
