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
    instances. Collectives that overlap on a rank (DDP's gradient buckets all-reducing at once
    on Gloo's worker threads, NCCL kernels on several streams) are one window: the instances
    that overlap on any rank form one group (:func:`_groups`), and each rank's window of a
    group runs from its first arrival in it to its last end. Returns {key: (x, y)}: the
    breakpoints of each rank's warp, by :func:`tracekit.whatif.graph.rank_key`; a rank whose
    windows still interleave (groups in another order than on other ranks) has none."""
    coll = nonzero(g.n, lambda a, b: (np.asarray(g.instance[a:b]) >= 0)
                   & (np.asarray(g.cat[a:b]) == CAT["collective"]))
    if not len(coll):
        return {}
    ck, inst, c_start, c_end, host = _groups(g, coll)
    new = np.ones(len(ck), dtype=bool)
    new[1:] = ck[1:] != ck[:-1]
    ukeys, first_t = _first_starts(g)
    prev_end = np.empty(len(ck), dtype=np.int64)
    prev_end[1:] = c_end[:-1]
    prev_end[new] = first_t[np.searchsorted(ukeys, ck[new])]
    prev_inst = np.empty(len(ck), dtype=np.int64)
    prev_inst[1:] = inst[:-1]
    prev_inst[new] = -1
    gap = c_start - prev_end
    window = c_end - c_start
    pair = (prev_inst + 1) * (int(inst.max()) + 2) + inst
    gap_t = _shortest(pair, gap)
    win_t = np.where(host, window, _shortest(inst, window))
    warps = {}
    bounds = np.flatnonzero(np.append(new, True))
    for a, b in itertools.pairwise(bounds):
        x = np.empty(2 * (b - a) + 1, dtype=np.float64)
        x[0] = prev_end[a]
        x[1::2] = c_start[a:b]
        x[2::2] = c_end[a:b]
        steps = np.empty(2 * (b - a), dtype=np.float64)
        steps[0::2] = gap_t[a:b]
        steps[1::2] = win_t[a:b]
        y = np.concatenate([[x[0]], x[0] + np.cumsum(steps)])
        if np.all(np.diff(x) >= 0):
            warps[int(ck[a])] = (x, y)
    return warps


def _groups(g: Graph, coll: np.ndarray):
    """The collective windows of every rank: (rank key, group, start, end), one row per rank
    and group, ordered by rank and start. A group is a set of instances linked by overlapping
    on some rank (its smallest instance number names it); one that overlaps no other is alone
    (NCCL kernels on one stream: every group is one instance)."""
    ck = rank_key(g, coll)
    order = np.lexsort((g.end[coll], g.start[coll], ck))
    coll, ck = coll[order], ck[order]
    s, e = g.start[coll], g.end[coll]
    inst = g.instance[coll].astype(np.int64)
    on_host = g.chain_device[g.chain[coll]] < 0
    # a Gloo range can close well after its collective completed (its worker descheduled after
    # completing the future: the rank's main thread resumed ms before): such a collective ends,
    # for its group, when it first ended on any rank (else a range closing late overlaps the
    # next step's first bucket and joins two steps' groups, and the interval between them, the
    # straggler's extra work, becomes window time that is not shortened)
    first_end = np.full(int(inst.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(first_end, inst, e)
    e = np.where(on_host, np.minimum(e, first_end[inst]), e)
    new = np.ones(len(coll), dtype=bool)
    new[1:] = ck[1:] != ck[:-1]
    reach = np.empty(len(coll), dtype=np.int64)  # the latest end of the rank's earlier collectives
    reach[1:] = _running_max(e, new)[:-1]
    link = ~new & (s < np.where(new, s, reach))
    label = np.arange(int(inst.max()) + 1, dtype=np.int64)
    a, b = inst[np.flatnonzero(link) - 1], inst[link]
    while len(a):  # join linked instances: every label the smallest of its group
        m = np.minimum(label[a], label[b])
        before = label.copy()
        np.minimum.at(label, a, m)
        np.minimum.at(label, b, m)
        label = label[label]
        if np.array_equal(label, before):
            break
    grp = label[inst]
    key = np.stack([ck, grp])
    u, inv = np.unique(key, axis=1, return_inverse=True)
    inv = inv.ravel()
    gs = np.full(u.shape[1], np.iinfo(np.int64).max)
    ge = np.full(u.shape[1], np.iinfo(np.int64).min)
    np.minimum.at(gs, inv, s)
    np.maximum.at(ge, inv, e)
    host = np.zeros(u.shape[1], dtype=bool)  # a Gloo group: collectives on a host thread
    host[inv[on_host]] = True
    # (as above) a Gloo group ends on every rank when its last collective first ended on any rank
    done = np.full(u.shape[1], np.iinfo(np.int64).min)
    np.maximum.at(done, inv, first_end[inst])
    ge = np.where(host, np.clip(done, gs, ge), ge)
    o = np.lexsort((ge, gs, u[0]))
    return u[0][o], u[1][o], gs[o], ge[o], host[o]


def _running_max(x: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per row, the largest ``x`` from its group's first row (``new``) up to it."""
    grp = (np.cumsum(new) - 1).astype(np.int64)
    lo = int(x.min())
    span = int(x.max()) - lo + 1
    key = grp * span + (x - lo)
    return np.maximum.accumulate(key) - grp * span + lo


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
