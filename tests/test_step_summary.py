"""Golden tests of the step_summary query on hand-built run folders (expected values by hand)."""

from __future__ import annotations

import pytest

from tracekit.query.engine import Engine

COLS = ("run_id", "rank", "step", "wall_ns", "data_ns", "forward_ns", "backward_ns", "optimizer_ns",
        "comm_ns", "gpu_busy_ns", "samples_per_s", "warmup", "step_source", "pid", "start_ns")


def ranges(rows):
    """nvtx_ranges from (range_id, pid, tid, style, domain, name, start, end)."""
    cols = {k: [] for k in ("range_id", "pid", "tid", "style", "domain", "name", "start_ns",
                            "end_ns", "duration_ns")}
    for rid, pid, tid, style, dom, name, s, e in rows:
        for k, v in zip(("range_id", "pid", "tid", "style", "domain", "name", "start_ns", "end_ns"),
                        (rid, pid, tid, style, dom, name, s, e)):
            cols[k].append(v)
        cols["duration_ns"].append(e - s)
    return cols


def kernels(rows):
    """kernels from (pid, device_id, stream_id, start, end)."""
    return {"pid": [r[0] for r in rows], "device_id": [r[1] for r in rows],
            "stream_id": [r[2] for r in rows], "start_ns": [r[3] for r in rows],
            "end_ns": [r[4] for r in rows], "duration_ns": [r[4] - r[3] for r in rows],
            "name": ["k"] * len(rows)}


PP, SE = "push/pop", "start/end"


@pytest.fixture
def cpu_run(run_factory):
    """One CPU process (pid 100): a warm-up step and a measured step with every phase, three
    overlapping comm ranges on another thread, and look-alike ranges in other domains."""
    nv = ranges([
        (1, 100, 100, PP, "tracekit", "step 0 (warmup)", 1000, 2000),
        (2, 100, 100, PP, "tracekit", "data", 1000, 1100),
        (3, 100, 100, PP, "tracekit", "forward", 1100, 1400),
        (4, 100, 100, PP, "tracekit", "backward", 1400, 1800),
        (5, 100, 100, PP, "tracekit", "optimizer", 1800, 1950),
        (7, 100, 100, PP, "tracekit", "step 1", 2000, 3000),
        (8, 100, 100, PP, "tracekit", "data", 2000, 2050),
        (9, 100, 100, PP, "tracekit", "forward", 2050, 2300),
        (10, 100, 100, PP, "tracekit", "backward", 2300, 2900),
        (11, 100, 100, PP, "tracekit", "optimizer", 2900, 2990),
        # all-reduce buckets: [2400,2600) and [2500,2700) overlap -> 300; [2950,3100) clipped -> 50
        (12, 100, 101, SE, "tracekit", "comm allreduce", 2400, 2600),
        (13, 100, 101, SE, "tracekit", "comm allreduce", 2500, 2700),
        (14, 100, 102, SE, "tracekit", "comm allreduce", 2950, 3100),
        # not tracekit's: other domains, an unrelated name, a range after the last step
        (15, 100, 100, PP, "pytorch.cpu_op", "forward", 2050, 2900),
        (16, 100, 100, PP, "other", "step 5", 2000, 2500),
        (17, 100, 100, PP, "tracekit", "forward pass", 2100, 2200),
        (18, 100, 100, PP, "tracekit", "data", 3500, 3600),
    ])
    return run_factory({"nvtx_ranges": nv},
                       {"workload": {"samples_per_step": 8, "world_size": 1, "ranks": [{"rank": 0, "pid": 100}]}},
                       name="cpu")


