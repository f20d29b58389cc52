"""The launch queue as the trace shows it (issue 34 item 1; docs/whatif.md, "The launch queue").

A launch call returns once its work is in the queue of launched-but-not-started work; when that
queue is full, the call blocks until the GPU starts earlier work. The trace shows the queue only
through its effect: :func:`launch_queue` counts, per process and device, the GPU work launched
(its launch call started) and not yet started at the start of every launch call, and reads that
count at the launch calls that waited for the GPU (an end edge of tk_wi_wait_edges into a
launch call, other than a copy waiting for its own transfer). Such a call blocked on a full
queue only if the count then is the most the queue ever held (at least 95 % of it): that count
is the queue's depth. A call that waited with fewer pending waited for something else, and
where no call blocked on a full queue the most ever pending is a lower bound on the depth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.whatif.graph import CAT, Graph

FULL = 0.95
"""A launch that waited with at least this share of its queue's most pending blocked on it."""


@dataclass
class Queue:
    """``calls``: launch calls; ``most``: the most launches pending at any launch call's start
    (all queues); ``waited``: the pending count at each launch call that waited for the GPU;
    ``full``: per waiting call, whether the count was its queue's most (>= :data:`FULL`)."""

    calls: int
    most: int
    waited: np.ndarray
    full: np.ndarray

    @property
    def depth(self) -> int | None:
        """The queue's depth, where a launch blocked on a full queue: the median pending count of
        those launches; None when none did."""
        return int(np.median(self.waited[self.full])) if self.full.any() else None


def _pending(launch_t, start_t, key, at_t, at_key) -> np.ndarray:
    """Per query (``at_t``, ``at_key``): the work of the same key launched strictly before
    ``at_t`` and started strictly after it. Linear after sorting, however many keys: times are
    replaced by their ranks among all the times, so (key, rank) is one int64."""
    times, inv = np.unique(np.concatenate([launch_t, start_t, at_t]), return_inverse=True)
    n, m = len(launch_t), len(start_t)
    _, kinv = np.unique(np.concatenate([key, key, at_key]), return_inverse=True)
    span = np.int64(len(times) + 1)
    comb = kinv.astype(np.int64) * span + inv
    lt, st = np.sort(comb[:n]), np.sort(comb[n:n + m])
    kq = kinv[n + m:].astype(np.int64) * span
    q = comb[n + m:]
    out = (np.searchsorted(lt, q, side="left") - np.searchsorted(lt, kq, side="left")) \
        - (np.searchsorted(st, q, side="right") - np.searchsorted(st, kq, side="left"))
    return np.clip(out, 0, None)


def launch_queue(g: Graph) -> Queue:
    """:class:`Queue` of ``g`` from its measured times; a queue per run, rank (process) and
    device."""
    src, dst = np.asarray(g.start_src), np.asarray(g.start_dst)
    keep = (g.cat[dst] >= CAT["kernel"]) & (g.cat[dst] <= CAT["collective"]) & (g.cat[src] == CAT["launch"])
    gpu, host = dst[keep], src[keep]
    none = np.empty(0, np.int64)
    if not len(gpu):
        return Queue(0, 0, none, none.astype(bool))
    dev = np.asarray(g.chain_device)[g.chain[gpu]]
    key = (g.run[gpu].astype(np.int64) << 40) + (g.rank[gpu].astype(np.int64) << 8) + (dev & 0xFF)
    launch_t, start_t = g.start[host], g.start[gpu]
    calls, first = np.unique(host, return_index=True)
    pend = _pending(launch_t, start_t, key, g.start[calls], key[first])
    qkeys, qinv = np.unique(key[first], return_inverse=True)
    most = np.zeros(len(qkeys), dtype=np.int64)  # per queue: the most pending at a launch call
    np.maximum.at(most, qinv, pend)
    # launch calls that waited for GPU work, with the queue of the work each waited for (a
    # copy waiting for its own transfer aside): positions of the edges' sources among ``gpu``
    e_src, e_dst = np.asarray(g.end_src), np.asarray(g.end_dst)
    into = g.cat[e_dst] == CAT["launch"]
    e_src, e_dst = e_src[into], e_dst[into]
    order = np.argsort(gpu, kind="stable")
    at = np.minimum(np.searchsorted(gpu[order], e_src), len(gpu) - 1)
    i = order[at]
    ok = (gpu[i] == e_src) & (host[i] != e_dst)
    d, first_of = np.unique(e_dst[ok], return_index=True)  # one per waiting call
    i = i[ok][first_of]
    if not len(d):
        return Queue(len(calls), int(pend.max()), none, none.astype(bool))
    waited = _pending(launch_t, start_t, key, g.start[d], key[i])
    j = np.minimum(np.searchsorted(qkeys, key[i]), len(qkeys) - 1)
    cap = np.where(qkeys[j] == key[i], most[j], 0)
    return Queue(len(calls), int(pend.max()), waited, (waited >= FULL * cap) & (cap > 0))


def describe(q: Queue) -> str | None:
    """One line saying what the trace shows of the launch queue (None without launch calls)."""
    if not q.calls:
        return None
    if q.depth is not None:
        n = int(q.full.sum())
        return (f"launch queue: {n:,} launch call{'s' if n > 1 else ''} blocked on a full queue of "
                f"{q.depth:,} pending launches (the most it held: the queue's depth)")
    lo, hi = (int(q.waited.min()), int(q.waited.max())) if len(q.waited) else (0, 0)
    other = (f"; {len(q.waited):,} launch call(s) waited for the GPU with {lo:,}"
             f"{f'-{hi:,}' if hi > lo else ''} pending, for something else") if len(q.waited) else ""
    return f"launch queue: none full; up to {q.most:,} launches pending (a lower bound on its depth){other}"
