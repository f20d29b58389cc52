"""The study's scaling-loss table and the ranked findings of ``tracekit study`` and ``compare``.

For every run with a baseline -- the run of the same workload, precision and per-GPU batch at
the smallest world size present (1 when there is one) -- one row per part of
:data:`tracekit.study.attribution.PARTS`: ``ns`` (per step), ``share`` (ns / delta_ns; empty when delta_ns is 0),
``delta_ns`` (mean step time minus the baseline's, per step: the baseline has the same per-GPU
batch), ``step_ns`` and ``baseline_step_ns``. The parts add up to delta_ns exactly
(:func:`tracekit.study.attribution.attribute`; docs/study.md, "Why scaling loses").
"""

from __future__ import annotations

import shlex

import pandas as pd

from tracekit.errors import InputError
from tracekit.study.attribution import PARTS, attribute, profile

COLUMNS = ["run", "baseline_run", "workload", "world_size", "part", "ns", "share", "delta_ns",
           "step_ns", "baseline_step_ns"]
SOURCES = ["step_summary", "study_step_phases", "study_data_ranges", "stragglers",
           "critical_path (tracekit whatif: no-straggler, comm=0, launch=0, host=0)"]

WORDS = {
    "skew": "ranks waiting for the last arrival at collectives",
    "exposed_comm": "collective transfer time not overlapped by compute",
    "host_launch": "the GPUs waiting on the host (launch calls, Python, host work)",
    "compute_inflation": "the same kernels taking longer than in {base}",
    "data": "the input pipeline (data ranges)",
    "idle": "other idle time on the critical path",
    "residual": "the replay's own error (what the attribution does not explain)",
}
PHASE_WORDS = {"exposed_comm": "time in `comm` ranges or in Gloo collectives while the rank ran no operator "
                               "(waits included)",
               "compute_inflation": "forward, backward and optimizer taking longer than in {base}",
               "idle": "step time in no phase range"}


def evidence(part: str, method: str, run: str, base: str, rank: int | None = None) -> str:
    """The command that shows the evidence of ``part`` (paths shell-quoted)."""
    r, b = shlex.quote(str(run)), shlex.quote(str(base))
    if method == "phases":
        return {"compute_inflation": f"tracekit compare {b} {r}",
                "data": f"tracekit query step_summary {r}"}.get(
                    part, f"tracekit query study_step_phases {r}")
    return {"skew": f"tracekit query stragglers {r}", "exposed_comm": f"tracekit query nccl {r}",
            "host_launch": f"tracekit query launch_overhead {r}",
            "compute_inflation": f"tracekit compare {b} {r}",
            "data": f"tracekit query step_summary {r}",
            "idle": f"tracekit query critical_path_summary {r}",
            "residual": f"tracekit whatif {r} -s baseline"}[part]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _last_rank(path) -> tuple[int, int, int] | None:
    """(rank, collectives it arrived last at, collectives) of the rank most often last, from the
    stragglers query; None without collectives matched across ranks."""
    from tracekit.query import Session

    try:
        with Session([path]) as eng:
            s = eng.query("stragglers").to_pandas()
    except Exception:  # noqa: BLE001 - the evidence is optional (a run without collectives)
        return None
    s = s[s.collectives.fillna(0) > 0]
    if s.empty or s.last_arrivals.fillna(0).max() <= 0:
        return None
    top = s.sort_values(["last_arrivals", "rank"], ascending=[False, True]).iloc[0]
    return int(top["rank"]), int(top.last_arrivals), int(top.collectives)


def grew_most(rows: list[dict]) -> dict | None:
    """The row of the part that grew most (largest positive ns); None when none grew."""
    up = [r for r in rows if r["ns"] > 0]
    return max(up, key=lambda r: r["ns"]) if up else None


