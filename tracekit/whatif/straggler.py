"""The ``no-straggler`` scenario: every rank's work between collectives as fast as the fastest
rank's, by warping each rank's time line piecewise linearly (docs/whatif.md)."""

from __future__ import annotations

import itertools

import numpy as np

from tracekit.whatif.graph import CAT, NEG, Graph, rank_key
from tracekit.whatif.store import chunks, nonzero


def straggler_warp(g: Graph):
    """Per-rank time warps that make every interval of a rank between two collectives (from its
    previous collective's end, or its first event, to its arrival at the next one) and every
    collective window (arrival to end) as long as the shortest any rank had for the same
    instances. Returns {key: (x, y)}: the breakpoints of each rank's warp, by
    :func:`tracekit.whatif.graph.rank_key`."""
    coll = nonzero(g.n, lambda a, b: (np.asarray(g.instance[a:b]) >= 0)
                   & (np.asarray(g.cat[a:b]) == CAT["collective"]))
    if not len(coll):
        return {}
    ck = rank_key(g, coll)
    order = np.lexsort((g.start[coll], ck))
    coll, ck = coll[order], ck[order]
    new = np.ones(len(coll), dtype=bool)
    new[1:] = ck[1:] != ck[:-1]
    ukeys, first_t = _first_starts(g)
    prev_end = np.empty(len(coll), dtype=np.int64)
    prev_end[1:] = g.end[coll[:-1]]
    prev_end[new] = first_t[np.searchsorted(ukeys, ck[new])]
    inst = g.instance[coll]
    prev_inst = np.empty(len(coll), dtype=np.int64)
    prev_inst[1:] = inst[:-1]
    prev_inst[new] = -1
    gap = g.start[coll] - prev_end
    window = g.end[coll] - g.start[coll]
    pair = (prev_inst + 1) * (int(inst.max()) + 2) + inst
    gap_t = _shortest(pair, gap)
    win_t = _shortest(inst, window)
    warps = {}
    bounds = np.flatnonzero(np.append(new, True))
    for a, b in itertools.pairwise(bounds):
        x = np.empty(2 * (b - a) + 1, dtype=np.float64)
        x[0] = prev_end[a]
        x[1::2] = g.start[coll[a:b]]
        x[2::2] = g.end[coll[a:b]]
        steps = np.empty(2 * (b - a), dtype=np.float64)
        steps[0::2] = gap_t[a:b]
        steps[1::2] = win_t[a:b]
        y = np.concatenate([[x[0]], x[0] + np.cumsum(steps)])
        if np.all(np.diff(x) >= 0):
            warps[int(ck[a])] = (x, y)
    return warps


def _first_starts(g: Graph) -> tuple[np.ndarray, np.ndarray]:
    """Every (run, rank) key of ``g``'s nodes, sorted, and the earliest start of its nodes."""
    keys, firsts = [], []
    for a, b in chunks(g.n):
        k = rank_key(g, slice(a, b))
        u, inv = np.unique(k, return_inverse=True)
        t = np.full(len(u), np.iinfo(np.int64).max)
        np.minimum.at(t, inv, g.start[a:b])
        keys.append(u)
        firsts.append(t)
    k, t = np.concatenate(keys), np.concatenate(firsts)
    u, inv = np.unique(k, return_inverse=True)
    out = np.full(len(u), np.iinfo(np.int64).max)
    np.minimum.at(out, inv, t)
    return u, out


def _shortest(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Per row, the smallest non-negative ``value`` among rows of the same ``group``."""
    u, inv = np.unique(group, return_inverse=True)
    best = np.full(len(u), np.iinfo(np.int64).max)
    np.minimum.at(best, inv, np.where(value >= 0, value, np.iinfo(np.int64).max))
    out = best[inv]
    return np.where(out == np.iinfo(np.int64).max, np.maximum(value, 0), out)


def _warp(x, y, t: np.ndarray) -> np.ndarray:
    """``t`` through the piecewise-linear warp (x -> y), slope 1 outside it."""
    t = t.astype(np.float64)
    out = np.interp(t, x, y)
    out = np.where(t > x[-1], y[-1] + (t - x[-1]), out)
    out = np.where(t < x[0], y[0] - (x[0] - t), out)
    return np.rint(out).astype(np.int64)


def no_straggler(g: Graph, lead, d1, d2, anchor) -> None:
    """Apply :func:`straggler_warp` to the lags and durations of every node but the
    collectives' own (their kernels and transfers follow from the replay), in place."""
    warps = straggler_warp(g)
    for a, b in chunks(g.n):
        cat = np.asarray(g.cat[a:b])
        work = a + np.flatnonzero((cat != CAT["collective"]) & (cat != CAT["transfer"]))
        key = rank_key(g, work)
        order = np.argsort(key, kind="stable")  # each rank's nodes of the chunk, in node order
        work, key = work[order], key[order]
        for k in np.unique(key):
            if int(k) in warps:
                lo, hi = np.searchsorted(key, k, side="left"), np.searchsorted(key, k, side="right")
                _warp_nodes(g, warps[int(k)], work[lo:hi], lead, d1, d2, anchor)


def _warp_nodes(g: Graph, warp, idx: np.ndarray, lead, d1, d2, anchor) -> None:
    """The lags and durations of the nodes ``idx`` (of one rank) through its ``warp``."""
    x, y = warp
    s, e = g.start[idx], g.end[idx]
    ws, we = _warp(x, y, s), _warp(x, y, e)
    lead[idx] = ws - _warp(x, y, s - g.lead[idx])
    d1[idx] = _warp(x, y, s + g.d1[idx]) - ws
    d2[idx] = we - _warp(x, y, e - g.d2[idx])
    a = idx[anchor[idx] > NEG // 2]
    anchor[a] = _warp(x, y, anchor[a])
