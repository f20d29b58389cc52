"""Steps from what the trace has (tk_steps in queries/_macros.sql): tracekit's `step N` ranges,
PyTorch's ProfilerStep#N, a user pattern, else iterations detected in the kernel sequence.
Real fixtures for the first three sources and detection; hand-built runs for the edges."""

from __future__ import annotations

import json
import re
import shutil

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES

from tracekit.errors import QueryError
from tracekit.query.engine import Engine
from tracekit.runfolder.checksums import reseal

# Kineto fixtures with ProfilerStep#N user annotations, and the step numbers in the raw JSON
PROFILER_STEPS = {
    "kineto_a100_nccl_2ranks_rank0": [4, 5, 6],
    "kineto_a100_triton": [1],
    "kineto_cpu_only_rank": [1009],
    "kineto_mi250_rocm": [1, 2],
}
WITH_GPU = {"kineto_a100_nccl_2ranks_rank0", "kineto_a100_triton", "kineto_mi250_rocm"}


def _raw_profiler_steps(stem: str) -> list[int]:
    """ProfilerStep#N numbers of the host-side user annotations, read from the raw JSON."""
    import gzip

    with gzip.open(FIXTURES / "kineto" / f"{stem}.json.gz", "rt", encoding="utf-8") as f:
        doc = json.load(f)
    out = []
    for e in doc["traceEvents"]:
        m = re.match(r"^ProfilerStep#(\d+)$", str(e.get("name", "")))
        if m and e.get("cat") == "user_annotation" and e.get("ph") == "X":
            out.append(int(m.group(1)))
    return sorted(out)


def _without_profiler_steps(run, dst):
    """A copy of run folder ``run`` whose nvtx_ranges lack every ProfilerStep range."""
    shutil.copytree(run, dst)
    p = dst / "nvtx_ranges.parquet"
    t = pq.read_table(p)
    t = t.filter(pc.invert(pc.starts_with(t["name"], "ProfilerStep")))
    pq.write_table(t, p)
    man = json.loads((dst / "manifest.json").read_text())
    man["run_id"] = dst.name
    man["tables"]["nvtx_ranges"]["rows"] = t.num_rows
    (dst / "manifest.json").write_text(json.dumps(man))
    reseal(dst)  # edited on purpose: new checksums
    return dst


@pytest.mark.parametrize("stem", sorted(PROFILER_STEPS))
def test_profiler_steps_on_kineto_fixtures(stem, kineto_run):
    assert _raw_profiler_steps(stem) == PROFILER_STEPS[stem]
    with Engine([kineto_run(stem)]) as eng:
        s = eng.query("step_summary").to_pylist()
        assert [r["step"] for r in s] == PROFILER_STEPS[stem]
        assert {r["step_source"] for r in s} == {"profiler"}
        # wall time is the annotation's own duration (host side)
        raw = eng.sql("SELECT end_ns - start_ns AS d FROM nvtx_ranges WHERE name LIKE 'ProfilerStep#%' "
                      "AND domain = 'pytorch.user_annotation' ORDER BY start_ns").column("d").to_pylist()
        assert [r["wall_ns"] for r in s] == raw
        u = [r for r in eng.query("gpu_utilization").to_pylist() if r["scope"] == "step"]
        if stem in WITH_GPU:
            assert sorted(r["step_number"] for r in u) == PROFILER_STEPS[stem]
            assert {r["step_source"] for r in u} == {"profiler"}
        else:
            assert u == []


def test_profiler_step_numbers_and_busy_time_nccl(kineto_run):
    # ProfilerStep#4..#6 of the NCCL rank; the optimizer phase comes from Optimizer.step#SGD.step
    with Engine([kineto_run("kineto_a100_nccl_2ranks_rank0")]) as eng:
        s = eng.query("step_summary").to_pylist()
        opt = eng.sql("SELECT sum(end_ns - start_ns) AS t FROM nvtx_ranges WHERE domain = "
                      "'pytorch.user_annotation' AND name LIKE 'Optimizer.%'").column("t")[0].as_py()
    assert sum(r["optimizer_ns"] for r in s) == opt
    assert all(r["forward_ns"] is None and r["comm_ns"] is None for r in s)  # not marked by PyTorch
    assert [r["rank"] for r in s] == [0, 0, 0]


@pytest.mark.parametrize("stem", sorted(PROFILER_STEPS))
def test_detected_iterations_match_profiler_steps(stem, kineto_run, tmp_path):
    run = _without_profiler_steps(kineto_run(stem), tmp_path / f"nops_{stem}")
    with Engine([run]) as eng:
        s = eng.query("step_summary").to_pylist()
    assert abs(len(s) - len(PROFILER_STEPS[stem])) <= 1
    assert {r["step_source"] for r in s} <= {"detected"}


