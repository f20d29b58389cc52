"""tracekit compare RUN_A RUN_B: step time, kernels matched by name, GPU idle and overlap."""

from __future__ import annotations

import json
import os
import threading

import pandas as pd
import pytest
from conftest import FIXTURES
from helpers.compare import compare_once

from tracekit.cli import run as cli
from tracekit.errors import InputError
from tracekit.query.engine import Engine
from tracekit.runfolder.checksums import reseal
from tracekit.study import compare_runs

PP = "push/pop"


def _run(factory, name, kernels, step_ns):
    """One process, one GPU: two steps of ``step_ns`` (the first a warm-up); ``kernels`` is
    [(name, start, end)] on stream 7."""
    nv = {"range_id": [1, 2], "pid": [100, 100], "tid": [100, 100], "style": [PP, PP],
          "domain": ["tracekit"] * 2, "name": ["step 0 (warmup)", "step 1"],
          "start_ns": [0, step_ns], "end_ns": [step_ns, 2 * step_ns], "duration_ns": [step_ns] * 2}
    k = {"pid": [100] * len(kernels), "device_id": [0] * len(kernels), "stream_id": [7] * len(kernels),
         "name": [n for n, _, _ in kernels], "start_ns": [a for _, a, _ in kernels],
         "end_ns": [b for _, _, b in kernels], "duration_ns": [b - a for _, a, b in kernels]}
    return factory({"nvtx_ranges": nv, "kernels": k, "processes": {"pid": [100], "name": ["p"]}},
                   {"workload": {"name": "w", "samples_per_step": 10, "world_size": 1}}, name=name)


@pytest.fixture
def pair(run_factory):
    a = _run(run_factory, "a", [("gemm", 0, 400), ("relu", 500, 600), ("old", 700, 800),
                                ("gemm", 1000, 1400), ("relu", 1500, 1600), ("same", 1700, 1800)], 1000)
    b = _run(run_factory, "b", [("gemm", 0, 300), ("relu", 400, 600), ("new", 700, 750),
                                ("gemm", 900, 1200), ("relu", 1300, 1500), ("same", 1600, 1702)], 900)
    return a, b


def test_kernels_matched_by_name_golden(pair):
    res = compare_runs(*pair, threshold=0.05)
    k = res["kernels"].set_index("name")
    # per launch: gemm 400 -> 300 ns, relu 100 -> 200 ns; per step (the measured step 1 only)
    assert k.loc["gemm", "status"] == "faster" and k.loc["gemm", "per_launch"] == pytest.approx(-0.25)
    assert (k.loc["gemm", "mean_ns_a"], k.loc["gemm", "mean_ns_b"], k.loc["gemm", "med_ns_b"]) == (400, 300, 300)
    assert (k.loc["gemm", "step_ns_a"], k.loc["gemm", "step_ns_b"], k.loc["gemm", "step_delta_ns"]) == (400, 300, -100)
    assert k.loc["gemm", "window_delta_ns"] == -200 and k.loc["gemm", "window_launches_a"] == 2
    assert k.loc["relu", "status"] == "slower" and k.loc["relu", "per_launch"] == pytest.approx(1.0)
    assert k.loc["new", "status"] == "new" and k.loc["new", "window_delta_ns"] == 50
    assert pd.isna(k.loc["new", "window_total_ns_a"]) and k.loc["new", "window_launches_b"] == 1
    # "old" ran in A's warm-up step only: 0 launches per measured step
    assert k.loc["old", "status"] == "missing" and k.loc["old", "launches_per_step_a"] == 0
    assert k.loc["same", "status"] == "same"  # +2% is under the 5% threshold
    assert res["kernel_counts"] == {"new": 1, "missing": 1, "slower": 1, "faster": 1,
                                    "more launches": 0, "fewer launches": 0, "same": 1}
    assert list(res["kernels"].name[:2]) == ["gemm", "relu"]  # by |change per step|, then name
    m = res["metrics"].set_index("metric")
    assert m.loc["step_ns", "a"] == 1000 and m.loc["step_ns", "b"] == 900  # measured step only
    assert m.loc["step_ns", "delta"] == -100 and m.loc["step_ns", "relative"] == pytest.approx(-0.1)
    assert m.loc["samples_per_s", "b"] == pytest.approx(10e9 / 900)


