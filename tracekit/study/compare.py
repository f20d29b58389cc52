"""``tracekit compare RUN_A RUN_B``: what changed from run A to run B.

- step time: mean ``step_summary.wall_ns`` over measured steps (and samples/s), A, B, delta;
- kernels matched by name (``kernel_summary``): new (only in B), missing (only in A), slower,
  faster (total time changed by more than ``threshold``, relative to A) or same;
- GPU idle (``gpu_idle`` scope 'run', summed over GPUs, by cause) and overlap
  (``gpu_utilization`` kernel/copy overlap, ``nccl`` overlap of communication with compute);
- copies per kind (``memcpy_summary``): ``memcpy_KIND_ns`` and ``memcpy_KIND_bytes`` for HtoD, DtoH,
  DtoD, PtoP, ... and memset, 0 for a kind only the other run has.

- why B differs from A (``loss``): B's mean step time minus A's split into skew, exposed_comm,
  host_launch, compute_inflation, data, idle and residual, adding up to it
  (:mod:`tracekit.study.attribution`, as the study's scaling_loss table), and the ranked
  ``findings`` in words with the command that shows each one's evidence.

A run compared with itself (the same folder twice) gives zero deltas.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from tracekit.errors import InputError
from tracekit.query import Engine
from tracekit.runfolder import open_run


def _metric_rows(eng: Engine, a: str, b: str) -> pd.DataFrame:
    rows = []

    def add(metric, unit, query, va, vb):
        va = None if va is None or (isinstance(va, float) and np.isnan(va)) else float(va)
        vb = None if vb is None or (isinstance(vb, float) and np.isnan(vb)) else float(vb)
        d = None if va is None or vb is None else vb - va
        rel = None if d is None or not va else d / va
        rows.append({"metric": metric, "unit": unit, "a": va, "b": vb, "delta": d,
                     "relative": rel, "query": query})

    s = eng.query("step_summary", {"include_warmup": "false"}).to_pandas()
    for col, unit, what in (("wall_ns", "ns", "step_ns"), ("samples_per_s", "value", "samples_per_s"),
                            ("gpu_busy_ns", "ns", "gpu_busy_ns"), ("comm_ns", "ns", "comm_ns")):
        g = s.groupby("run_id")[col].mean() if len(s) else pd.Series(dtype=float)
        if what == "samples_per_s" and len(s):  # global batch / mean step time (harmonic mean)
            g = 1.0 / s.groupby("run_id")[col].apply(lambda x: (1.0 / x).mean())
        add(what, unit, "step_summary", g.get(a), g.get(b))
    gi = eng.query("gpu_idle").to_pandas()
    gi = gi[gi.scope == "run"]
    for col in ("wall_ns", "idle_ns", "idle_host_ns", "idle_sync_ns", "idle_copy_ns", "idle_other_ns"):
        g = gi.groupby("run_id")[col].sum()
        add(f"gpu_{col}", "ns", "gpu_idle", g.get(a), g.get(b))
    g = gi.groupby("run_id").apply(lambda x: x.idle_ns.sum() / x.wall_ns.sum() if x.wall_ns.sum() else np.nan,
                                   include_groups=False) if len(gi) else pd.Series(dtype=float)
    add("gpu_idle_fraction", "fraction", "gpu_idle", g.get(a), g.get(b))
    gu = eng.query("gpu_utilization").to_pandas()
    gu = gu[gu.scope == "run"]
    for col in ("kernel_busy_ns", "copy_busy_ns", "overlap_ns"):
        g = gu.groupby("run_id")[col].sum()
        add(f"gpu_{col}", "ns", "gpu_utilization", g.get(a), g.get(b))
    g = gu.groupby("run_id")["busy_ns"].sum()
    add("gpu_busy_run_ns", "ns", "gpu_utilization", g.get(a), g.get(b))
    mc = eng.query("memcpy_summary").to_pandas()
    for kind in sorted(set(mc.kind)):
        k = mc[mc.kind == kind].groupby("run_id")[["total_ns", "total_bytes"]].sum()
        for col, unit, suffix in (("total_ns", "ns", "ns"), ("total_bytes", "bytes", "bytes")):
            va = k[col].get(a, 0) if a in set(mc.run_id) else None
            vb = k[col].get(b, 0) if b in set(mc.run_id) else None
            add(f"memcpy_{kind}_{suffix}", unit, "memcpy_summary", va, vb)
    # per GPU: the unions over every collective type (repeated on each of the GPU's rows)
    nc = eng.query("nccl").to_pandas().drop_duplicates(["run_id", "pid", "device_id"])
    for col in ("nccl_ns", "overlap_ns", "exposed_ns"):
        g = nc.groupby("run_id")[f"gpu_{col}"].sum()
        add(f"nccl_{col}", "ns", "nccl", g.get(a), g.get(b))
    return pd.DataFrame(rows)


def _kernel_rows(eng: Engine, a: str, b: str, threshold: float) -> pd.DataFrame:
    ks = eng.query("kernel_summary").to_pandas()
    ka = ks[ks.run_id == a][["name", "instances", "total_ns"]]
    kb = ks[ks.run_id == b][["name", "instances", "total_ns"]]
    m = ka.merge(kb, on="name", how="outer", suffixes=("_a", "_b"))
    m["delta_ns"] = m["total_ns_b"].fillna(0) - m["total_ns_a"].fillna(0)
    m["relative"] = m["delta_ns"] / m["total_ns_a"]
    rel = m["relative"]
    m["status"] = np.select(
        [m.total_ns_a.isna(), m.total_ns_b.isna(), rel > threshold, rel < -threshold],
        ["new", "missing", "slower", "faster"], "same")
    for c in ("instances_a", "instances_b"):
        m[c] = m[c].astype("Int64")
    m = m.assign(_abs=m.delta_ns.abs()).sort_values(["_abs", "name"], ascending=[False, True])
    return m.drop(columns="_abs")[["status", "name", "instances_a", "instances_b", "total_ns_a",
                                   "total_ns_b", "delta_ns", "relative"]].reset_index(drop=True)


_KIND_TEXT = {"timeline": "a timeline pass (nsys or PyTorch profiler)",
              "ncu": "an ncu pass (per-kernel counters, no timeline)",
              "empty": "a run with neither a timeline nor ncu results"}


def run_kind(run) -> str:
    """'timeline' (kernels, CUDA API calls or NVTX ranges with rows), 'ncu' (ncu launches only)
    or 'empty', from the manifest's row counts."""
    tables = run.manifest.get("tables", {})

    def rows(name):
        info = tables.get(name) or {}
        n = info.get("rows") if isinstance(info, dict) else None
        return n if isinstance(n, int) else 0
    if any(rows(t) for t in ("kernels", "cuda_api", "nvtx_ranges", "memcpy", "osrt_api")):
        return "timeline"
    return "ncu" if rows("ncu_launches") else "empty"


