"""The CLI's subcommands as functions (python/src/core_module.cpp makes the library calls)."""
from __future__ import annotations

import html
import io
import json
import math
import os
import tempfile
from functools import cached_property
from numbers import Integral, Real
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _core
from ._errors import InputError

if TYPE_CHECKING:
    import pandas as pd


def _pd() -> Any:
    """pandas, imported where a DataFrame is first made: ``import stepsim`` and ``simulate`` do
    not load it (0.37 s and 55 MB of a 71 MB process at import; docs/python.md)."""
    import pandas

    return pandas

PathLike = Union[str, "os.PathLike[str]"]
Experiment = Union[PathLike, Mapping[str, Any]]
Overrides = Optional[Union[Mapping[str, Any], Sequence[str]]]

# What a dict given to the API is called in messages (the CLI names the file).
DICT_NAME = "<dict>"


def _json_value(value: Any, where: str, name: str) -> Any:
    """`value` as plain JSON types; InputError naming `where` (a JSON pointer) otherwise."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        v = float(value)
        if not math.isfinite(v):
            raise InputError(f"{name}: {where or '/'}: {v}: expected a finite number (JSON has no NaN or infinity)")
        return v
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InputError(f"{name}: {where or '/'}: key {k!r}: expected a string key (JSON object keys are strings)")
            out[k] = _json_value(v, f"{where}/{k}", name)
        return out
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{where}/{i}", name) for i, v in enumerate(value)]
    raise InputError(f"{name}: {where or '/'}: {type(value).__name__} {value!r:.60}: expected a JSON value "
                     "(dict, list, str, int, float, bool or None)")


def _source(doc: Union[PathLike, Mapping[str, Any]], what: str) -> "tuple[str, str]":
    """(source, JSON text): a path as (path, ""), a dict as (DICT_NAME, its JSON)."""
    if isinstance(doc, Mapping):
        return DICT_NAME, json.dumps(_json_value(doc, "", DICT_NAME))
    if isinstance(doc, (str, os.PathLike)):
        return os.fspath(doc), ""
    raise InputError(f"{what}: {type(doc).__name__}: expected a file path or a dict in the documented schema")


def _set_lines(overrides: Overrides) -> List[str]:
    """`--set path=value` lines: a dict's values as JSON (so "fsdp2" and 50 read as the CLI reads them)."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        lines = []
        for path, value in overrides.items():
            if not isinstance(path, str):
                raise InputError(f"overrides: key {path!r}: expected a dotted path such as strategy.bucket_cap_mb")
            lines.append(f"{path}={json.dumps(_json_value(value, '', f'--set {path}'))}")
        return lines
    if isinstance(overrides, (list, tuple)) and all(isinstance(s, str) for s in overrides):
        return list(overrides)
    raise InputError("overrides: expected a dict of path: value (as --set path=value), or a list of \"path=value\" strings")