@pytest.fixture
def gpu_run(run_factory):
    """Two ranks whose pids map to ranks only through the manifest (pid 200 -> rank 1, 300 -> 0),
    kernels on two GPUs, no comm ranges (so comm_ns is NULL: not annotated)."""
    nv = ranges([
        (1, 200, 200, PP, "tracekit", "step 0", 0, 1000),
        (2, 200, 200, PP, "tracekit", "forward", 0, 400),
        (3, 300, 300, PP, "tracekit", "step 0", 0, 800),
        (4, 300, 300, PP, "tracekit", "step 1", 800, 1600),
        (5, 300, 300, PP, "tracekit", "backward", 900, 1500),
    ])
    k = kernels([
        (200, 0, 7, 100, 300), (200, 0, 8, 200, 400),  # two streams overlap: union [100, 400) = 300
        (200, 0, 7, 900, 1200),  # clipped to the step end: 100
        (200, 1, 7, 500, 600),  # second GPU of the same process: +100
        (300, 0, 7, 0, 1000),  # pid 300: step 0 -> 800, step 1 -> 200
    ])
    return run_factory({"nvtx_ranges": nv, "kernels": k, "processes": {"pid": [200, 300], "name": ["a", "b"]}},
                       {"workload": {"samples_per_step": 16, "world_size": 2,
                                     "ranks": [{"rank": 0, "pid": 300}, {"rank": 1, "pid": 200}]}},
                       name="gpu")


def rows(run_dirs, **params):
    with Engine(run_dirs) as eng:
        t = eng.query("step_summary", {k: str(v) for k, v in params.items()})
    assert tuple(t.column_names) == COLS
    return t.to_pylist()


def test_cpu_run_phases_union_and_warmup(cpu_run):
    out = rows([cpu_run])
    assert [(r["step"], r["warmup"]) for r in out] == [(0, True), (1, False)]
    w, m = out
    assert (w["rank"], w["pid"], w["start_ns"], w["wall_ns"]) == (0, 100, 1000, 1000)
    assert (w["data_ns"], w["forward_ns"], w["backward_ns"], w["optimizer_ns"], w["comm_ns"]) == (100, 300, 400, 150, 0)
    assert (m["data_ns"], m["forward_ns"], m["backward_ns"], m["optimizer_ns"]) == (50, 250, 600, 90)
    assert m["comm_ns"] == 350  # (2700 - 2400) + (3000 - 2950)
    assert w["gpu_busy_ns"] is None and m["gpu_busy_ns"] is None  # no kernels table: not 0
    assert m["samples_per_s"] == pytest.approx(8 / 1000e-9)


def test_exclude_warmup(cpu_run):
    out = rows([cpu_run], include_warmup="false")
    assert [(r["step"], r["data_ns"]) for r in out] == [(1, 50)]


def test_gpu_busy_ranks_from_manifest_and_missing_comm(gpu_run):
    out = rows([gpu_run])
    got = [(r["rank"], r["pid"], r["step"], r["wall_ns"], r["gpu_busy_ns"], r["forward_ns"],
            r["backward_ns"], r["comm_ns"]) for r in out]
    assert got == [
        (0, 300, 0, 800, 800, 0, 0, None),
        (0, 300, 1, 800, 200, 0, 600, None),
        (1, 200, 0, 1000, 500, 400, 0, None),
    ]
    assert out[2]["samples_per_s"] == pytest.approx(16 / 1000e-9)


def test_rank_from_processes_and_zero_busy(run_factory, cpu_run):
    """processes.rank wins over the manifest; kernels captured but none in the step -> 0; no
    manifest batch -> samples_per_s NULL; two runs side by side keep their own numbers."""
    nv = ranges([(1, 400, 400, PP, "tracekit", "step 3", 10, 20), (2, 401, 401, PP, "tracekit", "step 3", 10, 30)])
    run = run_factory({"nvtx_ranges": nv, "kernels": kernels([(400, 0, 1, 50, 60)]),
                       "processes": {"pid": [400, 401], "rank": [3, None]}}, name="kineto_like")
    out = rows([run, cpu_run])
    k = [(r["run_id"], r["rank"], r["pid"], r["gpu_busy_ns"], r["samples_per_s"]) for r in out if r["run_id"] == "kineto_like"]
    assert k == [("kineto_like", 3, 400, 0, None), ("kineto_like", None, 401, 0, None)]
    assert [r["step"] for r in out if r["run_id"] == "cpu"] == [0, 1]


def test_no_steps_no_rows(run_factory):
    run = run_factory({"nvtx_ranges": ranges([(1, 1, 1, PP, "", "forward", 0, 5)])}, name="plain")
    assert rows([run]) == []
