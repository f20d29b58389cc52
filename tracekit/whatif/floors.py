"""Floors a prediction respects, and what each step is bound by (docs/whatif.md, "Floors").

A step range is the host's; the GPU work it launched must still run. :func:`gpu_floor` gives,
per step of ``g.steps``, the GPU time that work takes in a schedule: per device, the union of
the GPU work launched from the step's host range (its launch call between the step's start and
end marks) on its busiest stream: work of one stream runs one after the other. (Not the union
of a device's streams: a step's work may overlap the next step's, on the MI300X trace by 3 ms
of its 16 ms, so the union of one step's work is not a bound on the step.) A replay whose step
ends before that work could have run (the host ran ahead and the trace shows no queue that
held it back) is raised to it. Steps detected in the kernel sequence are GPU windows already:
their floor is 0.
"""

from __future__ import annotations

import numpy as np

from tracekit.whatif.graph import CAT, Graph, rank_key
from tracekit.whatif.replay import Schedule


def _launched(g: Graph) -> tuple[np.ndarray, np.ndarray]:
    """(GPU node, its launching host node) for every launch edge into GPU work (not collective
    transfers)."""
    src, dst = np.asarray(g.start_src), np.asarray(g.start_dst)
    cat_d, cat_s = g.cat[dst], g.cat[src]
    keep = (cat_d >= CAT["kernel"]) & (cat_d <= CAT["collective"]) & (cat_s <= CAT["sync"])
    return dst[keep], src[keep]


def _ranged_steps(g: Graph):
    """The rows of ``g.steps`` that are step ranges, by (rank key, start), with the rank keys
    and the measured start and end of each."""
    a = g.steps.column("start_node").to_numpy()
    b = g.steps.column("end_node").to_numpy()
    rows = np.flatnonzero(g.cat[a] == CAT["mark"])
    skey = rank_key(g, a[rows])
    order = np.lexsort((g.start[a[rows]], skey))
    rows, skey = rows[order], skey[order]
    return rows, skey, g.start[a[rows]], g.start[b[rows]]


def in_steps(g: Graph, nodes: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in ``nodes``, row of ``g.steps``) for each of ``nodes`` whose time ``t`` lies in
    a step range of its rank (the last one starting at or before ``t``, if ``t`` is not after
    its end)."""
    rows, skey, s0, s1 = _ranged_steps(g)
    out_n, out_r = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    if not len(rows) or not len(nodes):
        return out_n[0], out_r[0]
    key = rank_key(g, nodes)
    for k in np.unique(skey):
        lo, hi = np.searchsorted(skey, k), np.searchsorted(skey, k, side="right")
        sel = key == k
        if not sel.any():
            continue
        j = np.searchsorted(s0[lo:hi], t[sel], side="right") - 1
        ok = j >= 0
        ok[ok] = t[sel][ok] <= s1[lo:hi][j[ok]]
        out_n.append(np.flatnonzero(sel)[ok])
        out_r.append(rows[lo:hi][j[ok]])
    return np.concatenate(out_n), np.concatenate(out_r)


def step_of_gpu_work(g: Graph) -> tuple[np.ndarray, np.ndarray]:
    """(GPU node, row of ``g.steps``) for the GPU work launched inside a step range (by the
    measured start of its launch call on the step's rank)."""
    gpu, host = _launched(g)
    i, r = in_steps(g, host, g.start[host])
    return gpu[i], r


def run_ahead(g: Graph, work=None) -> np.ndarray:
    """Per row of ``g.steps``: how far ahead of the GPU the host ran at the step's end (ns): the
    measured end of the last GPU work launched in the step's host range minus the step range's
    end, 0 where that work had ended by then; -1 for a step that launched no GPU work and for a
    step detected in the kernel sequence (no host range). ``work``: :func:`step_of_gpu_work`'s
    result (computed when None)."""
    nodes, rows = step_of_gpu_work(g) if work is None else work
    out = np.full(g.steps.num_rows, -1, dtype=np.int64)
    if not len(nodes):
        return out
    last = np.full(g.steps.num_rows, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last, rows, g.end[nodes])
    b = g.steps.column("end_node").to_numpy()
    has = last > np.iinfo(np.int64).min
    out[has] = np.maximum(last[has] - g.start[b[has]], 0)
    return out


def host_waits(g: Graph, s: Schedule) -> np.ndarray:
    """Per row of ``g.steps``: the time (ns) the step's host threads spent in calls waiting for
    GPU work in schedule ``s`` (a sync or wait edge's call, from its start to the awaited end)."""
    out = np.zeros(g.steps.num_rows, dtype=np.int64)
    calls = np.unique(np.asarray(g.end_dst))
    calls = calls[g.cat[calls] <= CAT["sync"]]
    if not len(calls):
        return out
    wait = np.clip(np.minimum(s.W[calls], s.end[calls]) - s.start[calls], 0, None)
    i, r = in_steps(g, calls, g.start[calls])
    np.add.at(out, r, wait[i])
    return out


def gpu_floor(g: Graph, s: Schedule, work=None) -> np.ndarray:
    """Per row of ``g.steps``: the GPU time (ns) of the busiest stream's work launched in the
    step, as long as it runs in schedule ``s`` (``work``: :func:`step_of_gpu_work`'s result,
    computed when None); 0 where the step launched none. Work on one stream runs one after the
    other, so a step of a steady pipeline cannot take less."""
    nodes, rows = step_of_gpu_work(g) if work is None else work
    out = np.zeros(g.steps.num_rows, dtype=np.int64)
    if not len(nodes):
        return out
    grp = rows.astype(np.int64) * (int(g.chain.max()) + 1) + g.chain[nodes]
    u, inv = np.unique(grp, return_inverse=True)
    busy = np.zeros(len(u), dtype=np.int64)
    np.add.at(busy, inv, s.end[nodes] - s.start[nodes])
    np.maximum.at(out, u // (int(g.chain.max()) + 1), busy)
    return out