def _count(value: Optional[int], name: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
        raise InputError(f"{name} {value!r}: expected a number of worker threads >= 1 (or 0 or None: all cores)")
    return int(value)


def _write_atomically(path: PathLike, text: str) -> None:
    """Writes `text` to a temporary beside `path` and renames it into place (as the CLI's outputs)."""
    target = Path(os.fspath(path))
    if target.is_dir():
        raise InputError(f"{target}: expected a file to write, not a directory")
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class Result:
    """One simulated step, as ``stepsim simulate`` reports it.

    Attributes:
        metrics: the ``metrics`` object of ``simulate --json`` (step_time_ns, exposed_comm_ns,
            peak_memory_bytes, ...; DESIGN.md section 5).
        file: the experiment file (or ``<dict>``).
    Tables (pandas DataFrames, built on first use): :attr:`phases`, :attr:`classes`,
    :attr:`collectives`, :attr:`ops`, :attr:`memory`.
    """

    def __init__(self, sim: "_core.Simulation") -> None:
        self._sim = sim
        self.file: str = sim.file
        self.metrics: Dict[str, Any] = sim.metrics()  # as json.loads(sim.metrics_json()) gives it

    @cached_property
    def json(self) -> Dict[str, Any]:
        """The whole result as ``simulate --json`` prints it (schema stepsim.result/1)."""
        return json.loads(self._sim.result_json())

    @property
    def summary(self) -> Dict[str, Any]:
        """Framework, model, world size, tokens/s, MFU, ...: the result's ``summary``."""
        return self.json["summary"]

    @cached_property
    def ops(self) -> pd.DataFrame:
        """Every kernel and collective of the step, in issue order (the result's ``ops``)."""
        return _pd().DataFrame(json.loads(self._sim.ops_json()))

    @cached_property
    def collectives(self) -> pd.DataFrame:
        """The collectives: name, collective, comm, bytes, dtype, phase, times and exposed_ns."""
        ops = self.ops
        cols = ["name", "collective", "comm", "bytes", "dtype", "phase", "stream", "issue_ns", "start_ns", "end_ns", "exposed_ns"]
        if "collective" not in ops.columns:
            return _pd().DataFrame(columns=cols)
        c = ops[ops["kind"] == "collective"]
        c = c[[k for k in cols if k in c.columns]].reset_index(drop=True)
        # Integers, as in the result (the ops frame holds NaN for the kernels' missing bytes).
        return c.astype({k: "int64" for k in ("bytes", "exposed_ns") if k in c.columns})

    @cached_property
    def classes(self) -> pd.DataFrame:
        """Step time per kernel class (gemm, attention, ..., idle): class, kernels, time_ns."""
        b = json.loads(self._sim.classes_json())
        return _pd().DataFrame([{"class": k, "kernels": v["kernels"], "time_ns": v["time_ns"]} for k, v in b.items()])

    @cached_property
    def phases(self) -> pd.DataFrame:
        """Per phase: its duration (metrics' phases) and the busy time of its kernels and collectives."""
        ops = self.ops
        ops = ops.assign(duration_ns=ops["end_ns"] - ops["start_ns"])
        rows = []
        phases = self.metrics["phases"]
        order = ["forward", "backward", "optimizer"]
        for phase in order + sorted(k[: -len("_ns")] for k in phases if k[: -len("_ns")] not in order):
            duration = phases[f"{phase}_ns"]
            mine = ops[ops["phase"] == phase]
            kernels = mine[mine["kind"] == "kernel"]
            colls = mine[mine["kind"] == "collective"]
            rows.append({
                "phase": phase,
                "duration_ns": duration,
                "kernels": len(kernels),
                "kernel_time_ns": int(kernels["duration_ns"].sum()),
                "collectives": len(colls),
                "comm_time_ns": int(colls["duration_ns"].sum()),
                "exposed_comm_ns": int(colls["exposed_ns"].sum()) if "exposed_ns" in colls else 0,
            })
        return _pd().DataFrame(rows)

    @cached_property
    def memory(self) -> pd.DataFrame:
        """The memory curve: one row per change, time_ns, total/reserved bytes and bytes per category."""
        return _pd().DataFrame(json.loads(self._sim.memory_json()))

    def to_json(self, indent: Optional[int] = 1) -> str:
        """The result as ``simulate --json`` prints it."""
        return json.dumps(self.json, indent=indent)

    def text_report(self) -> str:
        """The text report ``simulate`` prints."""
        return self._sim.text_report()

    def write_trace(self, path: PathLike) -> None:
        """Writes the Chrome/Perfetto trace (``simulate --trace``)."""
        _write_atomically(path, self._sim.chrome_trace(self.file))

    def write_report(self, path: PathLike) -> None:
        """Writes the self-contained HTML report (``simulate --report``)."""
        _write_atomically(path, self._sim.html_report())

    def __repr__(self) -> str:
        m = self.metrics
        return (f"<stepsim.Result {self.file}: step {m['step_time_ns'] / 1e6:.3f} ms, exposed comm "
                f"{m['exposed_comm_ns'] / 1e6:.3f} ms, peak {m['peak_memory_bytes'] / 2**30:.2f} GiB>")

    def _repr_html_(self) -> str:
        m, s = self.metrics, self.summary
        rows = [
            ("step time", f"{m['step_time_ns'] / 1e6:.3f} ms"),
            ("compute / comm", f"{m['compute_time_ns'] / 1e6:.3f} / {m['comm_time_ns'] / 1e6:.3f} ms"),
            ("exposed comm", f"{m['exposed_comm_ns'] / 1e6:.3f} ms ({m['overlap_pct']:.1f}% overlapped)"),
            ("peak allocated / reserved", f"{m['peak_memory_bytes'] / 2**30:.2f} / {m['peak_reserved_bytes'] / 2**30:.2f} GiB"),
            ("tokens/s", f"{s.get('tokens_per_s', 0):,.0f}"),
        ]
        if "mfu_pct" in s:
            rows.append(("MFU", f"{s['mfu_pct']:.1f}%"))
        table = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
        title = html.escape(f"{s['framework']} {s['model']} x{s['world_size']} ({self.file})")
        return f"<div><b>{title}</b><table>{table}</table>{self._sim.timeline_svg()}</div>"


def simulate(experiment: Experiment, overrides: Overrides = None) -> Result:
    """Simulates one training step, as ``stepsim simulate EXP.json [--set path=value]...``.

    Args:
        experiment: an experiment file (a relative name not found from the working directory is
            looked up in the data directory, e.g. ``configs/examples/...``), or a dict in the
            documented schema (docs/configuration.md; its "include" and profile names resolve
            against the working directory, then the data directory).
        overrides: ``{"strategy.bucket_cap_mb": 50}``: each as ``--set path=value`` (the value as
            JSON), or a list of ``"path=value"`` strings.
    Raises:
        InputError: bad input, with the CLI's message.

    The most recent simulation is kept until the next call has made its own, even when its
    Result is dropped at once, so that a loop reuses the heap pages of the call before instead
    of having glibc give them back and fault them in again (``stepsim.simulate(exp).metrics[...]``
    ran at 1.7x the C++ call, at 1.1-1.2x with this: docs/python.md). That is about 2 MB for the
    examples; a simulation of more than ``_KEEP_AT_MOST_INSTRUCTIONS`` instructions is not kept.
    """
    global _last_simulation
    source, text = _source(experiment, "simulate")
    sim = _core.simulate(source, text, _set_lines(overrides))
    # Released only now, after this call's allocations, so that they could reuse its pages.
    _last_simulation = sim if sim.instructions <= _KEEP_AT_MOST_INSTRUCTIONS else None
    return Result(sim)


# simulate's deferred release: the last simulation, and the size above which none is kept
# (~0.25-0.5 KB of program and timeline an instruction, so at most ~25-50 MB).
_last_simulation: "Optional[_core.Simulation]" = None
_KEEP_AT_MOST_INSTRUCTIONS = 100_000


def sweep(base: Experiment, grid: Optional[Mapping[str, Sequence[Any]]] = None, jobs: Optional[int] = None,
          constraints: Optional[Iterable[str]] = None, points: Optional[Sequence[Mapping[str, Any]]] = None) -> pd.DataFrame:
    """Runs a what-if sweep, as ``stepsim sweep SWEEP.json --out F.csv``; returns the CSV as a DataFrame.

    The frame equals ``pandas.read_csv`` of the CLI's CSV (same columns, values and types);
    ``frame.attrs["summary"]`` holds the summary (``--json-out``'s).

    Args:
        base: the base experiment (a file or a dict), or, with neither `grid` nor `points`, a
            sweep file (or dict) in the sweep schema (docs/sweep.md).
        grid: axes, dotted config path -> values: ``{"cluster.nodes": [1, 2, 4]}`` (full grid).
        jobs: worker threads (None or 0: all cores).
        constraints: ``["peak_reserved_gib <= 70"]``, added to the file's.
        points: explicit points (path -> value dicts) instead of, or besides, the grid.
    """
    if grid is None and points is None:
        source, text = _source(base, "sweep")
    else:
        if isinstance(base, Mapping):
            base_doc: Any = _json_value(base, "/base", DICT_NAME)
        elif isinstance(base, (str, os.PathLike)):
            base_doc = {"include": os.path.abspath(os.fspath(base)) if os.path.exists(base) else os.fspath(base)}
        else:
            raise InputError(f"sweep: {type(base).__name__}: expected a file path or a dict in the documented schema")
        doc: Dict[str, Any] = {"base": base_doc}
        if grid is not None:
            doc["axes"] = _json_value(grid, "/axes", DICT_NAME)
        if points is not None:
            doc["points"] = _json_value(points, "/points", DICT_NAME)
        source, text = DICT_NAME, json.dumps(doc)
    cons = list(constraints or [])
    if not all(isinstance(c, str) for c in cons):
        raise InputError("constraints: expected strings \"metric OP number\", e.g. \"peak_reserved_gib <= 70\"")
    csv, summary = _core.sweep(source, text, _count(jobs, "jobs"), cons)
    frame = _pd().read_csv(io.StringIO(csv))
    frame.attrs["summary"] = json.loads(summary)
    return frame


def tune(experiment: Experiment, overrides: Overrides = None, memory_cap: Optional[str] = None,
         objective: Optional[str] = None, jobs: Optional[int] = None, max_grid: Optional[int] = None) -> Dict[str, Any]:
    """Searches the strategy's knobs for the fastest configuration that fits, as ``stepsim tune --json``.

    Args:
        memory_cap: a limit on peak reserved memory such as ``"70GiB"`` (default: the device's).
        objective: ``"step_time"`` (default), ``"tokens_per_s"`` or ``"mfu"``.
        max_grid: search the full grid up to this many points, else coordinate descent (4096).
    Returns: the stepsim.tune/1 document (``found``, ``best``, ``changes``, ...).
    """
    source, text = _source(experiment, "tune")
    if max_grid is not None and (isinstance(max_grid, bool) or not isinstance(max_grid, Integral) or max_grid < 1):
        raise InputError(f"max_grid {max_grid!r}: expected an integer >= 1")
    return json.loads(_core.tune(source, text, _set_lines(overrides), memory_cap or "", objective or "",
                                 _count(jobs, "jobs"), int(max_grid or 0)))


def scale(experiment: Experiment, gpus: Optional[Sequence[int]] = None, nodes: Optional[Sequence[int]] = None,
          overrides: Overrides = None) -> pd.DataFrame:
    """The weak-scaling curve, as ``stepsim scale EXP.json --gpus ... --out F.csv``; returns the CSV as a DataFrame.

    One row per GPU count: step time, tokens/s per GPU, efficiency, the parts of the step and
    NCCL's algorithm per collective (docs/scale.md); ``frame.attrs["scale"]`` holds the
    stepsim.scale/1 document (``--json``'s).

    Args:
        gpus: GPU counts (multiples of cluster.gpus_per_node), increasing; or
        nodes: node counts (default 1, 2, 4, 8, 16).
        overrides: applied at every point, as ``--set`` (not cluster.nodes).
    """
    if gpus is not None and nodes is not None:
        raise InputError(f"scale: nodes={list(nodes)!r} gpus={list(gpus)!r}: expected one of the two")
    flag, counts = ("gpus", gpus) if gpus is not None else ("nodes", nodes)
    text = ""
    if counts is not None:
        if isinstance(counts, (str, bytes)) or not all(isinstance(c, Integral) and not isinstance(c, bool) for c in counts):
            raise InputError(f"{flag} {counts!r}: expected a list of integers, e.g. [8, 16, 32]")
        text = ",".join(str(int(c)) for c in counts)
        if not text:
            raise InputError(f"--{flag}: expected a comma-separated list of counts, e.g. 1,2,4")
    source, doc = _source(experiment, "scale")
    csv, js = _core.scale(source, doc, _set_lines(overrides), flag, text)
    frame = _pd().read_csv(io.StringIO(csv))
    frame.attrs["scale"] = json.loads(js)
    return frame


def explain(experiment: Experiment, overrides: Overrides = None, sensitivities: bool = True) -> Dict[str, Any]:
    """The critical path and what-if sensitivities, as ``stepsim explain --json`` (stepsim.explain/1)."""
    source, text = _source(experiment, "explain")
    sim = _core.simulate(source, text, _set_lines(overrides))
    return json.loads(_core.explain(sim, bool(sensitivities)))


def _paths(files: Union[PathLike, Sequence[PathLike]], what: str) -> List[str]:
    if isinstance(files, (str, os.PathLike)):
        return [os.fspath(files)]
    if isinstance(files, (list, tuple)) and all(isinstance(f, (str, os.PathLike)) for f in files):
        return [os.fspath(f) for f in files]
    raise InputError(f"{what}: expected a trace file or a list of them (one per rank)")


class Analysis:
    """What ``stepsim analyze --json`` measures in Kineto traces, with DataFrames.

    Attributes:
        json: the stepsim.analyze/1 document.
        steps: one row per (file, step): the step's metrics (step_time_ns, exposed_comm_ns, ...).
        classes: one row per (file, step, class): kernels and time_ns.
        collectives: one row per (file, collective kind, dtype, group, size): count, times, bus bandwidth.
        mean: the job's mean metrics (dict).
    """

    def __init__(self, doc: Dict[str, Any]) -> None:
        self.json = doc
        self.mean: Dict[str, Any] = doc["mean"]["metrics"]
        steps, classes, colls = [], [], []
        for t in doc["traces"]:
            for s in t["steps"]:
                m = {k: v for k, v in s["metrics"].items() if not isinstance(v, dict)}
                m.update({f"{k}": v for k, v in s["metrics"].get("phases", {}).items()})
                steps.append({"file": t["file"], "rank": t["rank"], "step": s["step"], **m})
                for cls, v in s.get("classes", {}).items():
                    classes.append({"file": t["file"], "rank": t["rank"], "step": s["step"], "class": cls, **v})
            for c in t["collectives"]:
                colls.append({"file": t["file"], "rank": t["rank"], **c})
        self.steps = _pd().DataFrame(steps)
        self.classes = _pd().DataFrame(classes)
        self.collectives = _pd().DataFrame(colls)

    def __repr__(self) -> str:
        return f"<stepsim.Analysis {len(self.json['traces'])} trace(s), {len(self.steps)} step rows>"


def analyze(trace: Union[PathLike, Sequence[PathLike]], steps: Optional[str] = None) -> Analysis:
    """Analyses PyTorch profiler traces (one per rank), as ``stepsim analyze TRACE... --json``.

    Args:
        steps: the ProfilerSteps to analyse: ``"N"``, ``"A-B"``, ``"A-"`` or ``"-B"`` (default all).
    """
    return Analysis(json.loads(_core.analyze(_paths(trace, "analyze"), steps or "")))


def compare(first: PathLike, second: PathLike, tolerance: str = "5%", memory_tolerance: Optional[str] = None,
            steps: Optional[str] = None) -> Dict[str, Any]:
    """Compares two results or traces, as ``stepsim compare A B --json`` (stepsim.compare/1).

    Each file is a result (simulate --json, live), an analysis (analyze --json) or a profiler trace.
    The returned document's ``pass`` says whether step time and peak memory are within tolerance.
    """
    a, b = _paths(first, "compare"), _paths(second, "compare")
    return json.loads(_core.compare(a[0], b[0], tolerance, memory_tolerance or "", steps or ""))


def validate(suite: PathLike = "validation/suite.json") -> pd.DataFrame:
    """Predicts every case of the validation suite against its measurement, as ``stepsim validate --json``.

    Returns one row per (case, metric): case, source, metric, predicted, measured, error, pass,
    ...; ``frame.attrs`` holds the document's ``summaries``, ``pairs``, ``cases`` and ``json``.
    """
    doc = json.loads(_core.validate(os.fspath(suite)))
    frame = _pd().DataFrame(doc["rows"])
    frame.attrs["summaries"] = doc["summaries"]
    frame.attrs["pairs"] = doc["pairs"]
    frame.attrs["cases"] = doc["cases"]
    frame.attrs["json"] = doc
    return frame


def init_from_trace(trace: Union[PathLike, Sequence[PathLike]], steps: Optional[str] = None,
                    profile_out: Optional[PathLike] = None) -> Dict[str, Any]:
    """A starting experiment from a profiler trace of your job, as ``stepsim init --from-trace``.

    The profile fitted from the trace is written to `profile_out` when given (and the experiment
    names it by absolute path), else embedded in the experiment (``cluster.profile`` an object).
    Every guess is listed under ``"notes"``: check them before a what-if.
    """
    files = _paths(trace, "init_from_trace")
    ref = os.path.abspath(os.fspath(profile_out)) if profile_out is not None else "(inline)"
    experiment_text, profile_text = _core.init_from_trace(files, steps or "", ref)
    experiment = json.loads(experiment_text)
    if profile_out is not None:
        _write_atomically(profile_out, profile_text + "\n")
    else:
        experiment["cluster"]["profile"] = json.loads(profile_text)
    return experiment
