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
    per = max(1, (2**62) // max(big, 1) - 1)  # chains per batch without int64 overflow
    n_seg = int(seg[-1]) + 1
    bounds = np.searchsorted(seg, np.arange(0, n_seg + per, per))
    for a, b in itertools.pairwise(bounds):
        if a >= b:
            continue
        off = (seg[a:b] - seg[a]).astype(np.int64) * big
        x = np.where(finite[a:b], v[a:b], lo) - lo + off
        cm = np.maximum.accumulate(x) - off + lo
        out[a:b] = np.where(cm == lo, NEG, cm)
    return out


def solve_chains(g: Graph, lead, d1, d2, anchor, R, W):
    """Start and end of every node given its dependencies' values ``R`` and ``W`` (chains only)."""
    R = np.maximum(R, anchor)
    A = lead + d1 + d2
    has_r = R > NEG // 2
    m_r = np.where(has_r, R + lead + d1, NEG)
    M = np.maximum(m_r, W)
    M = np.where(M > NEG // 2, M + d2, NEG)
    S = _seg_cumsum(A, g.first)
    cm = _seg_cummax(M - np.where(M > NEG // 2, S, 0), g.first)
    end = np.where(cm > NEG // 2, S + cm, NEG)
    prev = np.empty_like(end)
    prev[1:] = end[:-1]
    prev[g.first] = NEG
    start = np.maximum(prev, R)
    start = np.where(start > NEG // 2, start + lead, NEG)
    return start, end


def replay(g: Graph, lead=None, d1=None, d2=None, anchor=None) -> Schedule:
    """The earliest-start schedule of ``g`` with the given lags and durations (the measured ones
    by default). Raises RuntimeError if it does not settle (a dependency cycle)."""
    lead = g.lead if lead is None else lead
    d1 = g.d1 if d1 is None else d1
    d2 = g.d2 if d2 is None else d2
    anchor = g.anchor if anchor is None else anchor
    n = g.n
    R = np.full(n, NEG, dtype=np.int64)
    W = np.full(n, NEG, dtype=np.int64)
    for passes in range(1, MAX_PASSES + 1):
        start, end = solve_chains(g, lead, d1, d2, anchor, R, W)
        R2 = np.maximum(group_max(start[g.start_src], g.start_dst, n),
                        group_max(end[g.after_src], g.after_dst, n))
        W2 = group_max(end[g.end_src], g.end_dst, n)
        if np.array_equal(R2, R) and np.array_equal(W2, W):
            return Schedule(start, end, R, W, passes)
        R, W = R2, W2
    raise RuntimeError("the replay did not settle: the dependency graph has a cycle")