@pytest.fixture(scope="module")
def p2p(nsys_run):
    """The two Jacobi exports' run folders, their comparison and the named queries the tests
    check it against (on both runs), once for the module."""
    a = nsys_run("nsys2020.5_2xv100_p2p_nvlink")
    b = nsys_run("nsys2020.5_2xv100_p2p_via_host")
    with Engine([a, b]) as eng:
        named = {q: eng.query(q).to_pandas() for q in ("kernel_summary", "gpu_idle", "gpu_utilization",
                                                       "step_summary", "memcpy_summary")}
    return a, b, compare_runs(a, b), named


@pytest.fixture(scope="module")
def nccl_doubled(kineto_run, tmp_path_factory):
    """The NCCL rank's run folder and its copy with every time doubled (run_id 'slow'); read-only."""
    a = kineto_run("kineto_a100_nccl_2ranks_rank0")
    return a, _doubled(a, tmp_path_factory.mktemp("doubled") / "slow")


def test_compare_numbers_are_the_named_queries(p2p):
    """Two real exports of the same Jacobi solver: halo exchange over NVLink (peer copies)
    against staging through the host (PCIe path)."""
    a, b, res, named = p2p
    ks, gi, gu, st = (named[q] for q in ("kernel_summary", "gpu_idle", "gpu_utilization", "step_summary"))
    ra, rb = res["a"], res["b"]
    k = res["kernels"]
    ka = ks[ks.run_id == ra].set_index("name").total_ns
    kb = ks[ks.run_id == rb].set_index("name").total_ns
    assert set(k.name) == set(ka.index) | set(kb.index)
    for row in k.itertuples():
        assert row.window_delta_ns == kb.get(row.name, 0) - ka.get(row.name, 0)
        mean = ks[(ks.run_id == rb) & (ks.name == row.name)].avg_ns
        assert row.mean_ns_b == (mean.iloc[0] if len(mean) else None) or pd.isna(row.mean_ns_b)
    assert set(k.status) <= {"new", "missing", "slower", "faster", "more launches", "fewer launches", "same"}
    m = res["metrics"].set_index("metric")
    gi = gi[gi.scope == "run"]
    assert m.loc["gpu_idle_ns", "a"] == gi[gi.run_id == ra].idle_ns.sum()
    assert m.loc["gpu_idle_ns", "b"] == gi[gi.run_id == rb].idle_ns.sum()
    gu = gu[gu.scope == "run"]
    assert m.loc["gpu_overlap_ns", "b"] == gu[gu.run_id == rb].overlap_ns.sum()
    assert m.loc["gpu_copy_busy_ns", "b"] > m.loc["gpu_copy_busy_ns", "a"]  # host staging copies
    # no step ranges in these exports: steps are the Jacobi iterations detected in the kernel
    # sequence, as step_summary reports them
    assert set(st.step_source) == {"detected"}
    assert m.loc["step_ns", "a"] == st[st.run_id == ra].wall_ns.mean()
    assert m.loc["gpu_busy_run_ns", "b"] == gu[gu.run_id == rb].busy_ns.sum()


