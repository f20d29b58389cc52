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
    """Window of every node: by measured end, then raised so that no dependency (chain order or
    edge) points from a later window to an earlier one (clock disagreements, a kernel that ends
    before its launch call returns). One window when that does not settle."""
    n = g.n
    if n <= size:
        return np.zeros(n, dtype=np.int64)
    w = np.empty(n, dtype=np.int64)
    w[np.argsort(g.end, kind="stable")] = np.arange(n, dtype=np.int64) // size
    span = int(w.max()) + 1
    # chain index x span: a running maximum of w + base never crosses into the next chain
    base = np.cumsum(g.first, dtype=np.int64)
    base -= 1
    base *= span
    src = np.concatenate([g.start_src, g.after_src, g.end_src])
    dst = np.concatenate([g.start_dst, g.after_dst, g.end_dst])
    for _ in range(100):  # in place: three arrays of the graph's size (w, base, before)
        before = w.copy()
        np.maximum.at(w, dst, w[src])
        w += base
        np.maximum.accumulate(w, out=w)
        w -= base
        if np.array_equal(w, before):
            return w
    return np.zeros(n, dtype=np.int64)


def replay(g: Graph, lead=None, d1=None, d2=None, anchor=None, size: int = WINDOW_NODES) -> Schedule:
    """The earliest-start schedule of ``g`` with the given lags and durations (the measured ones
    by default), window by window (:func:`windows`): the nodes of earlier windows are final,
    those of the window are solved and their dependencies re-read until nothing changes.
    Raises RuntimeError if a window does not settle (a dependency cycle)."""
    lead = g.lead if lead is None else lead
    d1 = g.d1 if d1 is None else d1
    d2 = g.d2 if d2 is None else d2
    anchor = g.anchor if anchor is None else anchor
    n = g.n
    w = windows(g, size)
    start = np.full(n, NEG, dtype=np.int64)
    end = np.full(n, NEG, dtype=np.int64)
    R = np.full(n, NEG, dtype=np.int64)
    W = np.full(n, NEG, dtype=np.int64)
    order = np.argsort(w, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(w))])  # window k: order[bounds[k]:bounds[k+1]]
    edges = [_by_window(w, a, b) for a, b in
             ((g.start_src, g.start_dst), (g.after_src, g.after_dst), (g.end_src, g.end_dst))]
    total = 0
    for k in range(len(bounds) - 1):
        idx = order[bounds[k]:bounds[k + 1]]
        if not len(idx):
            continue
        sel = [(src[lo:hi], dst[lo:hi]) for src, dst, eb in edges
               for lo, hi in [(eb[k], eb[k + 1])]]
        total += _settle(g, idx, sel, lead, d1, d2, anchor, start, end, R, W)
    return Schedule(start, end, R, W, total)


def _by_window(w: np.ndarray, src: np.ndarray, dst: np.ndarray):
    """Edges sorted by their destination's window, and each window's slice bounds."""
    o = np.argsort(w[dst], kind="stable")
    src, dst = src[o], dst[o]
    return src, dst, np.searchsorted(w[dst], np.arange(int(w.max()) + 2) if len(w) else [0])


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
