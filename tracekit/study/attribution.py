"""Why one run is slower than another: its step-time difference split into causes that add up.

:func:`profile` decomposes one run's mean step time (measured steps, every rank) into
components by sequential counterfactual removal on the replay graph (:mod:`tracekit.whatif`),
each removal applied on top of the ones before it (docs/study.md, "Why scaling loses")::

    T0  replay of the measured durations                     (measured - T0: replay error)
    T1  + no-straggler            skew          = T0 - T1
    T2  + comm=0                  exposed_comm  = T1 - T2
    T3  + data ranges' host time 0  data        = T2 - T3
    T4  + launch=0 + host=0       host_launch   = T3 - T4     core = T4

:func:`attribute` sets a run R against its baseline B: each of skew, exposed_comm, data and
host_launch is R's component minus B's; compute_inflation = R's core minus R's core with every
kernel taking B's mean duration of its name (T5); idle = T5 - B's core (what the replay still
explains: stream waits, other kernels, copies); residual = the measured difference minus all of
these = R's replay error minus B's. The parts add up to the measured difference exactly.

Runs without GPU work (no kernels in the graph: CPU runs) are decomposed by their phase ranges
instead (the ``study_step_phases`` query: data, comm, compute and other time per step, exclusive,
adding up to the step; comm includes the Gloo collective time no operator of the rank covers):
exposed_comm, data, compute_inflation and idle are R's minus B's; skew and host_launch are 0
(a rank's wait for a late peer is inside its Gloo wait, exposed_comm); the residual is 0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.errors import InputError
from tracekit.whatif import load_graph, step_times
from tracekit.whatif import replay as _replay
from tracekit.whatif import scenarios as _scenarios
from tracekit.whatif.graph import CAT

PARTS = ("skew", "exposed_comm", "host_launch", "compute_inflation", "data", "idle", "residual")
"""The parts of a step-time difference, in attribution order (the residual last)."""

_CHAIN = (("skew", "no-straggler"), ("exposed_comm", "comm=0"), ("data", None),
          ("host_launch", "launch=0+host=0"))


@dataclass
class Profile:
    """One run's decomposition: ``measured_ns`` (mean step time of its measured steps over every
    rank, as step_summary gives it), ``replayed_ns`` (the replay's, T0), ``comp`` (ns per
    component: skew, exposed_comm, data, host_launch, core; phases: also compute, other),
    ``method`` ('replay' or 'phases'), ``kernel_mean`` (mean kernel duration per name, ns)."""

    run_id: str
    path: str
    method: str
    measured_ns: float
    replayed_ns: float
    steps: int
    comp: dict = field(default_factory=dict)
    kernel_mean: dict = field(default_factory=dict)
    kernel_occ: dict = field(default_factory=dict)  # "[rank\0]name\0n" -> the n-th launch's duration
    _state: tuple | None = None  # (graph, lead, d1, d2, anchor, keep) after the chain


def _data_ranges(eng, g) -> np.ndarray:
    """Per graph node: True for a host node whose start lies in a data range of its process
    (one sorted search over every process's ranges: no loop over ranks)."""
    dr = eng.query("study_data_ranges").to_pandas()
    hit = np.zeros(g.n, dtype=bool)
    if dr.empty:
        return hit
    st = g.steps.to_pandas()[["run_id", "rank", "pid"]].drop_duplicates(["run_id", "rank"])
    run_ix = {r: i for i, r in enumerate(g.run_ids)}
    n_rank = int(max(g.rank.max(), st["rank"].fillna(0).max())) + 1
    # process code of each (run, rank) and of each data range's (run, pid)
    code_of = {(r.run_id, int(r.pid)): run_ix[r.run_id] * n_rank + int(0 if pd.isna(r.rank) else r.rank)
               for r in st.itertuples() if r.run_id in run_ix}
    codes = np.array([code_of.get((a, int(b)), -1) for a, b in zip(dr.run_id, dr.pid)], dtype=np.int64)
    keep = codes >= 0
    if not keep.any():
        return hit
    span = int(max(g.end.max(), (dr.end_ns.max() - g.t0))) + 2
    lo = codes[keep] * span + np.clip(dr.start_ns.to_numpy(np.int64)[keep] - g.t0, -1, None) + 1
    hi = codes[keep] * span + np.clip(dr.end_ns.to_numpy(np.int64)[keep] - g.t0, -1, None) + 1
    o = np.argsort(lo, kind="stable")
    lo, hi = lo[o], np.maximum.accumulate(hi[o])  # ranges of one process never reach the next's
    host = np.flatnonzero(g.cat <= CAT["sync"])
    t = (g.run[host].astype(np.int64) * n_rank + g.rank[host]) * span + g.start[host] + 1
    j = np.searchsorted(lo, t, side="right") - 1
    hit[host[(j >= 0) & (t < hi[np.maximum(j, 0)])]] = True
    return hit


def _mean(g, keep, state) -> float:
    lead, d1, d2, anchor = state
    return float(step_times(g, _replay.replay(g, lead, d1, d2, anchor))[keep].mean())


def profile(path: str | os.PathLike, step_pattern: str | None = None) -> Profile:
    """Decompose the run folder ``path`` (see the module docstring). :class:`InputError` when it
    has no steps."""
    from tracekit.query import Session

    with Session([path], step_pattern=step_pattern) as eng:  # queries with their warnings
        run_id = eng.runs[0].run_id
        g = load_graph(eng.engine)
        if not ((g.cat >= CAT["kernel"]) & (g.cat <= CAT["memset"])).any():  # Gloo ranges aside
            return _phase_profile(eng, run_id, str(path))  # no GPU work: a CPU run
        if g.steps.num_rows == 0:
            raise InputError(f"{path}: no steps to attribute (step_summary finds none)")
        warm = g.steps.column("warmup").to_numpy(zero_copy_only=False).astype(bool)
        keep = ~warm if (~warm).any() else np.ones(len(warm), dtype=bool)
        measured = float(g.steps.column("measured_ns").to_numpy()[keep].mean())
        data_nodes = _data_ranges(eng, g)
    base = _scenarios.apply(g, _scenarios.parse("baseline"))
    t_prev = _mean(g, keep, base)
    p = Profile(run_id, str(path), "replay", measured, t_prev, int(keep.sum()))
    specs: list[str] = []
    data_on = False
    for part, spec in _CHAIN:
        if spec is None:
            data_on = True  # host time inside data ranges: 0 from here on
        else:
            specs.append(spec)
        state = _scenarios.apply(g, _scenarios.parse("+".join(specs) or "baseline"))
        if data_on:
            x = data_nodes & ~g.first & (state[0] > 0)
            state[0][x] = 0
        t = _mean(g, keep, state)
        p.comp[part] = t_prev - t
        t_prev = t
    p.comp["core"] = t_prev
    nodes, names, occ, _ = _kernel_occurrences(g)
    dur = state[1][nodes]  # as in the core replay (no-straggler rescales the straggler's work)
    if len(dur):
        ranks = g.rank[nodes].tolist()
        key = np.array([f"{n}\x00{i}" for n, i in zip(names.tolist(), occ.tolist())], dtype=object)
        rkey = np.array([f"{r}\x00{k}" for r, k in zip(ranks, key.tolist())], dtype=object)
        for table, k in ((p.kernel_mean, names), (p.kernel_occ, key), (p.kernel_occ, rkey)):
            u, inv = np.unique(k, return_inverse=True)
            table.update(zip(u.tolist(), (np.bincount(inv, weights=dur) / np.bincount(inv)).tolist()))
    p._state = (g, *state, keep)
    return p


def _phase_profile(eng, run_id: str, path: str) -> Profile:
    ph = eng.query("study_step_phases", {"include_warmup": "true"}).to_pandas()
    if ph.empty:
        raise InputError(f"{path}: no steps to attribute (step_summary finds none)")
    if (~ph.warmup.astype(bool)).any():
        ph = ph[~ph.warmup.astype(bool)]
    m = {c: float(ph[c].mean()) for c in ("wall_ns", "data_ns", "comm_ns", "compute_ns", "other_ns")}
    p = Profile(run_id, path, "phases", m["wall_ns"], m["wall_ns"], len(ph))
    p.comp = {"skew": 0.0, "exposed_comm": m["comm_ns"], "data": m["data_ns"], "host_launch": 0.0,
              "compute": m["compute_ns"], "other": m["other_ns"], "core": m["compute_ns"] + m["other_ns"]}
    return p


def _kernel_occurrences(g):
    """Kernel nodes of ``g``: (node ids, names, n-th of its name on its rank, duration)."""
    k = np.flatnonzero(g.cat == CAT["kernel"])
    o = np.lexsort((g.start[k], g.name_idx[k], g.rank[k], g.run[k]))
    k = k[o]
    grp = np.stack([g.run[k], g.rank[k], g.name_idx[k]]).T
    new = np.ones(len(k), dtype=bool)
    new[1:] = (grp[1:] != grp[:-1]).any(axis=1)
    idx = np.arange(len(k))
    occ = idx - np.maximum.accumulate(np.where(new, idx, 0))
    names = np.array(g.names, dtype=object)[g.name_idx[k]]
    return k, names, occ, g.d1[k]


def _with_kernels(run: Profile, base: Profile) -> float:
    """R's core replay (T4) with every kernel taking B's duration of the same launch: the n-th
    kernel of a name on rank r takes the duration of B's n-th kernel of that name on rank r,
    else B's mean over its ranks of the n-th, else B's mean of the name; kernels B never ran
    keep theirs (T5)."""
    g, lead, d1, d2, anchor, keep = run._state
    k, names, occ, _ = _kernel_occurrences(g)
    bo, bm = base.kernel_occ, base.kernel_mean
    new = np.array([bo.get(f"{r}\x00{n}\x00{i}", bo.get(f"{n}\x00{i}", bm.get(n, np.nan)))
                    for r, n, i in zip(g.rank[k].tolist(), names.tolist(), occ.tolist())],
                   dtype=np.float64)
    ok = ~np.isnan(new)
    d1 = d1.copy()
    d1[k[ok]] = np.rint(new[ok]).astype(np.int64)
    return _mean(g, keep, (lead, d1, d2, anchor))


def attribute(run: Profile, base: Profile) -> dict:
    """The parts of ``run.measured_ns - base.measured_ns`` (ns each, keys :data:`PARTS`, adding up
    to it), plus ``method``. Both runs are decomposed the same way: by replay when both have GPU
    work, else by phase ranges (a run with kernels against one without: phases for both would
    need the same ranges, so :class:`InputError`)."""
    delta = run.measured_ns - base.measured_ns
    if run.method != base.method:
        raise InputError(f"{run.run_id} and {base.run_id}: one has GPU kernels and the other none; "
                         "their step times cannot be attributed the same way")
    out = {p: 0.0 for p in PARTS}
    for part in ("skew", "exposed_comm", "data", "host_launch"):
        out[part] = run.comp[part] - base.comp[part]
    if run.method == "replay":
        t5 = _with_kernels(run, base)
        out["compute_inflation"] = run.comp["core"] - t5
        out["idle"] = t5 - base.comp["core"]
    else:
        out["compute_inflation"] = run.comp["compute"] - base.comp["compute"]
        out["idle"] = run.comp["other"] - base.comp["other"]
    out["residual"] = delta - sum(out[p] for p in PARTS if p != "residual")
    return {"delta_ns": delta, "method": run.method, "parts": out}
