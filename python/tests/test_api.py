"""stepsim's Python API against the CLI: the same library calls must give the same answers."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import stepsim
from conftest import LI_PLUS_TRACE, ROOT

DDP = "configs/examples/llama3-8b-ddp-8xh100.json"
FSDP2 = "configs/examples/llama3-8b-fsdp2-8xh100.json"


def test_simulate_gives_the_clis_step_time(cli):
    r = stepsim.simulate(DDP)
    expected = cli.json("simulate", DDP, "--json")
    assert r.metrics["step_time_ns"] == expected["metrics"]["step_time_ns"]
    assert r.metrics == expected["metrics"]
    assert r.json == expected


def test_a_loop_over_sequence_lengths_past_the_workload_cache_is_the_clis(cli):
    # The process keeps eight workloads; each build past them takes the names of the one it drops
    # (build_transformer's `recycled`). Every result, the ops' names included, is a fresh CLI's.
    for seq in [1024, 1536, 2048, 2560, 3072, 3584, 4096, 4608, 5120, 5632, 1024, 6144]:
        r = stepsim.simulate(FSDP2, {"workload.seq_len": seq})
        assert r.json == cli.json("simulate", FSDP2, "--set", f"workload.seq_len={seq}", "--json"), seq


def test_a_dict_simulates_as_its_file():
    doc = json.loads((ROOT / DDP).read_text())
    assert stepsim.simulate(doc).metrics == stepsim.simulate(DDP).metrics


def test_overrides_are_the_clis_set(cli):
    r = stepsim.simulate(DDP, {"strategy.bucket_cap_mb": 5, "workload.activation_checkpointing": "none"})
    expected = cli.json("simulate", DDP, "--set", "strategy.bucket_cap_mb=5", "--set",
                        "workload.activation_checkpointing=none", "--json")
    assert r.metrics == expected["metrics"]
    assert r.metrics != stepsim.simulate(DDP).metrics


def test_the_data_directory_finds_shipped_configs_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STEPSIM_DATA_DIR", str(ROOT))
    assert stepsim.simulate(DDP).metrics["step_time_ns"] > 0


def test_result_tables_agree_with_the_result(cli):
    r = stepsim.simulate(FSDP2)
    assert len(r.ops) == len(r.json["ops"])
    assert set(r.collectives["collective"]) >= {"all_gather", "reduce_scatter"}
    assert len(r.collectives) == sum(1 for o in r.json["ops"] if o["kind"] == "collective")
    assert set(r.classes["class"]) == set(r.json["classes"])
    assert list(r.phases["phase"]) == ["forward", "backward", "optimizer"]
    assert list(r.phases["duration_ns"]) == [r.metrics["phases"][f"{p}_ns"] for p in ("forward", "backward", "optimizer")]
    assert r.memory["total_bytes"].max() == r.metrics["peak_memory_bytes"]
    assert r.memory["reserved_bytes"].max() == r.metrics["peak_reserved_bytes"]
    assert json.loads(r.to_json()) == cli.json("simulate", FSDP2, "--json")
    html = r._repr_html_()
    assert "<svg" in html and "step time" in html
    assert "step" in repr(r)


def test_trace_and_report_are_the_clis_files(cli, tmp_path):
    r = stepsim.simulate(DDP)
    r.write_trace(tmp_path / "py.trace.json")
    r.write_report(tmp_path / "py.html")
    cli.run("simulate", DDP, "--trace", str(tmp_path / "cli.trace.json"), "--report", str(tmp_path / "cli.html"))
    assert (tmp_path / "py.trace.json").read_bytes() == (tmp_path / "cli.trace.json").read_bytes()
    assert (tmp_path / "py.html").read_bytes() == (tmp_path / "cli.html").read_bytes()


def test_sweep_equals_the_clis_csv(cli, tmp_path):
    sweep = "configs/sweeps/c6-llama8b-fsdp1-prefetch.json"
    cli.run("sweep", sweep, "--out", str(tmp_path / "cli.csv"), "--no-progress")
    expected = pd.read_csv(tmp_path / "cli.csv")
    got = stepsim.sweep(sweep, jobs=2)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.attrs["summary"]["points"] == len(expected)


def test_sweep_of_base_and_grid_equals_the_clis_csv(cli, tmp_path):
    grid = {"cluster.nodes": [1, 2], "strategy.bucket_cap_mb": [5, 25]}
    (tmp_path / "s.json").write_text(json.dumps({"base": {"include": str(ROOT / DDP)}, "axes": grid,
                                                 "constraints": ["peak_memory_gib <= 80"]}))
    cli.run("sweep", str(tmp_path / "s.json"), "--out", str(tmp_path / "cli.csv"), "--no-progress")
    expected = pd.read_csv(tmp_path / "cli.csv")
    got = stepsim.sweep(DDP, grid, jobs=1, constraints=["peak_memory_gib <= 80"])
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert list(got.dtypes) == list(expected.dtypes)


def test_a_sweep_releases_the_gil():
    # While the sweep runs in a thread, this thread keeps running Python: it sees the sweep in
    # progress over most of the sweep's duration. Were the GIL held, it would see it only in the
    # instants before the call (a few ms at most).
    in_call = threading.Event()
    done = threading.Event()
    span = {}

    def run():
        in_call.set()
        t0 = time.perf_counter()
        # 192 points: long enough to tell on a fast machine (16 points took 44 ms once the engine
        # got faster, and 64 points 43 ms after it got faster again, under the 50 ms below).
        stepsim.sweep(DDP, {"cluster.nodes": [1, 2, 4, 8, 16, 32, 64, 128],
                            "strategy.bucket_cap_mb": [1, 2, 5, 10, 25, 50, 100, 200],
                            "training.grad_accum": [1, 2, 4]}, jobs=1)
        span["call"] = time.perf_counter() - t0
        done.set()

    t = threading.Thread(target=run)
    t.start()
    in_call.wait()
    first = time.perf_counter()
    last = first
    while not done.is_set():
        last = time.perf_counter()
    t.join()
    assert span["call"] > 0.05, "the sweep is too short to tell"
    assert last - first > 0.5 * span["call"]


def test_tune_explain_are_the_clis(cli):
    assert stepsim.tune(DDP, max_grid=64) == cli.json("tune", DDP, "--max-grid", "64", "--json")
    assert stepsim.explain(DDP) == cli.json("explain", DDP, "--json")


def test_analyze_compare_init_are_the_clis(cli, tmp_path):
    a = stepsim.analyze(LI_PLUS_TRACE, steps="11-12")
    assert a.json == cli.json("analyze", LI_PLUS_TRACE, "--steps", "11-12", "--json")
    assert list(a.steps["step"]) == [11, 12]
    assert a.steps["step_time_ns"].mean() == pytest.approx(a.mean["step_time_ns"], abs=1)
    assert {"gemm", "idle"} <= set(a.classes["class"])
    assert len(a.collectives) == len(a.json["traces"][0]["collectives"]) > 0

    r = tmp_path / "r.json"
    r.write_text(stepsim.simulate(DDP).to_json())
    c = stepsim.compare(r, LI_PLUS_TRACE, steps="11-12")
    assert c == json.loads(cli.run("compare", str(r), LI_PLUS_TRACE, "--steps", "11-12", "--json", expect=3).stdout)

    exp = stepsim.init_from_trace(LI_PLUS_TRACE, steps="11-12", profile_out=tmp_path / "p.json")
    cli.run("init", "--from-trace", LI_PLUS_TRACE, "--steps", "11-12", "--out", str(tmp_path / "cli.json"),
            "--profile-out", str(tmp_path / "cli-p.json"))
    expected = json.loads((tmp_path / "cli.json").read_text())
    assert exp["cluster"].pop("profile") == str(tmp_path / "p.json")
    expected["cluster"].pop("profile")
    assert exp == expected
    assert json.loads((tmp_path / "p.json").read_text()) == json.loads((tmp_path / "cli-p.json").read_text())
    inline = stepsim.init_from_trace(LI_PLUS_TRACE, steps="11-12")
    assert isinstance(inline["cluster"]["profile"], dict)
    assert stepsim.simulate(inline).metrics == stepsim.simulate(tmp_path / "cli.json").metrics


def test_validate_is_the_clis(cli):
    frame = stepsim.validate()
    expected = json.loads(cli.run("validate", "--json").stdout)
    assert frame.to_dict("records") == expected["rows"]
    assert frame.attrs["summaries"] == expected["summaries"]


# Bad input: the CLI's message, as stepsim.InputError (a ValueError).

def _cli_message_for(cli, tmp_path, doc):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    return cli.error("simulate", str(f)).replace(str(f), stepsim._api.DICT_NAME)


def test_wrong_type_in_a_dict_is_the_clis_input_error(cli, tmp_path):
    doc = json.loads((ROOT / DDP).read_text())
    doc["cluster"]["nodes"] = "two"
    with pytest.raises(stepsim.InputError) as e:
        stepsim.simulate(doc)
    assert str(e.value) == _cli_message_for(cli, tmp_path, doc)
    assert isinstance(e.value, ValueError)
    assert (e.value.file, e.value.json_path) == ("<dict>", "/cluster/nodes")


def test_unknown_key_in_a_dict_is_the_clis_input_error(cli, tmp_path):
    doc = json.loads((ROOT / DDP).read_text())
    doc["strategy"]["bucket_cap"] = 25
    with pytest.raises(stepsim.InputError) as e:
        stepsim.simulate(doc)
    assert str(e.value) == _cli_message_for(cli, tmp_path, doc)
    assert e.value.json_path == "/strategy/bucket_cap"


def test_missing_file_is_the_clis_input_error(cli):
    with pytest.raises(stepsim.InputError) as e:
        stepsim.simulate("configs/examples/no-such-experiment.json")
    assert str(e.value) == cli.error("simulate", "configs/examples/no-such-experiment.json")
    assert e.value.file == "configs/examples/no-such-experiment.json"


def test_bad_override_and_non_json_values_are_input_errors(cli):
    with pytest.raises(stepsim.InputError) as e:
        stepsim.simulate(DDP, {"strategy.bucket_cap_mb": -5})
    assert str(e.value) == cli.error("simulate", DDP, "--set", "strategy.bucket_cap_mb=-5")
    with pytest.raises(stepsim.InputError, match=r"<dict>: /cluster/nodes: set .*expected a JSON value"):
        stepsim.simulate({"cluster": {"nodes": {1, 2}}})
    with pytest.raises(stepsim.InputError, match="expected a file path or a dict"):
        stepsim.simulate(42)
    with pytest.raises(stepsim.InputError, match="jobs -1"):
        stepsim.sweep(DDP, {"cluster.nodes": [1]}, jobs=-1)


def test_scale_equals_the_clis_csv_and_json(cli, tmp_path):
    cli.run("scale", DDP, "--gpus", "8,16,64", "--out", str(tmp_path / "cli.csv"))
    expected = pd.read_csv(tmp_path / "cli.csv")
    got = stepsim.scale(DDP, gpus=[8, 16, 64])
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.attrs["scale"] == cli.json("scale", DDP, "--gpus", "8,16,64", "--json")
    assert list(got["gpus"]) == [8, 16, 64]
    with pytest.raises(stepsim.InputError, match="--gpus 8,12: 12: expected a multiple of cluster.gpus_per_node"):
        stepsim.scale(DDP, gpus=[8, 12])


# What the process keeps of 16 MiB (or MIB) it wrote and freed (resident pages, /proc/self/statm), in a
# fresh interpreter: with glibc's defaults the block is a mapping of its own and goes back to the
# kernel; after keep_freed_memory() (or STEPSIM_KEEP_FREED_MEMORY=1) it comes from the heap and
# stays for the next allocation. Catches an opt-in that does nothing, and a default that
# changes the host process's malloc settings unasked.
_KEPT = """
import os, stepsim
if os.environ.get("CALL") == "1":
    stepsim.keep_freed_memory()