def test_detected_iterations_nccl_exact(kineto_run, tmp_path):
    # 2679 compute kernels = 3 x 893: the period of the kernel-name sequence; each iteration
    # starts at the periodic kernel after the longest idle gap and lies inside its ProfilerStep's
    # GPU work (the GPU runs ~40 ms behind the host)
    run = _without_profiler_steps(kineto_run("kineto_a100_nccl_2ranks_rank0"), tmp_path / "nops")
    with Engine([run]) as eng:
        s = eng.query("step_summary").to_pylist()
        u = [r for r in eng.query("gpu_utilization").to_pylist() if r["scope"] == "step"]
        per_iter = eng.sql("""
            WITH st AS (SELECT step_number, start_ns, end_ns FROM tk_steps())
            SELECT st.step_number, count(*) AS n FROM st JOIN kernels k
              ON k.start_ns >= st.start_ns AND k.start_ns < st.end_ns
            WHERE NOT tk_is_nccl(k.name) GROUP BY ALL ORDER BY 1""").to_pylist()
    assert [r["step"] for r in s] == [0, 1, 2]
    assert [r["n"] for r in per_iter] == [893, 893, 891]  # 2 kernels precede the first anchor
    assert [r["step_number"] for r in u] == [0, 1, 2]


def _kernels(rows):
    """kernels from (name, start, end) on pid 1, device 0, stream 7."""
    return {"pid": [1] * len(rows), "device_id": [0] * len(rows), "stream_id": [7] * len(rows),
            "correlation_id": list(range(1, len(rows) + 1)),
            "name": [r[0] for r in rows], "start_ns": [r[1] for r in rows],
            "end_ns": [r[2] for r in rows], "duration_ns": [r[2] - r[1] for r in rows]}


def test_detection_by_hand(run_factory):
    # a warm-up kernel w [0,10), then 3 iterations starting at base 100, 215, 330: kernels a b c d
    # at base +0, +15, +30, +45, 10 ns each (idle 5 ns before b, c, d; 90 or 60 ns before a).
    # a, b, c, d each occur 3 times, 4 positions apart: period 4; the iteration starts at `a`
    # (longest median idle before it). Steps end where the next a starts; the last ends at its
    # last kernel's end (d at 375-385).
    rows = [("w", 0, 10)]
    for base in (100, 215, 330):
        rows += [(n, base + 15 * i, base + 15 * i + 10) for i, n in enumerate("abcd")]
    run = run_factory({"kernels": _kernels(rows)})
    with Engine([run]) as eng:
        st = eng.sql("SELECT step, step_number, start_ns, end_ns, step_source FROM tk_steps() "
                     "ORDER BY start_ns").to_pylist()
    assert [(r["step_number"], r["start_ns"], r["end_ns"]) for r in st] == \
        [(0, 100, 215), (1, 215, 330), (2, 330, 385)]
    assert {r["step_source"] for r in st} == {"detected"}
    assert [r["step"] for r in st] == ["iteration 0", "iteration 1", "iteration 2"]


def test_detection_cut_off_last_iteration_is_not_a_step(run_factory):
    # a b c d a b c d a b c d a b: the 4th iteration has 2 of 4 kernels -> 3 steps
    rows = [(n, 100 * i, 100 * i + 10) for i, n in enumerate("abcd" * 3 + "ab")]
    run = run_factory({"kernels": _kernels(rows)})
    with Engine([run]) as eng:
        st = eng.sql("SELECT start_ns, end_ns FROM tk_steps() ORDER BY start_ns").to_pylist()
    # the first idle gap (before a@0) counts 0, the others are 90: a and b tie at a median of 90
    # and the name seen first (a) starts the iterations: [0,400), [400,800), [800,1200); the a at
    # 1200 starts only 2 of 4 kernels
    assert [(r["start_ns"], r["end_ns"]) for r in st] == [(0, 400), (400, 800), (800, 1200)]


def test_no_period_is_one_iteration(run_factory):
    # three different kernels: no name repeats, so the whole active span is one step
    run = run_factory({"kernels": _kernels([("a", 0, 10), ("b", 20, 30), ("c", 40, 55)])})
    with Engine([run]) as eng:
        st = eng.sql("SELECT step_number, start_ns, end_ns FROM tk_steps()").to_pylist()
    assert st == [{"step_number": 0, "start_ns": 0, "end_ns": 55}]


