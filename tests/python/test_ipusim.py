# SPDX-License-Identifier: Apache-2.0
"""The Python package (src/python/ipusim, docs/python.md), run by CTest as Python.Pytest with
PYTHONPATH=<build>/python. Expected values are derived from the run files, not copied from a
run."""

import os
import re
import sys

import pytest

import ipusim

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TINY = os.path.join(ROOT, "tests", "data", "workloads", "resnet_tiny-pod16.yaml")
POD16 = os.path.join(ROOT, "configs", "systems", "pod16.yaml")


def test_run_returns_stats_with_units_and_the_run_directorys_tables():
    stats = ipusim.run(run=TINY)
    # resnet_tiny-pod16.yaml: 16 replicas x micro-batch 8 x gradient accumulation 2 = 256
    # images a step, so throughput x step time = 256.
    workload = stats["workload"]
    assert workload["samples_per_step"] == {"value": 256.0, "unit": "images"}
    assert workload["throughput"]["unit"] == "images/s"
    step = stats["total"]["time"]["value"]
    assert workload["throughput"]["value"] * step == pytest.approx(256.0, rel=1e-9)
    # layers.csv, tiles.csv, plan.csv and supersteps.csv come along, one tiles row per tile.
    tiles = stats["tiles"]
    pandas = pytest.importorskip("pandas")
    assert isinstance(tiles, pandas.DataFrame)
    assert len(tiles) == 1472
    assert {"layer", "pass"} <= set(stats["layers"].columns)
    assert len(stats["plan"]) > 0 and len(stats["supersteps"]) > 0


def test_set_overrides_reach_the_chip():
    # Half the tiles: the FP16.16 peak of the simulated IPU is 736 tiles x 64 MAC x 2 flop x
    # 1.325 GHz (ipu-hardware.md §1), half of 1,472 tiles'.
    stats = ipusim.run(run=TINY, set={"chip.tiles": 736})
    assert stats["throughput"]["peak_flop_rate_fp16"]["value"] == pytest.approx(
        736 * 64 * 2 * 1.325e9, rel=1e-12)
    assert len(stats["tiles"]) == 736


def test_without_pandas_tables_are_lists_of_dicts(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    stats = ipusim.run(run=TINY)
    assert isinstance(stats["tiles"], list) and len(stats["tiles"]) == 1472
    assert set(stats["tiles"][0]) >= {"tile"}


def test_errors_raise_with_the_file_line_key_and_status(tmp_path):
    with pytest.raises(ipusim.ConfigError) as e:
        ipusim.run(run=TINY, set={"chip.clok": "1GHz"})
    assert e.value.status == 3
    assert (e.value.file, e.value.key) == ("--set", "chip.clok")
    assert "did you mean chip.clock?" in e.value.message

    bad = tmp_path / "bad.yaml"
    text = open(TINY).read().replace("micro_batch: 8", "micro_bach: 8")
    text = text.replace("model: resnet_tiny.yaml", "model: " + os.path.join(
        ROOT, "tests", "data", "workloads", "resnet_tiny.yaml"))
    text = text.replace("system: ../../../configs/systems/pod16.yaml", "system: " + POD16)
    bad.write_text(text)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "micro_bach" in l)
    with pytest.raises(ipusim.ConfigError) as e:
        ipusim.run(run=str(bad))
    assert (e.value.file, e.value.line, e.value.key) == (str(bad), line, "run.micro_bach")

    # Well formed but too big for a 1 KiB tile: the hardware cannot run it (status 4).
    with pytest.raises(ipusim.ModelError) as e:
        ipusim.run(run=TINY, set={"chip.tile_memory": "1KiB"})
    assert e.value.status == 4 and "no tile mapping fits" in e.value.message
    with pytest.raises(ValueError):
        ipusim.run()


def test_a_compiled_trace_runs_as_the_run_config_does(tmp_path):
    trace = ipusim.compile(run=TINY, out=str(tmp_path / "tiny.itb"))
    assert os.path.exists(trace)
    from_trace = ipusim.run(trace=trace, system=POD16)
    in_process = ipusim.run(run=TINY)
    assert from_trace["total"]["cycles"] == in_process["total"]["cycles"]


def test_plan_cache_false_searches_every_plan_with_the_same_results(tmp_path, monkeypatch):
    # A cache of its own (docs/performance.md "A plan cache"), filled by the first call.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    a = ipusim.compile(run=TINY, out=str(tmp_path / "a.itb"))
    assert os.listdir(tmp_path / "cache" / "ipusim" / "plans")
    b = ipusim.compile(run=TINY, out=str(tmp_path / "b.itb"), plan_cache=False)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()
    cached = ipusim.run(run=TINY)
    searched = ipusim.run(run=TINY, plan_cache=False)
    assert cached["total"]["cycles"] == searched["total"]["cycles"]