page = os.sysconf("SC_PAGE_SIZE")
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * page
block = b"x" * (int(os.environ.get("MIB", "16")) << 20)
before = rss()
del block
print(before - rss())
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc (Linux)")
def test_keep_freed_memory_is_opt_in_and_keeps_freed_blocks():
    import os
    import subprocess
    import sys

    def released(**env):
        e = {k: v for k, v in os.environ.items() if k != "STEPSIM_KEEP_FREED_MEMORY"}
        e.update(env)
        out = subprocess.run([sys.executable, "-c", _KEPT], env=e, capture_output=True, text=True, check=True)
        return int(out.stdout)

    mib = 1 << 20
    assert released() >= 15 * mib  # glibc's default: returned
    assert released(CALL="1") < mib  # kept
    assert released(STEPSIM_KEEP_FREED_MEMORY="1") < mib
    # Above glibc's largest mmap threshold (32 MiB) too: a 4,096-layer step's arrays are that large,
    # and the kernel zeroed them again at every simulation when they were mapped afresh.
    assert released(MIB="64") >= 63 * mib
    assert released(CALL="1", MIB="64") < mib


def test_pandas_is_imported_by_the_first_dataframe_not_by_import_stepsim():
    import subprocess
    import sys

    code = (
        "import sys, stepsim\n"
        f"r = stepsim.simulate({DDP!r})\n"
        "print('pandas' in sys.modules)\n"
        "ops = r.ops\n"
        "print('pandas' in sys.modules, type(ops).__name__, len(ops) > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "DataFrame", "True"]


def test_simulate_keeps_the_last_simulation_until_the_next_call_and_none_too_large(monkeypatch):
    from stepsim import _api

    first = stepsim.simulate(DDP)
    assert _api._last_simulation is first._sim  # kept, dropped Result or not
    second = stepsim.simulate(DDP)
    assert _api._last_simulation is second._sim  # the first released only after the second was made
    assert first._sim.instructions == second._sim.instructions > 1000
    monkeypatch.setattr(_api, "_KEEP_AT_MOST_INSTRUCTIONS", second._sim.instructions - 1)
    stepsim.simulate(DDP)
    assert _api._last_simulation is None  # above the cap: nothing kept


def test_the_benchs_cpp_call_times_each_call_and_reads_what_simulate_reads():
    """bench/python_simulate_bench.py's denominator: the C++ call, timed per call, in this process;
    a bad file is the same InputError as simulate's (so the bench cannot time a failing call)."""
    from stepsim import _core

    for hold in (True, False):
        times = _core.time_simulate_in_cpp(str(ROOT / DDP), 3, hold)
        assert len(times) == 3 and all(t > 0 for t in times)
    with pytest.raises(stepsim.InputError):
        _core.time_simulate_in_cpp("configs/examples/no-such-experiment.json", 1, True)
    with pytest.raises(ValueError, match="reps 0: expected at least 1"):
        _core.time_simulate_in_cpp(str(ROOT / DDP), 0, True)


def test_an_edited_profile_is_seen_by_the_next_call(cli, tmp_path):
    """The process keeps the profiles it read (docs/commands.md): an edit of the profile or of a
    file it includes is read by the next call, as in a notebook that tunes a profile between calls."""
    for name in ("h100-sxm-8x.json", "h100-sxm-96gb.json"):
        (tmp_path / name).write_text((ROOT / "configs/hardware" / name).read_text())
    exp = json.loads((ROOT / DDP).read_text())
    exp["cluster"]["profile"] = str(tmp_path / "h100-sxm-96gb.json")
    (tmp_path / "exp.json").write_text(json.dumps(exp))
    an_hour_ago = time.time() - 3600
    for name in ("h100-sxm-8x.json", "h100-sxm-96gb.json"):
        os.utime(tmp_path / name, (an_hour_ago, an_hour_ago))
    before = stepsim.simulate(exp).metrics["step_time_ns"]
    assert stepsim.simulate(exp).metrics["step_time_ns"] == before  # the kept profile: the same step

    # The included profile's GEMM efficiency factor in training, halved: every GEMM runs slower.
    base = json.loads((tmp_path / "h100-sxm-8x.json").read_text())
    base["compute"]["gemm_in_training_factor"] /= 2
    (tmp_path / "h100-sxm-8x.json").write_text(json.dumps(base))
    os.utime(tmp_path / "h100-sxm-8x.json", (an_hour_ago + 1, an_hour_ago + 1))
    after = stepsim.simulate(exp).metrics["step_time_ns"]
    assert after > before
    assert after == cli.json("simulate", str(tmp_path / "exp.json"), "--json")["metrics"]["step_time_ns"]


def _same_json(a, b):
    """Equal values of the same Python types, dicts in the same key order (1 == 1.0 would pass ==)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return a == b


def test_metrics_are_what_json_loads_makes_of_the_metrics_json():
    """Result.metrics comes straight from the C++ metrics, not through JSON text: the same dict."""
    from stepsim import _core
    for exp in (DDP, FSDP2, "configs/examples/opt-1.3b-zero3-8xa800.json"):
        sim = _core.simulate(exp, "", [])
        assert _same_json(sim.metrics(), json.loads(sim.metrics_json())), exp
        assert _same_json(stepsim.simulate(exp).metrics, json.loads(sim.metrics_json())), exp


def test_no_leak_report_at_exit(tmp_path):
    # A Result held in __main__ while a lambda of __main__ sits in gc.callbacks outlives the
    # extension's teardown at exit; nanobind reported it as leaked instances, types and functions.
    script = tmp_path / "hold.py"
    script.write_text(
        "import gc, stepsim\n"
        "gc.callbacks.append(lambda *a: None)\n"
        f"r = stepsim.simulate({str(ROOT / DDP)!r})\n"
        "print(r.metrics['step_time_ns'])\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 0
    assert "leaked" not in done.stderr, done.stderr