def findings(rows: list[dict], method: str, run_path, base_path, top: int = 3) -> list[dict]:
    """The ``top`` parts that moved the step time most in the direction of delta_ns, in words:
    {run, part, ns, share, text, query}. Parts under 5 % of the difference are left out."""
    if not rows or not rows[0]["delta_ns"]:
        return []
    delta = rows[0]["delta_ns"]
    step = rows[0]["step_ns"]
    sign = 1.0 if delta >= 0 else -1.0
    cand = [r for r in rows if sign * r["ns"] > 0 and abs(r["ns"]) >= 0.05 * abs(delta)]
    cand.sort(key=lambda r: -sign * r["ns"])
    out = []
    base = rows[0]["baseline_run"]
    for r in cand[:top]:
        words = (PHASE_WORDS if method == "phases" else {}).get(r["part"], WORDS[r["part"]])
        words = words.format(base=base)
        lead = ""
        if r["part"] == "skew" and method == "replay":
            lr = _last_rank(run_path)
            if lr is not None and 2 * lr[1] >= lr[2]:
                lead = f"rank {lr[0]} arrived last at {lr[1]} of {lr[2]} collectives; "
            elif lr is not None:
                lead = (f"no rank arrives last at most collectives (rank {lr[0]}, the most often "
                        f"last, at {lr[1]} of {lr[2]}: random lateness); ")
        how = "costs" if r["ns"] > 0 else "saves"
        text = (f"{r['run']}: {lead}{r['part']} ({words}) {how} {_ms(abs(r['ns']))} per step "
                f"({100 * abs(r['share']):.1f} % of the {'loss' if delta >= 0 else 'gain'} of "
                f"{_ms(abs(delta))}, {100 * abs(r['ns']) / step:.1f} % of the step) against "
                f"{base}")
        q = evidence(r["part"], method, run_path, base_path)
        out.append({"run": r["run"], "part": r["part"], "ns": r["ns"], "share": r["share"],
                    "text": text, "query": q})
    return out


def loss_rows(run, base, workload, world_size, parts: dict) -> list[dict]:
    """The table's rows of ``run`` (a :class:`~tracekit.study.attribution.Profile`) against
    ``base`` from :func:`attribute`'s result ``parts``."""
    delta = parts["delta_ns"]
    return [{"run": run.run_id, "baseline_run": base.run_id, "workload": workload,
             "world_size": world_size, "part": p, "ns": float(parts["parts"][p]),
             "share": float(parts["parts"][p]) / delta if delta else None,
             "delta_ns": float(delta), "step_ns": run.measured_ns,
             "baseline_step_ns": base.measured_ns} for p in PARTS]


def pick_baselines(per_run: pd.DataFrame) -> list[tuple[str, str]]:
    """(run_id, baseline run_id) for every run with steps and a known world size above the
    smallest of its workload, precision and per-GPU batch (the baseline: the first run_id at
    that size)."""
    d = per_run[per_run.step_ns.notna() & per_run.world_size.notna()].copy()
    out = []
    keys = ["workload", "precision", "batch_size"]
    for k in keys:
        d[k] = d[k].astype("object").where(d[k].notna(), "")
    for _, g in d.groupby(keys, sort=True):
        w0 = g.world_size.min()
        base = sorted(g[g.world_size == w0].run_id)[0]
        out += [(r, base) for r in sorted(g[g.world_size > w0].run_id)]
    return out


def scaling_loss(per_run: pd.DataFrame, paths: dict, step_pattern: str | None = None):
    """(table, findings, reason) of the study: ``per_run`` is the study's per-run frame
    (run_id, workload, precision, batch_size, world_size, step_ns), ``paths`` run_id -> folder.
    ``reason`` says which runs have no rows and why (None when every one has)."""
    pairs = pick_baselines(per_run)
    rows, found, why = [], [], []
    cache: dict = {}

    def prof(rid):
        if rid not in cache:
            cache[rid] = profile(paths[rid], step_pattern)
        return cache[rid]

    info = per_run.set_index("run_id")
    for rid, bid in pairs:
        try:
            r, b = prof(rid), prof(bid)
            parts = attribute(r, b)
        except InputError as exc:
            why.append(f"{rid}: {exc}")
            continue
        rr = loss_rows(r, b, info.at[rid, "workload"], int(info.at[rid, "world_size"]), parts)
        rows += rr
        found += findings(rr, parts["method"], paths[rid], paths[bid])
    if not pairs:
        why.append("no run has a baseline: scaling loss needs runs of one workload, precision "
                   "and per-GPU batch at two or more world sizes")
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table, found, "; ".join(why) or None
