"""What-if on real GPU traces where the GPU, not the host, bounds the step (issue 34): the host
waits the trace shows only as long calls, the floors every prediction respects, and n/a where a
scenario cannot act. Numbers from the shared traces (../shared/fixtures/kineto, README there)."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest
from conftest import FIXTURES
from helpers.whatif_run import tiny_run

from tracekit.cli import run as cli
from tracekit.query import Engine
from tracekit.whatif import load_graph, whatif

REMOVING = ["launch=0", "host=0.5", "kernels:.=0.5", "comm=0.5", "no-straggler"]


@pytest.fixture(scope="module")
def timesformer(kineto_run):
    run = kineto_run("kineto_h100_timesformer_infer")
    with Engine([run]) as e:
        g = load_graph(e)
        rows = {r["scenario"]: r for r in whatif(e, ["baseline", *REMOVING]).to_pylist()}
        cp = e.query("critical_path_summary").to_pylist()
        names = e.query("critical_path_names").to_pylist()  # the same engine's critical path
    return run, g, rows, cp, names


@pytest.fixture(scope="module")
def removing(kineto_run):
    """{stem: whatif rows of baseline and every removing scenario}, once per trace."""
    out = {}
    for stem in ("kineto_a100_nccl_2ranks_rank0", "kineto_mi300_resnet_actckpt_train"):
        with Engine([kineto_run(stem)]) as e:
            out[stem] = whatif(e, ["baseline", *REMOVING]).to_pylist()
    return out


def test_pageable_copy_is_a_wait_for_the_gpu(timesformer):
    """ProfilerStep#6: the cudaMemcpyAsync DtoH [252, 378] ms returns after its copy, queued behind
    the last kernel: one 'pageable copy' wait edge, and the 126 ms are GPU work on the path, not
    launch (before: launch 129.3 ms, 33.8 %)."""
    _, g, rows, cp, _ = timesformer
    assert g.counts["wait:pageable copy"] == 1
    share = {r["category"]: r["share_pct"] for r in cp}
    assert share.get("launch", 0) < 1.0
    assert share.get("kernel", 0) + share.get("stream wait", 0) + share.get("memcpy", 0) > 30.0
    assert rows["baseline"]["predicted_ns"] == rows["baseline"]["measured_ns"] == 382_535_558


def test_faster_kernels_help_the_step_that_waited_for_them(timesformer):
    """kernels:.=0.5 halves 154.856 ms of kernels on the one stream (158.433 ms of GPU work ->
    81.005 ms); the host's 252 ms before the copy stay, so the step loses about the halved
    kernel time: 382.536 - 306.429 = 76.1 ms of 77.4 ms (speedup 1.248; before: 1.000)."""
    _, _, rows, _, _ = timesformer
    r = rows["kernels:.=0.5"]
    assert r["gpu_floor_ns"] == 81_005_440
    assert rows["baseline"]["gpu_floor_ns"] == 158_433_174
    assert 1.24 < r["speedup"] < 1.26
    assert r["saved_ns"] == rows["baseline"]["baseline_ns"] - r["predicted_ns"]


def test_scenario_that_cannot_act_is_n_a_with_its_reason(timesformer, capsys):
    run, _, rows, _, _ = timesformer
    for spec in ("comm=0.5", "no-straggler"):
        assert rows[spec]["predicted_ns"] is None and rows[spec]["speedup"] is None
        assert rows[spec]["note"] == "n/a: the run has no NCCL collectives"
    assert cli(["whatif", str(run), "-s", "kernels:nomatch=0.5", "-s", "kernels:gemm=0.5",
                "-s", "kernels:gemm=0.5+host=0.5", "-f", "csv"]) == 0
    err = capsys.readouterr().err
    assert "kernels:nomatch=0.5: n/a: kernels:nomatch=0.5 matches none of the 446 kernels" in err
    assert err.count("scales 132 kernels") == 1  # once, not once per scenario


def test_balanced_steps_keep_the_gpu_floor(removing):
    """MI300X ProfilerStep#16-17: the GPU's busiest stream runs 15.909 and 15.426 ms of the
    steps' work (15.951, 15.887 ms): host=0.5 and launch=0 cannot go below it (before: 1.87x
    and 1.07x); the host waits 0.02 ms: both sides saturated."""
    rows = [r for r in removing["kineto_mi300_resnet_actckpt_train"]
            if r["scenario"] in ("baseline", "host=0.5", "launch=0")]
    assert len(rows) == 9
    for r in rows:
        if r["step"] in (16, 17):
            assert r["bound"] == "balanced"
            assert 1.0 <= r["speedup"] <= 1.035, r
            assert r["predicted_ns"] >= min(r["gpu_floor_ns"], r["baseline_ns"])
    floors = {r["step"]: r["gpu_floor_ns"] for r in rows if r["scenario"] == "baseline"}
    assert floors == {15: 15_864_902, 16: 15_909_382, 17: 15_426_026}


@pytest.mark.parametrize("stem", ["kineto_a100_nccl_2ranks_rank0", "kineto_mi300_resnet_actckpt_train"])
def test_no_removing_scenario_is_slower_or_below_its_floor(removing, stem):
    rows = removing[stem]
    for r in rows:
        if r["predicted_ns"] is None:
            assert r["note"].startswith("n/a: ")
            continue
        assert r["speedup"] >= 1.0, r
        assert r["predicted_ns"] >= min(r["gpu_floor_ns"], r["baseline_ns"]), r


def test_critical_path_names_the_work(run_factory, timesformer):
    """critical_path_names: host time by the range around it (a record_function range such as
    `extra_work` by its name), GPU time by kernel. The hand-made step: host [0,100) before the
    first launch, launch latency [100,115), K1 [115,515), stream gap [515,520), K2 [520,870),
    the sync's return [870,900), host [900,1000); extra_work [850,1000] holds 30 + 100 ns."""
    run = tiny_run(run_factory, ranges=(("extra_work", 850, 1000),))
    with Engine([run]) as e:
        rows = e.query("critical_path_names").to_pylist()
    got = {(r["side"], r["source"], r["name"]): r["time_ns"] for r in rows}
    assert got[("host", "range", "extra_work")] == 130
    assert got[("gpu", "kernel", "gemm_k1")] == 400
    assert got[("gpu", "kernel", "elementwise_k2")] == 350
    assert got[("host", "api", "cudaLaunchKernel")] == 100
    assert sum(r["time_ns"] for r in rows) == 1000  # fewer than 10 names: all of the step
    # the H100 trace: the 222 ms before the first launch are a Python thread's wait
    top = timesformer[4][0]
    assert (top["side"], top["source"], top["name"]) == ("host", "python_function", "threading.py(359): wait")
    assert 225_000_000 < top["time_ns"] < 227_000_000