def test_cli_compare(pair, tmp_path, capsys, monkeypatch):
    a, b = pair
    runs = compare_once(monkeypatch)  # one comparison, written in every format
    assert cli(["compare", str(a), str(b)]) == 0
    cap = capsys.readouterr()
    assert "kernels 1 new, 1 missing, 1 slower, 1 faster, 1 same (threshold" in cap.err and "gemm" in cap.out
    out = tmp_path / "k.json"
    assert cli(["compare", str(a), str(b), "-f", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())  # one file: metrics and kernels (issue 27)
    assert {r["name"]: r["status"] for r in doc["kernels"]}["old"] == "missing"
    assert {r["metric"]: r["b"] for r in doc["metrics"]}["step_ns"] == 900
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["k.json"]
    fifo = tmp_path / "fifo1"  # a FIFO target: written through, no fifo1.metrics beside it
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert cli(["compare", str(a), str(b), "-f", "csv", "-o", str(fifo)]) == 0
    reader.join(10)
    assert got and got[0].startswith(b'"section","name"')
    assert not (tmp_path / "fifo1.metrics").exists()
    pq_out = tmp_path / "k.parquet"
    assert cli(["compare", str(a), str(b), "-f", "parquet", "-o", str(pq_out)]) == 0
    import pyarrow.parquet as pq

    assert set(pq.read_table(pq_out).column("section").to_pylist()) == {"metric", "kernel", "loss"}
    assert not (tmp_path / "k.metrics.parquet").exists()
    twin = tmp_path / "twin"  # another folder with the same run_id: ambiguous
    import shutil

    shutil.copytree(a, twin)
    assert cli(["compare", str(a), str(twin)]) == 2
    assert "compare two different runs" in capsys.readouterr().err
    assert cli(["compare", str(a), str(a)]) == 0  # the same folder twice: zero deltas
    assert cli(["compare", str(a), str(tmp_path / "nope")]) == 2
    assert runs["calls"] == 2  # a-b and a-a; the refused pairs are refused each time
    with pytest.raises(InputError):
        compare_runs(a, b, threshold=-1)


def _doubled(run, dst):
    """A copy of run folder ``run`` with every *_ns column (times and durations) doubled: every
    duration doubles, every step takes twice as long."""
    import shutil

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    shutil.copytree(run, dst)
    for p in dst.glob("*.parquet"):
        t = pq.read_table(p)
        cols = [pc.multiply(c, pa.scalar(2, c.type)) if n.endswith("_ns") and pa.types.is_integer(c.type)
                else c for n, c in zip(t.column_names, t.columns)]
        pq.write_table(pa.table(cols, names=t.column_names), p)
    reseal(dst)  # edited on purpose: new checksums
    m = json.loads((dst / "manifest.json").read_text())
    m["run_id"] = dst.name
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst


@pytest.mark.slow
def test_fail_if_slower_gate(nccl_doubled, capsys, monkeypatch):
    # ProfilerStep#4-#6 of the NCCL rank: 222442191, 219726905, 224936243 ns -> mean 222368446.3;
    # doubled: 444736892.7, +100% > 5% -> exit 3
    a, b = nccl_doubled
    runs = compare_once(monkeypatch)  # each pair compared once, gated at every limit
    assert cli(["compare", str(a), str(a), "--fail-if-slower", "5", "-f", "csv"]) == 0
    err = capsys.readouterr().err
    assert ("step_ns (mean step time): a 222.368 ms, b 222.368 ms: b takes the same time; passes "
            "(limit: 5% slower)") in err
    assert cli(["compare", str(a), str(b), "--fail-if-slower", "5", "-f", "csv"]) == 3
    err = capsys.readouterr().err
    assert "a 222.368 ms, b 444.737 ms: b is 100.00% slower; fails: more than 5% slower" in err
    # the other way round B is faster (-50 %): passes, and says so with the sign that reads right
    assert cli(["compare", str(b), str(a), "--fail-if-slower", "5", "-f", "csv"]) == 0
    assert "a 444.737 ms, b 222.368 ms: b is 50.00% faster; passes (limit: 5% slower)" in capsys.readouterr().err
    assert cli(["compare", str(a), str(b), "--fail-if-slower", "150", "-f", "csv"]) == 0
    assert cli(["compare", str(a), str(b), "--fail-if-slower", "-1", "-f", "csv"]) == 2
    assert runs["calls"] == 3  # a-a, a-b, b-a


def test_gate_without_steps_uses_gpu_busy_time():
    from tracekit.study.gate import gate

    m = pd.DataFrame([{"metric": "step_ns", "a": None, "b": None},
                      {"metric": "gpu_busy_run_ns", "a": 1000.0, "b": 1049.0}])
    g = gate(m, 5)
    assert (g.metric, g.slower, round(g.change_pct, 6)) == ("gpu_busy_run_ns", False, 4.9)
    assert gate(m.assign(b=[None, 1051.0]), 5).slower
    with pytest.raises(InputError, match="do not both have steps or GPU busy time"):
        gate(m.assign(a=[None, None]), 5)


def test_memcpy_per_kind_nvlink_against_host_staged(p2p):
    # the same Jacobi solver: halo exchange by 4004 PtoP copies of 65536 B over NVLink, or staged
    # through the host (4004 more DtoH + 4004 HtoD of 65536 B): memcpy_summary's rows per kind
    a, b, res, named = p2p
    m = res["metrics"].set_index("metric")
    assert (m.loc["memcpy_PtoP_bytes", "a"], m.loc["memcpy_PtoP_bytes", "b"]) == (262406144, 0)
    assert (m.loc["memcpy_HtoD_bytes", "a"], m.loc["memcpy_HtoD_bytes", "b"]) == (0, 262406144)
    assert m.loc["memcpy_DtoH_bytes", "delta"] == 262406144  # 4004 x 65536
    assert (m.loc["memcpy_PtoP_ns", "a"], m.loc["memcpy_HtoD_ns", "b"]) == (16018963, 33953128)
    ms = named["memcpy_summary"]
    assert m.loc["memcpy_DtoH_ns", "b"] == ms[(ms.run_id == b.name) & (ms.kind == "DtoH")].total_ns.sum()


def test_compare_refuses_runs_of_different_kinds_and_is_quiet(nccl_doubled, tmp_path, capsys, monkeypatch):
    """An ncu pass against a timeline pass is refused (issue 28); -q silences the summary; the
    metric table reads down each column in one unit."""
    from tracekit.convert import convert

    ncu = convert([FIXTURES / "ncu" / "ncu2022.3_rtx2080ti_two_kernels.raw.csv"], tmp_path / "ncu")
    a, b = nccl_doubled
    assert cli(["compare", str(a), str(ncu)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a timeline pass" in err[0] and "an ncu pass" in err[0]
    monkeypatch.setenv("COLUMNS", "100")
    assert cli(["compare", str(a), str(b), "-q", "--top", "1"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    rows = [ln.split() for ln in out.split("\n\n")[0].splitlines()[3:] if ln.endswith("%") or " ms" in ln]
    units = {r[0]: r[2] for r in rows if r[0] in ("step", "gpu_busy", "gpu_wall", "nccl") and len(r) > 2}
    assert len(units) == 4 and set(units.values()) == {"ms"}, units
    # issue 36 item 8: no unit in a name beside a value in another unit; sums over GPUs say so
    assert not [r for r in rows if r[0].endswith(("_ns", "_bytes"))] and "nccl_nccl" not in out
    assert "totals over each run's window, summed over its GPUs (a 1, b 1)" in " ".join(out.split())
    assert "share_pct" not in out and "share %" in out


_IDS = ("correlation_id", "range_id", "parent_range_id")


def _edit_tables(src, dst, edit):
    """A copy of run folder ``src`` at ``dst`` whose tables are ``edit(name, table)`` (a table, or
    None to keep it), with its manifest's row counts, checksums and run_id brought up to date."""
    import shutil

    import pyarrow.parquet as pq

    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    for p in dst.glob("*.parquet"):
        t = edit(p.stem, pq.read_table(p))
        if t is not None:
            pq.write_table(t, p)
            m["tables"][p.stem]["rows"] = t.num_rows
    m["run_id"] = dst.name
    (dst / "manifest.json").write_text(json.dumps(m))
    reseal(dst)
    return dst


def _repeat_step(run, dst, copies, step=5):
    """Run ``run`` reduced to ``copies`` identical copies of its ``ProfilerStep#<step>``: the host
    rows that start inside the step and the GPU rows those calls launched, shifted by whole
    periods (the step's span, GPU work included, plus 1 ms); ids made unique per copy, copy k
    named ``ProfilerStep#<step + k>``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    nv = pq.read_table(run / "nvtx_ranges.parquet").to_pandas()
    s0, s1 = nv[nv.name == f"ProfilerStep#{step}"][["start_ns", "end_ns"]].iloc[0]
    api = pq.read_table(run / "cuda_api.parquet")
    launched = api.filter(pc.and_(pc.greater_equal(api["start_ns"], s0), pc.less(api["start_ns"], s1)))
    kept = {}

    def keep(name, t):
        if "start_ns" not in t.column_names or name == "devices":
            return t
        if name in ("kernels", "memcpy", "memset", "collectives", "cuda_sync"):
            return t.filter(pc.is_in(t["correlation_id"], value_set=launched["correlation_id"]))
        return t.filter(pc.and_(pc.greater_equal(t["start_ns"], s0), pc.less(t["start_ns"], s1)))

    for p in run.glob("*.parquet"):
        kept[p.stem] = keep(p.stem, pq.read_table(p))
    ends = [pc.max(t["end_ns"]).as_py() for t in kept.values() if "end_ns" in t.column_names and t.num_rows]
    period = max(ends) - s0 + 1_000_000

    def edit(name, t):
        t = kept[name]
        if "start_ns" not in t.column_names:
            return None
        parts = []
        for k in range(copies):
            cols = {}
            for c in t.column_names:
                v = t[c]
                if c in ("start_ns", "end_ns"):
                    v = pc.add(v, pa.scalar(k * period, v.type))
                elif c in _IDS:
                    v = pc.add(v, pa.scalar(k * 10**9, v.type))
                elif c == "name" and name == "nvtx_ranges":
                    v = pc.replace_substring_regex(v, f"^ProfilerStep#{step}$", f"ProfilerStep#{step + k}")
                cols[c] = v
            parts.append(pa.table(cols, schema=t.schema))
        return pa.concat_tables(parts)

    return _edit_tables(run, dst, edit)


def _slow_kernel(run, dst, pattern, factor):
    """Run ``run`` with every kernel whose name contains ``pattern`` taking ``factor`` times as long:
    everything (host and GPU) after each such kernel's end waits for the added time, as in a run
    bound by that kernel, so no two activities of a stream overlap."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    k = pq.read_table(run / "kernels.parquet").to_pandas()
    k = k[k.name.str.contains(pattern, regex=False)].sort_values("end_ns")
    points = k.end_ns.to_numpy()
    added = np.cumsum(np.round((factor - 1) * (k.end_ns - k.start_ns).to_numpy()).astype(np.int64))

    def shift(v):
        x = v.to_numpy(zero_copy_only=False)
        i = np.searchsorted(points, x, side="right")  # points at or before t
        return x + np.where(i > 0, added[np.maximum(i - 1, 0)], 0)

    def edit(name, t):
        if "start_ns" not in t.column_names or not t.num_rows:
            return None
        cols = {c: t[c] for c in t.column_names}
        for c in ("start_ns", "end_ns"):
            if c in cols:
                cols[c] = pa.array(shift(cols[c]), cols[c].type)
        if "duration_ns" in cols:
            cols["duration_ns"] = pa.array(pc.subtract(cols["end_ns"], cols["start_ns"]), t["duration_ns"].type)
        return pa.table(cols, schema=t.schema)

    return _edit_tables(run, dst, edit)


NCHW = "cudnn::ops::nchwToNhwcKernel"


def test_windows_of_different_length_compare_per_launch_and_per_step(kineto_run, tmp_path):
    """Issue 41: one real step (ProfilerStep#5 of the NCCL rank) three times against the same step
    twice: totals over the windows differ by a third, yet no kernel changed."""
    src = kineto_run("kineto_a100_nccl_2ranks_rank0")
    a = _repeat_step(src, tmp_path / "three", 3)
    b = _repeat_step(src, tmp_path / "two", 2)
    res = compare_runs(a, b)
    k = res["kernels"]
    assert len(k) == 70 and set(k.status) == {"same"}, k[k.status != "same"]
    assert (k.per_launch == 0).all() and (k.per_step == 0).all() and (k.step_delta_ns == 0).all()
    assert (k.launches_per_step_a == k.launches_per_step_b).all()
    assert (k.window_launches_a * 2 == k.window_launches_b * 3).all()  # the totals are 3 : 2
    assert (k.window_total_ns_a * 2 == k.window_total_ns_b * 3).all()
    w = res["windows"]
    assert (w["three"]["steps"], w["two"]["steps"]) == (3, 2)
    note = res["window_note"]
    assert note.startswith("the runs cover different windows: a ") and "with 3 steps, b " in note
    assert "with 2 steps" in note
    gemm = k[k.name.str.contains(NCHW, regex=False)].iloc[0]
    assert gemm.launches_per_step_a == 158  # 474 launches in ProfilerStep#4-6, 158 in each


def test_one_kernel_slower_per_launch(kineto_run, tmp_path):
    """Issue 41: the kernels of one name take 1.5x per launch: exactly that kernel is slower,
    +50 % per launch and per step; every other kernel is the same."""
    src = kineto_run("kineto_a100_nccl_2ranks_rank0")
    a = _repeat_step(src, tmp_path / "a", 2)
    b = _slow_kernel(a, tmp_path / "b", NCHW, 1.5)
    res = compare_runs(a, b)
    k = res["kernels"].set_index("name")
    slow = k[k.status == "slower"]
    assert len(slow) == 1 and NCHW in slow.index[0]
    row = slow.iloc[0]
    assert row.per_launch == pytest.approx(0.5, abs=2e-4) and row.per_step == pytest.approx(row.per_launch)
    assert row.launches_per_step_a == row.launches_per_step_b == 158
    assert set(k.status) == {"slower", "same"} and res["window_note"] is None
    assert res["kernels"].name.iloc[0] == slow.index[0]  # the largest change per step comes first
