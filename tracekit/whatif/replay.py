"""Replay of a dependency graph: the earliest-start schedule with given durations and lags.

Every node i of a chain obeys (docs/whatif.md)::

    start_i = max(end_{i-1}, R_i) + lead_i          R_i = latest start of its start dependencies
    end_i   = max(start_i + d1_i, W_i) + d2_i        W_i = latest end of its end dependencies

Along a chain this is a composition of max-plus affine maps, ``end_i = max(end_{i-1} + A_i,
M_i)``, so a whole chain is solved at once: ``end_i = S_i + max_{j<=i}(M_j - S_j)`` with ``S`` the
chain's running sum of ``A`` -- a cumulative sum and a cumulative maximum over all chains
together (NumPy, no loop over events). Dependencies between chains (launches, syncs,
collectives) are then re-read from the new times and the chains solved again, until no time
changes: each pass settles at least one more cross-chain hop of every path, and every time only
grows, so the fixed point is the earliest schedule.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from tracekit.whatif.graph import NEG, Graph, group_max
from tracekit.whatif.store import chunks

MAX_PASSES = 100_000


@dataclass
class Schedule:
    """Replayed ``start``/``end`` per node (ns relative to the graph's ``t0``), the start
    dependencies' values ``R`` and end dependencies' ``W`` at the fixed point, and ``passes``."""

    start: np.ndarray
    end: np.ndarray
    R: np.ndarray
    W: np.ndarray
    passes: int


def _seg_cumsum(a: np.ndarray, first: np.ndarray) -> np.ndarray:
    cs = np.cumsum(a)
    base = np.maximum.accumulate(np.where(first, np.arange(len(a)), 0))  # index of chain start
    return cs - (cs[base] - a[base])


def _seg_cummax(v: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Running maximum of ``v`` restarting at every ``first``; entries <= NEG/2 count as none."""
    finite = v > NEG // 2
    if not finite.any():
        return np.full_like(v, NEG)
    lo = int(v[finite].min()) - 1
    hi = int(v[finite].max())
    big = hi - lo + 1
    seg = np.cumsum(first) - 1
    out = np.empty_like(v)
    n_seg = int(seg[-1]) + 1
    # chains per batch without int64 overflow; at most all of them, so the batch starts below
    # are small integers (np.arange with a step near 2**62 counts its length in floating point
    # and dropped every batch when all values were equal, leaving ``out`` unwritten)
    per = min(n_seg, max(1, (2**62) // max(big, 1) - 1))
    bounds = np.append(np.searchsorted(seg, np.arange(0, n_seg, per)), len(v))
    for a, b in itertools.pairwise(bounds):
        if a >= b:
            continue
        off = (seg[a:b] - seg[a]).astype(np.int64) * big
        x = np.where(finite[a:b], v[a:b], lo) - lo + off
        cm = np.maximum.accumulate(x) - off + lo
        out[a:b] = np.where(cm == lo, NEG, cm)
    return out


def solve_chains(first, lead, d1, d2, anchor, R, W):
    """Start and end of every node of the chains (``first`` marks each chain's first node)
    given its dependencies' values ``R`` and ``W``."""
    R = np.maximum(R, anchor)
    A = lead + d1 + d2
    has_r = R > NEG // 2
    m_r = np.where(has_r, R + lead + d1, NEG)
    M = np.maximum(m_r, W)
    M = np.where(M > NEG // 2, M + d2, NEG)
    S = _seg_cumsum(A, first)
    cm = _seg_cummax(M - np.where(M > NEG // 2, S, 0), first)
    end = np.where(cm > NEG // 2, S + cm, NEG)
    prev = np.empty_like(end)
    prev[1:] = end[:-1]
    prev[first] = NEG
    start = np.maximum(prev, R)
    start = np.where(start > NEG // 2, start + lead, NEG)
    return start, end


WINDOW_NODES = 2048
"""Nodes per replay window (measured-time order): small windows settle each sync or
collective in a few passes over a few thousand nodes instead of passes over the whole graph."""


def windows(g: Graph, size: int = WINDOW_NODES) -> np.ndarray:
    """Window of every node: by measured end (cut at the ends of every ``size``-th node of a
    regular sample of the nodes, so windows hold about ``size`` nodes; nodes that end at the
    same time share one), then raised so that no dependency (chain order or edge) points from a
    later window to an earlier one (clock disagreements, a kernel that ends before its launch
    call returns). One window when that does not settle. In ``g.store``, a chunk at a time."""
    n = g.n
    if n <= size:
        return np.zeros(n, dtype=np.int64)
    stride = max(1, size // 32)
    cuts = np.sort(np.asarray(g.end[::stride]))[size // stride::size // stride]
    w = g.store.empty(n, np.int64)
    for a, b in chunks(n):
        w[a:b] = np.searchsorted(cuts, g.end[a:b], side="right")
    span = len(cuts) + 1
    edges = ((g.start_src, g.start_dst), (g.after_src, g.after_dst), (g.end_src, g.end_dst))
    for _ in range(100):
        changed = False
        for src, dst in edges:
            for a, b in chunks(len(dst)):
                d = np.asarray(dst[a:b])
                v = w[src[a:b]]
                up = v > w[d]
                if up.any():
                    changed = True
                    np.maximum.at(w, d[up], v[up])
        changed |= _raise_along_chains(w, g.first, span)
        if not changed:
            return w
    return np.zeros(n, dtype=np.int64)


def _raise_along_chains(w: np.ndarray, first: np.ndarray, span: int) -> bool:
    """``w`` made non-decreasing along every chain, in place; True if anything changed. A
    chain's index x ``span`` is added so that a running maximum never crosses into the next
    chain; the running maximum carries over from one chunk to the next."""
    changed = False
    chains_before, carry = -1, None
    for a, b in chunks(len(w)):
        base = np.cumsum(first[a:b], dtype=np.int64)
        base += chains_before
        chains_before = int(base[-1])
        base *= span
        x = w[a:b] + base
        np.maximum.accumulate(x, out=x)
        if carry is not None:
            np.maximum(x, carry, out=x)
        carry = x[-1]
        x -= base
        if not changed and not np.array_equal(x, w[a:b]):
            changed = True
        w[a:b] = x
    return changed


def replay(g: Graph, lead=None, d1=None, d2=None, anchor=None, size: int = WINDOW_NODES) -> Schedule:
    """The earliest-start schedule of ``g`` with the given lags and durations (the measured ones
    by default), window by window (:func:`windows`): the nodes of earlier windows are final,
    those of the window are solved and their dependencies re-read until nothing changes.
    The schedule's arrays are in ``g.store``. Raises RuntimeError if a window does not settle
    (a dependency cycle)."""
    lead = g.lead if lead is None else lead
    d1 = g.d1 if d1 is None else d1
    d2 = g.d2 if d2 is None else d2
    anchor = g.anchor if anchor is None else anchor
    n, store = g.n, g.store
    w = windows(g, size)
    start, end, R, W = (store.full(n, NEG, np.int64) for _ in range(4))
    nw = max(int(w[a:b].max()) for a, b in chunks(n)) + 1 if n else 0
    order, bounds = _by_key(lambda a, b, w=w: w[a:b], n, nw, store)  # window k: order[bounds[k]:bounds[k+1]]
    edges = [_by_window(w, src, dst, nw, store) for src, dst in
             ((g.start_src, g.start_dst), (g.after_src, g.after_dst), (g.end_src, g.end_dst))]
    del w
    total = 0
    for k in range(nw):
        if bounds[k] == bounds[k + 1]:
            continue
        idx = np.asarray(order[bounds[k]:bounds[k + 1]])
        sel = [(np.asarray(src[lo:hi]), np.asarray(dst[lo:hi])) for src, dst, eb in edges
               for lo, hi in [(eb[k], eb[k + 1])]]
        total += _settle(g, idx, sel, lead, d1, d2, anchor, start, end, R, W)
    return Schedule(start, end, R, W, total)


def _by_key(key, m: int, nk: int, store):
    """The positions 0..m-1 ordered by ``key(a, b)`` (the keys of positions a..b-1, in 0..nk-1),
    stable, and each key's slice bounds: a counting sort, a chunk at a time."""
    counts = np.zeros(nk, dtype=np.int64)
    for a, b in chunks(m):
        counts += np.bincount(key(a, b), minlength=nk)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    out = store.empty(m, np.int64)
    cursor = bounds[:-1].copy()
    for a, b in chunks(m):
        k = np.asarray(key(a, b))
        o = np.argsort(k, kind="stable")
        ks = k[o]
        out[cursor[ks] + np.arange(b - a) - np.searchsorted(ks, ks, side="left")] = o + a
        cursor += np.bincount(k, minlength=nk)
    return out, bounds


def _by_window(w: np.ndarray, src: np.ndarray, dst: np.ndarray, nw: int, store):
    """Edges sorted by their destination's window (stable), and each window's slice bounds."""
    o, bounds = _by_key(lambda a, b: w[dst[a:b]], len(dst), nw, store)
    s, d = store.empty(len(o), np.int64), store.empty(len(o), np.int64)
    for a, b in chunks(len(o)):
        oc = o[a:b]
        s[a:b], d[a:b] = src[oc], dst[oc]
    return s, d, bounds


def _settle(g, idx, sel, lead, d1, d2, anchor, start, end, R, W) -> int:
    """Solve the window's nodes ``idx`` (node order) until their dependencies stop changing;
    writes start/end/R/W in place and returns the passes taken."""
    m = len(idx)
    first = g.first[idx].copy()
    first[1:] |= idx[1:] != idx[:-1] + 1
    first[0] = True
    # a chain's first node in the window starts after its predecessor's final end
    pred = np.where(first & ~g.first[idx], idx - 1, -1)
    carry = np.where(pred >= 0, end[np.maximum(pred, 0)], NEG)
    anc = np.maximum(anchor[idx], carry)
    (s_src, s_dst), (a_src, a_dst), (e_src, e_dst) = sel
    # positions in the window (idx is sorted): no array of the whole graph's size per window
    s_dst, a_dst, e_dst = (np.searchsorted(idx, d) for d in (s_dst, a_dst, e_dst))
    r = np.full(m, NEG, dtype=np.int64)
    wv = np.full(m, NEG, dtype=np.int64)
    li, ld1, ld2 = lead[idx], d1[idx], d2[idx]
    for passes in range(1, MAX_PASSES + 1):
        st, en = solve_chains(first, li, ld1, ld2, anc, r, wv)
        start[idx], end[idx] = st, en
        r2 = np.maximum(group_max(start[s_src], s_dst, m), group_max(end[a_src], a_dst, m))
        w2 = group_max(end[e_src], e_dst, m)
        if np.array_equal(r2, r) and np.array_equal(w2, wv):
            R[idx], W[idx] = r, wv
            return passes
        r, wv = r2, w2
    raise RuntimeError("the replay did not settle: the dependency graph has a cycle")