def _run_ahead_from_json(stem: str) -> dict:
    """Per ProfilerStep#N of the raw Kineto trace: the end of the last GPU activity (kernel,
    memcpy, memset) whose runtime call (correlation ID, same process) starts inside the step
    range, minus the range's end, 0 when it ended before; times in ns (the JSON's µs x 1000)."""
    doc = json.loads(gzip.open(FIXTURES / "kineto" / f"{stem}.json.gz", "rt").read())
    ns = lambda us: round(us * 1000)  # noqa: E731
    ev = doc["traceEvents"]
    gpu_end: dict = {}
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            c = e["args"]["correlation"]
            gpu_end[c] = max(gpu_end.get(c, 0), ns(e["ts"]) + ns(e["dur"]))
    calls = [(e["pid"], ns(e["ts"]), e["args"]["correlation"]) for e in ev
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})]
    out = {}
    for s in ev:
        if s.get("cat") == "user_annotation" and s["name"].startswith("ProfilerStep#"):
            a, b = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
            ends = [gpu_end[c] for pid, t, c in calls if pid == s["pid"] and a <= t <= b and c in gpu_end]
            out[int(s["name"].split("#")[1])] = max(0, max(ends) - b)
    return out


@pytest.mark.parametrize("stem", ["kineto_mi300_resnet_actckpt_train", "kineto_h100_timesformer_infer"])
def test_run_ahead_and_bound_per_step(kineto_run, stem):
    """run_ahead_ns equals the raw JSON's, per step: the MI300X host ends ProfilerStep#15-17
    32.263, 35.275 and 37.925 ms before the GPU work they launched does (two steps ahead); the
    H100 inference step waits for its GPU work in a pageable copy (0, serial). A step detected
    in the kernels has no host range: no run-ahead, no bound."""
    with Engine([kineto_run(stem)]) as e:
        rows = whatif(e, ["baseline", "host=0.5"]).to_pylist()
    want = _run_ahead_from_json(stem)
    for r in rows:
        assert r["run_ahead_ns"] == want[r["step"]], r
    got = {r["step"]: (r["run_ahead_ns"], r["bound"]) for r in rows if r["scenario"] == "baseline"}
    if stem.startswith("kineto_mi300"):
        assert got == {15: (32_262_934, "host"), 16: (35_274_545, "balanced"), 17: (37_924_507, "balanced")}
    else:
        assert got == {6: (0, "serial")}


