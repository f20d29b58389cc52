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
- ``kernels:REGEX=F``: kernels whose name matches REGEX (Python ``re.search``) x F; NCCL kernels
  are communication (``comm=F``), not matched;
- ``host=F``: host time between the calls of every host thread x F.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracekit.errors import InputError
from tracekit.whatif.graph import CAT, Graph

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
    for part in spec.split("+"):
        p = part.strip()
        if p == "baseline":
            out.append(Change("baseline"))
        elif p == "no-straggler":
            out.append(Change("no-straggler"))
        elif (m := _KERNELS.match(p)):
            try:
                re.compile(m.group(1))
            except re.error as exc:
                raise InputError(f"scenario {spec!r}: bad regular expression {m.group(1)!r}: {exc}") from None
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
    """(lead, d1, d2) of ``g`` after ``changes`` (copies; ``g`` is not modified)."""
    lead, d1, d2 = g.lead.copy(), g.d1.copy(), g.d2.copy()
    host = g.cat <= CAT["sync"]
    gpu = (g.cat >= CAT["kernel"]) & (g.cat <= CAT["collective"])
    for c in changes:
        if c.kind == "comm":
            x = g.cat == CAT["transfer"]
            d1[x] = np.rint(d1[x] * c.factor).astype(np.int64)
        elif c.kind == "host":
            x = host & ~g.first & (lead > 0)
            lead[x] = np.rint(lead[x] * c.factor).astype(np.int64)
        elif c.kind == "launch":
            launch = g.cat == CAT["launch"]
            d1[launch] = 0
            x = gpu & (lead > 0)
            lead[x] = 0
        elif c.kind == "kernels":
            rx = re.compile(c.pattern)
            hit = np.array([bool(rx.search(n)) for n in g.names], dtype=bool)
            x = (g.cat == CAT["kernel"]) & hit[g.name_idx]
            d1[x] = np.rint(d1[x] * c.factor).astype(np.int64)
        elif c.kind == "no-straggler":
            f = straggler_factors(g)
            work = (g.cat != CAT["collective"]) & (g.cat != CAT["transfer"]) & (g.cat != CAT["mark"])
            x = work & (f < 1.0)
            d1[x] = np.rint(d1[x] * f[x]).astype(np.int64)
            lp = x & (lead > 0)
            lead[lp] = np.rint(lead[lp] * f[lp]).astype(np.int64)
    return lead, d1, d2


def straggler_factors(g: Graph) -> np.ndarray:
    """Per node, the factor that makes its rank's interval between collectives as short as the
    shortest rank's interval between the same two collective instances (1 where none)."""
    n = g.n
    f = np.ones(n)
    coll = np.flatnonzero(g.instance >= 0)
    if not len(coll):
        return f
    # per (run, rank): its collective kernels in start order; interval k ends at the k-th arrival
    key = g.run[coll].astype(np.int64) * (1 << 32) + g.rank[coll]
    order = np.lexsort((g.start[coll], key))
    coll, key = coll[order], key[order]
    new = np.ones(len(coll), dtype=bool)
    new[1:] = key[1:] != key[:-1]
    # the rank's first interval starts at its first event
    all_key = g.run.astype(np.int64) * (1 << 32) + g.rank
    ukeys, inv_all = np.unique(all_key, return_inverse=True)
    first_t = np.full(len(ukeys), np.iinfo(np.int64).max)
    np.minimum.at(first_t, inv_all, g.start)
    prev_end = np.empty(len(coll), dtype=np.int64)
    prev_end[1:] = g.end[coll[:-1]]
    prev_end[new] = first_t[np.searchsorted(ukeys, key[new])]
    inst = g.instance[coll]
    prev_inst = np.empty(len(coll), dtype=np.int64)
    prev_inst[1:] = inst[:-1]
    prev_inst[new] = -1
    length = g.start[coll] - prev_end
    # shortest interval per (previous instance, instance) pair
    pair = (prev_inst + 1) * (int(inst.max()) + 2) + inst
    ok = length > 0
    if not ok.any():
        return f
    uniq, inv = np.unique(pair[ok], return_inverse=True)
    shortest = np.full(len(uniq), np.iinfo(np.int64).max)
    np.minimum.at(shortest, inv, length[ok])
    factor = np.ones(len(coll))
    factor[ok] = shortest[inv] / length[ok]
    # nodes of the same (run, rank) whose start lies in (prev_end, arrival]
    nodes = np.flatnonzero(g.cat != CAT["transfer"])
    nkey = g.run[nodes].astype(np.int64) * (1 << 32) + g.rank[nodes]
    # position of each node among its rank's collective arrivals: first arrival >= its start
    idx = _first_at_or_after(key, g.start[coll], nkey, g.start[nodes])
    valid = idx >= 0
    sel = nodes[valid]
    k = idx[valid]
    inside = g.start[sel] > prev_end[k]
    f[sel[inside]] = factor[k[inside]]
    return f


def _first_at_or_after(key, t, qkey, qt) -> np.ndarray:
    """For each query (qkey, qt), the index of the first (key, t) row (sorted by key, t) with the
    same key and t >= qt; -1 when none."""
    ukeys = np.unique(key)
    dk = np.searchsorted(ukeys, key)
    dq = np.searchsorted(ukeys, qkey)
    known = (dq < len(ukeys)) & (ukeys[np.minimum(dq, len(ukeys) - 1)] == qkey)
    span = np.int64(max(int(t.max()), int(qt.max())) - min(int(t.min()), int(qt.min())) + 2)
    lo = min(int(t.min()), int(qt.min()))
    base = dk.astype(np.int64) * span + (t - lo)
    q = dq.astype(np.int64) * span + (qt - lo)
    pos = np.searchsorted(base, q, side="left")
    ok = known & (pos < len(base))
    pos2 = np.where(ok, pos, 0)
    ok &= dk[pos2] == dq
    return np.where(ok, pos2, -1)
