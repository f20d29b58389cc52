"""What-if scenarios: changes to a graph's durations and lags before it is replayed.

A scenario is text (``tracekit whatif -s``); several joined with ``+`` combine (applied in order):

- ``baseline``: no change (the replay of the measured durations);
- ``no-straggler``: each rank's work between two consecutive collectives (host time, API calls,
  launch lags and GPU work that start after the rank's previous collective ended and before it
  arrived at the next one, and the work after its last collective up to its last step's end)
  scaled so that the interval is as long as the shortest interval any rank had between the same
  two collective instances: no rank waits for another;
- ``comm=F``: every collective's transfer time x F (the wait for the last rank is not transfer);
- ``launch=0``: launch API calls take no host time and GPU work starts as soon as its stream and
  its dependencies allow (no launch latency, no gap on the stream);
- ``kernels:REGEX=F``: kernels whose name matches REGEX (RE2, searched; a ``+`` in it is written
  ``\\+``: :mod:`~tracekit.whatif.limits`) x F; NCCL kernels are communication (``comm=F``), not matched;
- ``host=F``: host time between the calls of every host thread x F.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np

from tracekit.errors import InputError
from tracekit.whatif import limits
from tracekit.whatif.graph import CAT, NEG, Graph, rank_key
from tracekit.whatif.store import chunks, nonzero

_FACTOR = re.compile(r"^(comm|host|launch)=(.+)$")
_KERNELS = re.compile(r"^kernels:(.+)=([^=]+)$")


@dataclass(frozen=True)
class Change:
    kind: str  # baseline, no-straggler, comm, launch, kernels, host
    factor: float = 1.0
    pattern: str = ""


def _factor(text: str, spec: str) -> float:
    try:
        f = float(text)
    except ValueError:
        raise InputError(f"scenario {spec!r}: {text!r} is not a number (e.g. comm=0.5)") from None
    if not np.isfinite(f) or f < 0:
        raise InputError(f"scenario {spec!r}: the factor must be a finite number >= 0")
    return f


def parse(spec: str) -> list[Change]:
    """The changes of one scenario text; :class:`InputError` naming what is wrong."""
    out = []
    for part in limits.split(spec):
        p = part.strip()
        if p == "baseline":
            out.append(Change("baseline"))
        elif p == "no-straggler":
            out.append(Change("no-straggler"))
        elif (m := _KERNELS.match(p)):
            limits.check_pattern(spec, m.group(1))
            out.append(Change("kernels", _factor(m.group(2), spec), m.group(1)))
        elif (m := _FACTOR.match(p)):
            f = _factor(m.group(2), spec)
            if m.group(1) == "launch" and f != 0:
                raise InputError(f"scenario {spec!r}: only launch=0 is defined")
            out.append(Change(m.group(1), f))
        else:
            raise InputError(f"unknown scenario {p!r}: use baseline, no-straggler, comm=F, launch=0, "
                             "kernels:REGEX=F or host=F (combine with +)")
    return out


def apply(g: Graph, changes: list[Change]):
    """(lead, d1, d2, anchor) of ``g`` after ``changes`` (copies in ``g.store``; ``g`` is not
    modified), each change over the whole graph a chunk of nodes at a time, in order."""
    st = g.store
    lead, d1, d2, anchor = (st.copy(x) for x in (g.lead, g.d1, g.d2, g.anchor))
    for c in changes:
        if c.kind == "no-straggler":
            no_straggler(g, lead, d1, d2, anchor)
        elif c.kind != "baseline":
            hit = _name_hits(g, c.pattern) if c.kind == "kernels" else None
            for a, b in chunks(g.n):
                _change(c, g, slice(a, b), lead, d1, hit)
    limits.check_times(changes, lead, d1, d2, anchor)
    return lead, d1, d2, anchor


def _name_hits(g: Graph, pattern: str) -> np.ndarray:
    return limits.name_hits(g.names, pattern)


def _change(c: Change, g: Graph, at: slice, lead, d1, hit) -> None:
    """One change (not no-straggler) on the nodes ``at``, in place."""
    cat = np.asarray(g.cat[at])
    ld, dd = np.asarray(lead[at]), np.asarray(d1[at])
    if c.kind == "comm":
        x = cat == CAT["transfer"]
        dd[x] = limits.scaled(dd[x], c.factor, c)
    elif c.kind == "host":
        x = (cat <= CAT["sync"]) & ~np.asarray(g.first[at]) & (ld > 0)
        ld[x] = limits.scaled(ld[x], c.factor, c)
    elif c.kind == "launch":
        dd[cat == CAT["launch"]] = 0
        ld[(cat >= CAT["kernel"]) & (cat <= CAT["collective"]) & (ld > 0)] = 0
    elif c.kind == "kernels":
        x = (cat == CAT["kernel"]) & hit[g.name_idx[at]]
        dd[x] = limits.scaled(dd[x], c.factor, c)
    lead[at], d1[at] = ld, dd


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


def describe(g: Graph, changes: list[Change]) -> list[str]:
    """What each ``kernels:REGEX=F`` change of a scenario matches in ``g``, one line each: the
    kernels, names and GPU time it scales, or that it matches none (its prediction is then the
    baseline's; NCCL kernels are ``comm=F``)."""
    out = []
    for c in changes:
        if c.kind != "kernels":
            continue
        hit = limits.name_hits(g.names, c.pattern)
        x = (g.cat == CAT["kernel"]) & hit[g.name_idx]
        if not x.any():
            total = int((g.cat == CAT["kernel"]).sum())
            out.append(f"kernels:{c.pattern}={c.factor:g} matches none of the {total:,} kernels "
                       "(not NCCL kernels: those are comm=F); its prediction is the baseline's")
        else:
            ms = float(g.d1[x].sum()) / 1e6
            out.append(f"kernels:{c.pattern}={c.factor:g} scales {int(x.sum()):,} kernels of "
                       f"{len(np.unique(g.name_idx[x]))} names ({ms:,.3f} ms of GPU time)")
    return out