def test_detected_steps_have_no_host_side(kineto_run):
    with Engine([kineto_run("kineto_a100_simple_add")]) as e:
        rows = whatif(e, ["baseline"]).to_pylist()
    assert rows and all(r["run_ahead_ns"] is None and r["bound"] is None for r in rows)


def test_launch_queue_depth_from_a_blocked_launch(run_factory, kineto_run):
    """Hand-made: launches at 0, 10, 20, 30 (5 ns each) queue K1-K4 on one stream (K1 starts at
    15, each runs 100 ns); the fifth launch [40, 117] returns 2 ns after K1 ends (the long-call
    wait edge): at its start K2, K3 and K4 were pending, the most the queue ever held, so the
    queue is 3 deep. The MI300X trace: up to 1,847 launches pending (counted from the raw JSON
    too), and its two launches that waited had 1,455 and 1,501 pending: not a full queue."""
    from tracekit.whatif import notes
    from tracekit.whatif.queue import launch_queue

    i64 = pa.int64()
    api = {"start_ns": pa.array([0, 10, 20, 30, 40], i64), "end_ns": pa.array([5, 15, 25, 35, 117], i64),
           "duration_ns": pa.array([5, 5, 5, 5, 77], i64), "pid": pa.array([1] * 5, i64),
           "tid": pa.array([10] * 5, i64), "correlation_id": pa.array([1, 2, 3, 4, 5], i64),
           "name": ["cudaLaunchKernel"] * 5}
    k = {"start_ns": pa.array([15, 115, 215, 315, 415], i64), "end_ns": pa.array([115, 215, 315, 415, 515], i64),
         "duration_ns": pa.array([100] * 5, i64), "device_id": pa.array([0] * 5, pa.int32()),
         "stream_id": pa.array([7] * 5, i64), "correlation_id": pa.array([1, 2, 3, 4, 5], i64),
         "pid": pa.array([1] * 5, i64), "name": [f"k{i}" for i in range(1, 6)]}
    nv = {"start_ns": pa.array([0], i64), "end_ns": pa.array([600], i64), "duration_ns": pa.array([600], i64),
          "range_id": pa.array([1], i64), "pid": pa.array([1], i64), "tid": pa.array([10], i64),
          "domain": ["pytorch.user_annotation"], "name": ["ProfilerStep#0"]}
    run = run_factory({"cuda_api": api, "kernels": k, "nvtx_ranges": nv})
    with Engine([run]) as e:
        g = load_graph(e)
        result = whatif(e, ["baseline"])
    q = launch_queue(g)
    assert (q.calls, q.most, q.waited.tolist(), q.depth) == (5, 3, [3], 3)
    assert "launch queue: 1 launch call blocked on a full queue of 3 pending launches" in " ".join(notes(result))
    assert result.column("run_ahead_ns").to_pylist() == [0]  # K5 ends at 515, before the step's end
    with Engine([kineto_run("kineto_mi300_resnet_actckpt_train")]) as e:
        q = launch_queue(load_graph(e))
    assert (q.calls, q.most, q.waited.tolist(), q.depth) == (2_685, 1_847, [1_455, 1_501], None)


