"""``tracekit compare RUN_A RUN_B``: what changed from run A to run B.

- step time: mean ``step_summary.wall_ns`` over measured steps (and samples/s), A, B, delta;
- kernels matched by name, judged per launch and per step, never by their totals over windows
  that may hold different numbers of steps: per launch the mean and median duration
  (``kernel_summary`` over each run's window), per step the launches and the kernel time per
  measured step of one rank (``study_kernel_steps``, where both runs have steps). ``status``:
  new (only in B), missing (only in A), slower / faster (mean time per launch changed by more
  than ``threshold``, relative to A), else more launches / fewer launches (launches per step
  changed by more than ``threshold``), else same. The totals over each run's window stay as
  ``window_*`` columns; ``window_note`` says when the windows differ in steps or length;
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


def _metric_rows(eng: Engine, a: str, b: str, windows: dict) -> pd.DataFrame:
    """The metric rows; fills ``windows`` (:func:`_windows`) from the same query results."""
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
    windows.update(_windows(gu, s, (a, b)))
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
        add("nccl_ns" if col == "nccl_ns" else f"nccl_{col}", "ns", "nccl", g.get(a), g.get(b))
    return pd.DataFrame(rows)


KERNEL_COLUMNS = ["status", "name", "mean_ns_a", "mean_ns_b", "per_launch", "med_ns_a", "med_ns_b",
                  "launches_per_step_a", "launches_per_step_b", "step_ns_a", "step_ns_b",
                  "step_delta_ns", "per_step", "window_launches_a", "window_launches_b",
                  "window_total_ns_a", "window_total_ns_b", "window_delta_ns"]
STATUSES = ("new", "missing", "slower", "faster", "more launches", "fewer launches", "same")


def _rel(b, a):
    """b / a - 1 (NaN where a is 0 or missing)."""
    return (b / a.where(a != 0)) - 1


def _kernel_rows(eng: Engine, a: str, b: str, threshold: float) -> pd.DataFrame:
    """One row per kernel name of either run (see the module docstring): per launch from
    ``kernel_summary`` over each run's window, per step from ``study_kernel_steps``."""
    ks = eng.query("kernel_summary").to_pandas()
    cols = {"instances": "window_launches", "total_ns": "window_total_ns", "avg_ns": "mean_ns",
            "med_ns": "med_ns"}
    ka = ks[ks.run_id == a][["name", *cols]].rename(columns=cols)
    kb = ks[ks.run_id == b][["name", *cols]].rename(columns=cols)
    m = ka.merge(kb, on="name", how="outer", suffixes=("_a", "_b"))
    st = eng.query("study_kernel_steps").to_pandas() if len(ks) else pd.DataFrame(columns=["run_id"])
    both = {a, b} <= set(st.run_id)  # per step only where both runs have steps
    for run, sfx in ((a, "_a"), (b, "_b")):
        s = st[st.run_id == run][["name", "launches_per_step", "step_ns"]] if both else \
            pd.DataFrame(columns=["name", "launches_per_step", "step_ns"])
        m = m.merge(s.rename(columns={"launches_per_step": f"launches_per_step{sfx}",
                                      "step_ns": f"step_ns{sfx}"}), on="name", how="left")
        if both:  # a kernel of the run with no launch in its steps: 0 per step
            has = m[f"window_launches{sfx}"].notna()
            for c in (f"launches_per_step{sfx}", f"step_ns{sfx}"):
                m[c] = m[c].astype(float).where(~has | m[c].notna(), 0.0)
    for c in ("step_ns_a", "step_ns_b", "launches_per_step_a", "launches_per_step_b"):
        m[c] = m[c].astype(float)
    m["per_launch"] = _rel(m.mean_ns_b, m.mean_ns_a)
    m["step_delta_ns"] = m.step_ns_b.fillna(0) - m.step_ns_a.fillna(0) if both else np.nan
    m["per_step"] = _rel(m.step_ns_b, m.step_ns_a)
    m["window_delta_ns"] = m.window_total_ns_b.fillna(0) - m.window_total_ns_a.fillna(0)
    count = _rel(m.launches_per_step_b, m.launches_per_step_a)
    more = (count > threshold) | ((m.launches_per_step_a == 0) & (m.launches_per_step_b > 0))
    fewer = (count < -threshold) | ((m.launches_per_step_b == 0) & (m.launches_per_step_a > 0))
    pl = m.per_launch
    m["status"] = np.select(
        [m.window_total_ns_a.isna(), m.window_total_ns_b.isna(), pl > threshold, pl < -threshold,
         more, fewer], list(STATUSES[:6]), "same")
    for c in ("window_launches_a", "window_launches_b", "window_total_ns_a", "window_total_ns_b"):
        m[c] = m[c].astype("Int64")
    # what the kernel changes: per step where both runs have steps; else B's launches at B's
    # time per launch minus A's (a kernel only one run has: its total)
    impact = m.step_delta_ns if both else \
        ((m.mean_ns_b - m.mean_ns_a) * m.window_launches_b.astype(float)).fillna(m.window_delta_ns)
    m = m.assign(_abs=impact.abs()).sort_values(["_abs", "name"], ascending=[False, True])
    return m[KERNEL_COLUMNS].reset_index(drop=True)


def _windows(gu: pd.DataFrame, st: pd.DataFrame, runs: tuple[str, str]) -> dict:
    """Per run: the window the kernel totals cover (first GPU activity to the last, over its GPUs:
    ``gpu_utilization`` scope 'run' rows ``gu``), its number of GPUs and of measured steps
    (``step_summary`` rows ``st`` without warm-up, summed over ranks)."""
    out = {}
    for r in runs:
        g = gu[gu.run_id == r]
        span = int((g.window_start_ns + g.wall_ns).max() - g.window_start_ns.min()) if len(g) else None
        out[r] = {"window_ns": span, "gpus": int(len(g)), "steps": int((st.run_id == r).sum())}
    return out


def window_note(windows: dict, a: str, b: str, threshold: float) -> str | None:
    """One line when the runs' windows differ in their number of steps, or in length by more
    than ``threshold`` of A's: the kernel totals over them do not compare."""
    wa, wb = windows[a], windows[b]
    la, lb = wa["window_ns"], wb["window_ns"]
    longer = la and lb and abs(lb - la) > threshold * la
    if wa["steps"] == wb["steps"] and not longer:
        return None

    def one(w):
        span = "no GPU activity" if w["window_ns"] is None else f"{w['window_ns'] / 1e6:,.3f} ms"
        return f"{span} with {w['steps']} step{'' if w['steps'] == 1 else 's'}"
    return (f"the runs cover different windows: a {one(wa)}, b {one(wb)}; kernels are compared "
            f"per launch and per step, and window_* columns are totals over each run's window")


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
        windows: dict = {}
        metrics = _metric_rows(eng, ra.run_id, rb.run_id, windows)
        kernels = _kernel_rows(eng, ra.run_id, rb.run_id, threshold)
    counts = {k: int((kernels.status == k).sum()) for k in STATUSES}
    loss, found, why = _loss(ra, rb, step_pattern)
    return {"a": ra.run_id, "b": rb.run_id, "metrics": metrics, "kernels": kernels,
            "kernel_counts": counts, "windows": windows,
            "window_note": window_note(windows, ra.run_id, rb.run_id, threshold), "loss": loss,
            "findings": found, "loss_reason": why}


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
