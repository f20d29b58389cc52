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


def _stream_busy(g: Graph, s: Schedule, work) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row of ``g.steps``, busy ns, of it in collective kernels ns) per step and stream of the
    GPU work launched in the step, as long as it runs in schedule ``s``."""
    nodes, rows = step_of_gpu_work(g) if work is None else work
    if not len(nodes):
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    n_chain = int(g.chain.max()) + 1
    u, inv = np.unique(rows.astype(np.int64) * n_chain + g.chain[nodes], return_inverse=True)
    dur = s.end[nodes] - s.start[nodes]
    busy, comm = np.zeros(len(u), dtype=np.int64), np.zeros(len(u), dtype=np.int64)
    np.add.at(busy, inv, dur)
    np.add.at(comm, inv, np.where(g.cat[nodes] == CAT["collective"], dur, 0))
    return u // n_chain, busy, comm


def gpu_floor(g: Graph, s: Schedule, work=None) -> np.ndarray:
    """Per row of ``g.steps``: the GPU time (ns) of the busiest stream's work launched in the
    step, as long as it runs in schedule ``s`` (``work``: :func:`step_of_gpu_work`'s result,
    computed when None); 0 where the step launched none. Work on one stream runs one after the
    other, so a step of a steady pipeline cannot take less."""
    out = np.zeros(g.steps.num_rows, dtype=np.int64)
    rows, busy, _ = _stream_busy(g, s, work)
    np.maximum.at(out, rows, busy)
    return out


def floor_comm_share(g: Graph, s: Schedule, work=None) -> np.ndarray:
    """Per row of ``g.steps``: the share (0-1) of :func:`gpu_floor`'s stream time that is
    collective kernels (NCCL/RCCL, category ``collective``); 0 where the step launched no GPU
    work. On a one-rank trace such a kernel's time is transfer and waiting for the other ranks,
    which the trace cannot tell apart (docs/whatif.md, "Floors")."""
    out = np.zeros(g.steps.num_rows, dtype=np.float64)
    rows, busy, comm = _stream_busy(g, s, work)
    if not len(rows):
        return out
    floor = np.zeros(g.steps.num_rows, dtype=np.int64)
    np.maximum.at(floor, rows, busy)
    top = busy == floor[rows]  # the busiest stream (of equals, the most communication)
    np.maximum.at(out, rows[top], comm[top] / np.maximum(busy[top], 1))
    return out


COMM_SHARE = 0.5
"""A GPU floor whose stream time is at least this share collective kernels is communication."""


def comm_floor_line(g: Graph, s: Schedule, work, ranged: np.ndarray) -> list[str]:
    """A stderr line when the busiest stream of some host-ranged steps (``ranged``) is mostly
    collective kernels in schedule ``s`` (:func:`floor_comm_share` >= :data:`COMM_SHARE`),
    with the time of the busiest stream's work that is not communication; none otherwise."""
    comm = ranged & (floor_comm_share(g, s, work) >= COMM_SHARE)
    if not comm.any():
        return []
    rows, busy, coll = _stream_busy(g, s, work)
    other = np.zeros(g.steps.num_rows, dtype=np.int64)
    np.maximum.at(other, rows, busy - coll)
    lo, hi = other[comm].min() / 1e6, other[comm].max() / 1e6
    span = f"{lo:.1f}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}-{hi:.1f}"
    runs = np.unique(g.run[g.steps.column("start_node").to_numpy()[comm]])
    one = all(len(np.unique(g.rank[g.run == r])) == 1 for r in runs)
    why = ("a one-rank trace cannot tell their transfer time from waiting for the other ranks"
           if one else "their time is transfer and waiting for the other ranks")
    return [f"{int(comm.sum())} of {int(ranged.sum())} steps: the busiest stream's work (gpu_floor_ns) is "
            f"mostly collective kernels, and {why}: there bound gpu or balanced and 'gpu floor (communication)' "
            f"mean the GPU communicates or waits, not that it computes; apart from collectives, the "
            f"busiest stream has {span} ms of work a step"]