def test_cli_table_shows_bound_and_run_ahead(kineto_run, monkeypatch, capsys):
    """The terminal table shows bound at 80 columns and run_ahead_ns from 100; the run-ahead is a
    stderr line (the values of test_run_ahead_and_bound_per_step, from the raw JSON): MI300X
    steps 15-17 host, balanced, balanced, the host 32.263-37.925 ms ahead; the H100 inference
    step serial and not ahead."""
    mi300 = kineto_run("kineto_mi300_resnet_actckpt_train")
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["whatif", str(mi300), "-s", "host=0.5", "-s", "launch=0"]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert all(len(line) <= 80 for line in lines) and lines[2].split()[-1] == "bound"
    got = [(r.split()[0], r.split()[1], r.split()[-1]) for r in lines[4:]]
    assert got == [(s, step, b) for s in ("host=0.5", "launch=0")
                   for step, b in (("15", "host"), ("16", "balanced"), ("17", "balanced"))]
    assert "the host runs 32.3-37.9 ms ahead of the GPU at a step's end (run_ahead_ns" in cap.err
    monkeypatch.setenv("COLUMNS", "100")
    assert cli(["whatif", str(mi300), "-s", "host=0.5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 100 for line in lines) and lines[2].split()[-2:] == ["run_ahead", "ms"]
    assert [r.split()[-1] for r in lines[4:]] == ["32.263", "35.275", "37.925"]
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["whatif", str(kineto_run("kineto_h100_timesformer_infer")), "-s", "host=0.5"]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert lines[1].split()[-1] == "bound" and lines[3].split()[-1] == "serial" and len(lines) == 4
    assert "the host does not run ahead of the GPU" in cap.err


def _stream_work_from_json(stem: str) -> dict:
    """Per ProfilerStep#N of the raw Kineto trace: {stream: (ns of GPU work, ns of it in NCCL/RCCL
    kernels)} of the GPU activities whose runtime call (correlation ID, same process) starts
    inside the step range."""
    doc = json.loads(gzip.open(FIXTURES / "kineto" / f"{stem}.json.gz", "rt").read())
    ns = lambda us: round(us * 1000)  # noqa: E731
    ev = doc["traceEvents"]
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    calls = {(e["pid"], e["args"]["correlation"]): ns(e["ts"]) for e in ev
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out = {}
    for s in ev:
        if s.get("cat") == "user_annotation" and s["name"].startswith("ProfilerStep#"):
            a, b = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
            per: dict = {}
            for e in gpu:
                t = calls.get((s["pid"], e["args"]["correlation"]))
                if t is not None and a <= t <= b:
                    busy, comm = per.get(e["args"]["stream"], (0, 0))
                    coll = "nccl" in e["name"].lower() or "rccl" in e["name"].lower()
                    per[e["args"]["stream"]] = (busy + ns(e["dur"]), comm + ns(e["dur"]) * coll)
            out[int(s["name"].split("#")[1])] = per
    return out


def test_a_gpu_floor_of_communication_says_so(kineto_run, monkeypatch, capsys):
    """MI300X, one rank of an 8-rank job: the busiest stream of ProfilerStep#15-17 is two RCCL
    kernels a step (15.865, 15.909, 15.426 ms); the compute stream has 7.084, 7.026 and 7.085 ms
    of work (recounted from the raw JSON). A floor that sets a prediction there is 'gpu floor
    (communication)' ('gpu floor (comm)' in the table) and stderr says a one-rank trace cannot
    tell transfer from waiting (before: 'gpu floor', read as a GPU computing all the time)."""
    from tracekit.whatif import floors
    from tracekit.whatif.replay import replay

    stem = "kineto_mi300_resnet_actckpt_train"
    run = kineto_run(stem)
    raw = _stream_work_from_json(stem)
    with Engine([run]) as e:
        g = load_graph(e)
        rows = whatif(e, ["baseline", "host=0.5", "launch=0"]).to_pylist()
    s = replay(g)
    steps = g.steps.column("step").to_pylist()
    top = {n: max(raw[n].values()) for n in steps}
    assert {n: top[n] for n in steps} == {15: (15_864_902, 15_864_902), 16: (15_909_382, 15_909_382),
                                         17: (15_426_026, 15_426_026)}  # all RCCL
    assert floors.gpu_floor(g, s).tolist() == [top[n][0] for n in steps]
    assert floors.floor_comm_share(g, s).tolist() == [1.0, 1.0, 1.0]
    compute = {n: max(b - c for b, c in raw[n].values()) for n in steps}
    assert compute == {15: 7_084_468, 16: 7_026_024, 17: 7_084_865}
    notes = {(r["scenario"], r["step"]): r["note"] for r in rows if r["scenario"] != "baseline"}
    comm = "gpu floor (communication)"
    assert notes == {("host=0.5", 15): comm, ("host=0.5", 16): "no gain", ("host=0.5", 17): comm,
                     ("launch=0", 15): comm, ("launch=0", 16): comm, ("launch=0", 17): comm}
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["whatif", str(run), "-s", "launch=0"]) == 0
    cap = capsys.readouterr()
    assert cap.out.splitlines()[2] == "note gpu floor (comm)"  # the same in every row
    assert ("3 of 3 steps: the busiest stream's work (gpu_floor_ns) is mostly collective kernels, and a "
            "one-rank trace cannot tell their transfer time from waiting for the other ranks") in cap.err
    assert "apart from collectives, the busiest stream has 7.0-7.1 ms of work a step" in cap.err


def test_cli_table_of_detected_steps_has_no_bound(kineto_run, monkeypatch, capsys):
    """A step detected in the kernels has no host range: neither bound nor run-ahead is shown,
    nor a footnote about them (both empty in every row), nor a run-ahead line."""
    monkeypatch.setenv("COLUMNS", "100")
    assert cli(["whatif", str(kineto_run("kineto_a100_simple_add")), "-s", "launch=0"]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert lines[1].split()[-2:] == ["measured", "s"] and "bound" not in cap.out and "ahead" not in cap.err