def test_sweep_runs_every_point_in_its_own_process_and_keeps_failures(capsys):
    rows = ipusim.sweep({"chip.tiles": [736, 1472], "chip.tile_memory": ["1KiB", "624KiB"]},
                        run=TINY)
    pandas = pytest.importorskip("pandas")
    assert isinstance(rows, pandas.DataFrame)
    assert len(rows) == 4
    assert list(rows["chip.tiles"]) == [736, 736, 1472, 1472]
    failed = rows[rows["chip.tile_memory"] == "1KiB"]
    assert failed["error"].str.contains("no tile mapping fits").all()
    ok = rows[rows["chip.tile_memory"] == "624KiB"]
    assert ok["error"].isna().all()
    assert (ok["throughput"] * ok["step_time"]).round(6).tolist() == [256.0, 256.0]
    assert (ok["peak_tile_memory"] <= 624 * 1024).all()
    err = capsys.readouterr().err
    assert "sweep [" in err and "4/4 done" in err
    # One point at a time gives the same rows, in the same order, and prints nothing.
    serial = ipusim.sweep({"chip.tiles": [736, 1472], "chip.tile_memory": ["1KiB", "624KiB"]},
                          run=TINY, jobs=1, progress=False)
    assert serial.fillna(0).equals(rows.fillna(0))
    assert capsys.readouterr().err == ""


def test_compare_explains_two_kept_runs(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ipusim.run(run=TINY, out=a)
    ipusim.run(run=TINY, set={"chip.clock": "1.85GHz"}, out=b)
    diff = ipusim.compare(a, b)
    text = repr(diff)
    assert "chip.clock" in text


def test_the_study_of_docs_python_md_runs(tmp_path, monkeypatch):
    doc = open(os.path.join(ROOT, "docs", "python.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    assert blocks, "docs/python.md has no python block"
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("IPUSIM_STUDY_PLOT", str(tmp_path / "study.png"))
    scope = {}
    exec(compile("\n".join(blocks), "docs/python.md", "exec"), scope)
    grid = scope["grid"]
    # Every point of the 2 x 2 grid ran; configs/runs/resnet50-pod16.yaml: 16 replicas x 20
    # images x 10 micro-batches = 3,200 images a step at each.
    assert len(grid) == 4 and grid["error"].isna().all()
    assert ((grid["throughput"] * grid["step_time"]).round(6) == 3200.0).all()
    if scope.get("plt") is not None:
        assert os.path.getsize(tmp_path / "study.png") > 0


# Issue 55, part 4: a package that fails like Python.

def test_a_trace_named_like_an_option_is_a_file_name():
    # It was passed before its options' end and read as "--set chip.tiles=8".
    with pytest.raises(ipusim.ConfigError) as error:
        ipusim.run(trace="--set=chip.tiles=8")
    assert "--set=chip.tiles=8: cannot open trace" in str(error.value)


def test_none_and_a_string_grid_are_python_errors_before_anything_runs():
    with pytest.raises(TypeError, match=r"set\['chip.name'\]: None is not a value"):
        ipusim.run(run=TINY, set={"chip.name": None})
    # A string is one value, not four points '1', '4', '7', '2'.
    with pytest.raises(TypeError, match=r"grid\['chip.tiles'\]: expected a list of values, "
                                        r"found the str '1472'"):
        ipusim.sweep({"chip.tiles": "1472"}, run=TINY, progress=False)


def test_a_path_that_is_not_utf8_fails_as_an_ipusim_error_and_a_sweep_keeps_its_other_points(
        tmp_path):
    # The message naming the file was not UTF-8: UnicodeDecodeError, and a sweep lost every
    # point. ipusim escapes the bytes; the package decodes what it reads leniently.
    name = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"caf\xe9.trace"))
    with pytest.raises(ipusim.ConfigError) as error:
        ipusim.run(trace=name)
    assert "caf\\xe9.trace: cannot open trace" in str(error.value)
    trace = str(tmp_path / "mm.trace")
    import subprocess
    subprocess.run([ipusim.binary(), "kernel", "matmul", "--m", "16", "--n", "16", "--k", "16",
                    "--out", trace], check=True, capture_output=True)
    # A chip named in Latin-1: that point fails on its own, the other runs.
    rows = ipusim.sweep({"chip.name": ["plain", os.fsdecode(b"caf\xe9")]}, trace=trace,
                        progress=False, jobs=1)
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
    assert rows[0]["error"] is None
    assert rows[0]["step_time"] > 0
    assert "chip.name: expected text without control characters, found \"caf\\xe9\"" in \
        rows[1]["error"]


def test_an_interrupted_sweep_stops_its_points_and_keeps_the_finished_ones(tmp_path):
    # Points that would run for minutes (2e9 syncs each, --full-loops): Ctrl-C (SIGINT to this
    # process) stops the running ones with SIGTERM, starts no other, and raises
    # SweepInterrupted at once with the finished rows (none here).
    import signal
    import subprocess
    import threading
    import time
    trace = str(tmp_path / "long.trace")
    subprocess.run([ipusim.binary(), "kernel", "sync-loop", "--iterations", "2000000000",
                    "--out", trace], check=True, capture_output=True)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(ipusim.SweepInterrupted) as interrupted:
        ipusim.sweep({"chip.clock": ["1GHz", "1.1GHz", "1.2GHz", "1.3GHz", "1.4GHz"]},
                     trace=trace, progress=False, jobs=2, options=["--full-loops"])
    timer.cancel()
    assert time.monotonic() - start < 8
    assert len(interrupted.value.rows) == 0
    # run() stops its child with SIGTERM too: the run directory it was writing into is left
    # without a lock (SIGKILL after 0.25 s left one).
    out = tmp_path / "out"
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        ipusim.run(trace=trace, out=str(out), options=["--full-loops"])
    timer.cancel()
    assert not (out / ".ipusim.lock").exists()
    assert not (out / "stats.json").exists()