def compare_runs(run_a: str | os.PathLike, run_b: str | os.PathLike, *,
                 threshold: float = 0.05, step_pattern: str | None = None) -> dict:
    """{"a", "b": run ids, "metrics": DataFrame, "kernels": DataFrame, "kernel_counts": dict}.
    ``step_pattern``: see :class:`tracekit.query.engine.Engine`."""
    if threshold < 0:
        raise InputError(f"--threshold must be at least 0, got {threshold}")
    ra, rb = open_run(run_a), open_run(run_b)
    ka, kb = run_kind(ra), run_kind(rb)
    if ka != kb:  # an ncu pass has no steps, idle time or kernel timeline to set against a trace's
        raise InputError(f"run A ({ra.run_id}) is {_KIND_TEXT[ka]} and run B ({rb.run_id}) "
                         f"{_KIND_TEXT[kb]}: compare needs two runs of the same kind")
    same = ra.path.resolve() == rb.path.resolve()
    if ra.run_id == rb.run_id and not same:
        raise InputError(f"both runs have run_id {ra.run_id!r}: compare two different runs")
    with Engine([ra.path] if same else [ra.path, rb.path], step_pattern=step_pattern) as eng:
        metrics = _metric_rows(eng, ra.run_id, rb.run_id)
        kernels = _kernel_rows(eng, ra.run_id, rb.run_id, threshold)
    counts = {k: int((kernels.status == k).sum()) for k in ("new", "missing", "slower", "faster", "same")}
    loss, found, why = _loss(ra, rb, step_pattern)
    return {"a": ra.run_id, "b": rb.run_id, "metrics": metrics, "kernels": kernels,
            "kernel_counts": counts, "loss": loss, "findings": found, "loss_reason": why}


def _loss(ra, rb, step_pattern):
    """(rows, findings, reason): B's step time minus A's by part (empty, with the reason, when
    the runs have no steps to attribute)."""
    from tracekit.study.attribution import attribute, profile
    from tracekit.study.scaling_loss import findings, loss_rows

    try:
        pa_, pb = profile(ra.path, step_pattern), profile(rb.path, step_pattern)
        parts = attribute(pb, pa_)
    except InputError as exc:
        return [], [], str(exc)
    ws = (rb.manifest.get("workload") or {}).get("world_size")
    wl = (rb.manifest.get("workload") or {}).get("name")
    rows = loss_rows(pb, pa_, wl, ws if isinstance(ws, int) else None, parts)
    return rows, findings(rows, parts["method"], rb.path, ra.path), None
