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

import os
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


def keep_freed_memory() -> None:
    """Keeps memory this process frees for its next allocations, as the ``stepsim`` CLI does.

    glibc, by default, returns the top of its heap to the kernel once more than its trim
    threshold is free and serves blocks above its mmap threshold with fresh mappings, so a call
    in a loop can fault the pages of the one before in again (about 430 page faults, a third of
    the call, for the Llama-3-8B DDP example whose result is dropped at each call, before
    ``simulate`` kept its last simulation until the next call: docs/python.md). ``simulate``
    needs this no longer; other calls in a loop may. This sets glibc's thresholds for the whole
    process as the CLI sets its own (sim/core/memory_policy.hpp): every block from the heap,
    none from a mapping of its own, up to 1 GiB of free heap kept. Nothing else in the process
    is told: its freed memory stays resident too, which is why stepsim never does it unasked.
    ``STEPSIM_KEEP_FREED_MEMORY=1`` in the environment does it at import. A no-op on other C
    libraries.
    """
    _core.keep_freed_memory()


if os.environ.get("STEPSIM_KEEP_FREED_MEMORY", "") not in ("", "0"):
    keep_freed_memory()


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
    "keep_freed_memory",
    "model_from_module",
    "scale",
    "simulate",
    "sweep",
    "tune",
    "validate",
]