def _ranges(rows, domain=""):
    return {"range_id": list(range(1, len(rows) + 1)), "pid": [1] * len(rows), "tid": [1] * len(rows),
            "style": ["push/pop"] * len(rows), "domain": [domain] * len(rows),
            "name": [r[0] for r in rows], "start_ns": [r[1] for r in rows],
            "end_ns": [r[2] for r in rows], "duration_ns": [r[2] - r[1] for r in rows]}


def test_nsys_emit_nvtx_profiler_steps(run_factory):
    # emit_nvtx appends ", op_id = N" to record_function names; the GPU-side copy is ignored
    nv = _ranges([("ProfilerStep#3, op_id = 17", 0, 100), ("ProfilerStep#4, op_id = 90", 100, 250),
                  ("ProfilerStep#10x", 250, 300)])
    run = run_factory({"nvtx_ranges": nv})
    with Engine([run]) as eng:
        s = eng.query("step_summary").to_pylist()
    assert [(r["step"], r["wall_ns"], r["step_source"]) for r in s] == [(3, 100, "profiler"),
                                                                        (4, 150, "profiler")]


def test_step_pattern(run_factory, monkeypatch):
    nv = _ranges([("train_step 7", 0, 100), ("train_step 8", 100, 180), ("eval", 180, 200)])
    run = run_factory({"nvtx_ranges": nv})
    with Engine([run], step_pattern=r"^train_step (\d+)$") as eng:
        s = eng.query("step_summary").to_pylist()
    assert [(r["step"], r["wall_ns"], r["step_source"]) for r in s] == [(7, 100, "pattern"),
                                                                        (8, 80, "pattern")]
    # no capture group (or not a number): numbered 0, 1, ... in start order; from the environment
    monkeypatch.setenv("TRACEKIT_STEP_PATTERN", "train_step")
    with Engine([run]) as eng:
        assert [r["step"] for r in eng.query("step_summary").to_pylist()] == [0, 1]
    with pytest.raises(QueryError, match="not a valid regular expression"):
        Engine([run], step_pattern="(unclosed")


def test_sources_in_order(run_factory):
    # tracekit's ranges win over ProfilerStep, which wins over the pattern
    both = _ranges([("step 0", 0, 100), ("ProfilerStep#5", 0, 100), ("mystep 9", 0, 100)],
                   domain="tracekit")
    prof = _ranges([("ProfilerStep#5", 0, 100), ("mystep 9", 0, 100)], domain="pytorch.user_annotation")
    a = run_factory({"nvtx_ranges": both}, name="a")
    b = run_factory({"nvtx_ranges": prof}, name="b")
    with Engine([a, b], step_pattern=r"mystep (\d+)") as eng:
        s = {r["run_id"]: (r["step"], r["step_source"]) for r in eng.query("step_summary").to_pylist()}
    assert s == {"a": (0, "tracekit"), "b": (5, "profiler")}


def test_step_pattern_on_the_cli(kineto_run, tmp_path, capsys):
    from tracekit.cli import run as cli

    run = _without_profiler_steps(kineto_run("kineto_mi250_rocm"), tmp_path / "mi")
    assert cli(["query", "step_summary", str(run), "-f", "csv", "--step-pattern", r"^Optimizer\.step#"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and '"pattern"' in lines[1]
    assert cli(["sql", "SELECT 1", str(run), "--step-pattern", "(x"]) == 2
    err = capsys.readouterr().err
    assert "not a valid regular expression" in err and len(err.strip().splitlines()) == 1


def test_nccl_per_step_uses_the_same_steps(kineto_run):
    # the NCCL rank's 15 all-reduce kernels fall 5 per ProfilerStep#4..#6; per-step rows add up
    # to the whole-run row
    with Engine([kineto_run("kineto_a100_nccl_2ranks_rank0")]) as eng:
        whole = {r["collective"]: r for r in eng.query("nccl").to_pylist()}
        per = eng.query("nccl", {"per_step": "true"}).to_pylist()
    ar = [r for r in per if r["collective"] == "AllReduce"]
    assert [(r["step_number"], r["step_source"], r["count"]) for r in ar] == [
        (4, "profiler", 5), (5, "profiler", 5), (6, "profiler", 5)]
    for c, w in whole.items():
        rows = [r for r in per if r["collective"] == c]
        assert sum(r["count"] for r in rows) == w["count"]
        assert sum(r["nccl_ns"] for r in rows) == w["nccl_ns"]
        assert sum(r["exposed_ns"] for r in rows) == w["exposed_ns"]
    assert {r["step_number"] for r in whole.values()} == {None}
