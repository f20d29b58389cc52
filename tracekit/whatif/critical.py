"""The critical path of every step: the chain of dependencies that set the step's end.

From the step's end the walk goes back along the binding dependency of each node at the
replay's fixed point -- the one whose time equals the node's start (or end) -- until it reaches
the step's start. A job's step (or a run's of several processes) is its longest rank's step
range, so the path's wall time is step_summary's wall_ns and whatif's baseline_ns for it
(docs/whatif.md, "What a step is"). Every move from time t to an earlier time t' is one segment [t', t), so
the segments of a step add up to its wall time exactly. Categories (docs/whatif.md):
'kernel', 'memcpy', 'memset', 'collective transfer' (a collective's transfer after the last rank
arrived), 'host' (host time between calls, and CUDA API calls other than launches and syncs),
'launch' (launch calls, and the latency from a launch call to its GPU work), 'sync wait' (a
sync call's time after the work it waited for ended), 'stream wait' (GPU work queued behind
the previous work of its stream or an event, after it ended), 'other' (before a thread's first
recorded event).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tracekit.whatif.graph import CAT, NEG, Graph, rank_key
from tracekit.whatif.replay import Schedule
from tracekit.whatif.store import chunks, nonzero

SCHEMA = pa.schema([
    ("run_id", pa.string()), ("step", pa.int64()), ("rank", pa.int32()), ("category", pa.string()),
    ("name", pa.string()), ("start_ns", pa.int64()), ("dur_ns", pa.int64()),
    ("wall_ns", pa.int64()), ("seq", pa.int64()),
])

_OWN = {CAT["kernel"]: "kernel", CAT["memcpy"]: "memcpy", CAT["memset"]: "memset",
        CAT["transfer"]: "collective transfer", CAT["api"]: "host", CAT["launch"]: "launch",
        CAT["sync"]: "sync wait", CAT["mark"]: "host", CAT["collective"]: "collective transfer",
        CAT["op"]: "host"}


def _best_sources(g: Graph, s: Schedule):
    """Per node: the start dependency (src, point 0 = start, 1 = end) with the latest time and
    the end dependency with the latest end (-1 where none), in ``g.store``, a chunk of edges at
    a time. Of equal times, an event wait wins over a launch and then the larger source node:
    the choice does not depend on the order of the edges, which DuckDB does not fix (ranks with
    equal times, e.g. replicas, would otherwise swap places on the critical path from run to
    run)."""
    n, st = g.n, g.store
    r_src, r_pt, w_src = st.full(n, -1, np.int64), st.full(n, 0, np.int8), st.full(n, -1, np.int64)
    for src, dst, times, pt in ((g.start_src, g.start_dst, s.start, 0),
                                (g.after_src, g.after_dst, s.end, 1),
                                (g.end_src, g.end_dst, s.end, 2)):
        if pt != 1:  # the start dependencies' latest (both kinds), then the end dependencies'
            best = st.full(n, NEG, np.int64)
        out_src = w_src if pt == 2 else r_src
        for a, b in chunks(len(dst)):
            sc, dc = np.asarray(src[a:b]), np.asarray(dst[a:b])
            val = times[sc]
            o = np.lexsort((sc, val, dc))
            last = np.ones(len(o), dtype=bool)
            last[:-1] = dc[o][1:] != dc[o][:-1]
            o = o[last]  # each destination's latest edge in the chunk (then largest source)
            d, v, sw = dc[o], val[o], sc[o]
            held = best[d]
            tie = v == held
            if pt == 1:  # an event wait wins a tie with a launch
                tie &= ((r_pt[d] == 1) & (sw > r_src[d])) | (r_pt[d] == 0)
            else:
                tie &= sw > out_src[d]
            win = (v > held) | tie
            d, v, sw = d[win], v[win], sw[win]
            best[d] = v
            out_src[d] = sw
            if pt != 2:
                r_pt[d] = pt
    return r_src, r_pt, w_src


def _waits(g: Graph, s: Schedule) -> dict:
    """Per (run, rank): the ends of the collective transfers its kernels waited for (the rank
    arrived before the last one), sorted, with the transfer nodes' ids."""
    part = nonzero(g.n, lambda a, b: (np.asarray(g.cat[a:b]) == CAT["collective"])
                   & (np.asarray(g.instance[a:b]) >= 0))
    x = g.n - g.counts["instances"] + g.instance[part] if len(part) else part
    waited = s.start[part] < s.start[x]
    part, x = part[waited], x[waited]
    key = rank_key(g, part)
    out = {}
    for k in np.unique(key):
        sel = key == k
        ends, ids = s.end[x[sel]], x[sel]
        o = np.argsort(ends, kind="stable")
        out[int(k)] = (ends[o], ids[o])
    return out


def _held_by(waits: dict, g: Graph, i: int, lo: int, hi: int):
    """The transfer node whose end is the latest in (lo, hi] among those node ``i``'s rank
    waited for (None when none): a host gap across it was held back by the wait."""
    w = waits.get(int(rank_key(g, i)))
    if w is None:
        return None
    j = int(np.searchsorted(w[0], hi, side="right")) - 1
    if j >= 0 and w[0][j] > lo:
        return int(w[1][j])
    return None


def _walk(g: Graph, s: Schedule, lead, d1, deps, waits, node: int, t_stop: int,
          point: int = 1) -> list[tuple]:
    """Segments (node, category, start, dur) from ``node``'s end (point 1) or start (0) back to
    ``t_stop``."""
    r_src, r_pt, w_src = deps
    out = []
    t = int(s.end[node] if point == 1 else s.start[node])
    gpu_lo, gpu_hi = CAT["kernel"], CAT["collective"]
    for _ in range(4 * g.n + 4):
        if t <= t_stop:
            break
        i = node
        if point == 1:
            own_end = int(s.start[i] + d1[i])
            if w_src[i] >= 0 and int(s.end[w_src[i]]) >= own_end and g.cat[i] != CAT["transfer"]:
                nxt = int(s.end[w_src[i]])
                if nxt <= t:
                    out.append((i, _OWN[int(g.cat[i])], nxt, t - nxt))
                    node, t = int(w_src[i]), nxt
                    continue
                if int(s.start[w_src[i]]) <= t:
                    # a negative post-wait: the call closed before the transfer's recorded end
                    # (a Gloo rank's range closed before the last rank's); the path enters the
                    # transfer where the call ended, never going forward in time
                    node = int(w_src[i])
                    continue
            nxt = int(s.start[i])
            out.append((i, _OWN[int(g.cat[i])], nxt, t - nxt))
            t, point = nxt, 0
            continue
        # start point: the lead-in, then the binding predecessor
        prev_end = int(s.end[i - 1]) if not g.first[i] else int(NEG)
        r = int(s.R[i]) if r_src[i] >= 0 else int(NEG)
        ready = max(prev_end, r, int(g.anchor[i]))
        is_gpu = gpu_lo <= g.cat[i] <= gpu_hi
        held = None if is_gpu else _held_by(waits, g, i, prev_end, t)
        if held is not None:  # the host gap holds the end of a collective this rank waited in
            xend = int(s.end[held])
            out.append((i, "host", xend, t - xend))
            node, t, point = held, xend, 1
        elif prev_end >= r and prev_end >= g.anchor[i] and prev_end > NEG // 2:
            cat = "stream wait" if is_gpu else "host"
            out.append((i, cat, ready, t - ready))
            node, t, point = i - 1, ready, 1
        elif r_src[i] >= 0 and r >= g.anchor[i]:
            cat = ("launch" if r_pt[i] == 0 else "stream wait") if is_gpu else "host"
            out.append((i, cat, ready, t - ready))
            node, t, point = int(r_src[i]), ready, int(r_pt[i])
        else:
            out.append((i, "other", t_stop, t - t_stop))
            t = t_stop
            break
    if out and out[-1][2] < t_stop:  # clip the last segment at the step's start
        i, c, a, d = out[-1]
        out[-1] = (i, c, t_stop, d - (t_stop - a))
    return out


def critical_path(g: Graph, s: Schedule, lead=None, d1=None) -> pa.Table:
    """Segments of every step's critical path (:data:`SCHEMA`); times on the trace clock (ns).
    A job's step is the same step number over its ranks in one run: its longest rank's step
    range (of equal ones, the one that ends last), from which the walk starts and where it
    stops."""
    lead = g.lead if lead is None else lead
    d1 = g.d1 if d1 is None else d1
    deps = _best_sources(g, s)
    waits = _waits(g, s)
    st = g.steps
    cols = {f.name: [] for f in SCHEMA}
    runs = st.column("run_id").to_pylist()
    steps = st.column("step").to_pylist()
    a = st.column("start_node").to_numpy()
    b = st.column("end_node").to_numpy()
    bp = st.column("end_point").to_numpy()
    t_end = np.where(bp == 1, s.end[b], s.start[b])
    groups: dict[tuple, list[int]] = {}
    for k, key in enumerate(zip(runs, steps)):
        groups.setdefault(key, []).append(k)
    for (run_id, step), rows in groups.items():
        # the step's wall time: its longest rank's step (step_summary's wall_ns, whatif's
        # baseline_ns); of equal ones, the rank that ends last
        last = max(rows, key=lambda k: (int(t_end[k]) - int(s.start[a[k]]), int(t_end[k])))
        t0 = int(s.start[a[last]])
        wall = int(t_end[last]) - t0
        segs = _walk(g, s, lead, d1, deps, waits, int(b[last]), t0, int(bp[last]))
        for seq, (i, cat, start, dur) in enumerate(reversed([x for x in segs if x[3] != 0])):
            cols["run_id"].append(run_id)
            cols["step"].append(step)
            cols["rank"].append(int(g.rank[i]))
            cols["category"].append(cat)
            cols["name"].append(g.names[int(g.name_idx[i])])
            cols["start_ns"].append(start + g.t0)
            cols["dur_ns"].append(dur)
            cols["wall_ns"].append(wall)
            cols["seq"].append(seq)
    return pa.table(cols, schema=SCHEMA)


def register(engine) -> None:
    """Replay ``engine``'s runs and register the critical path as the table ``tk_critical_path``
    on its connection (the named queries critical_path and critical_path_summary read it)."""
    from tracekit.errors import InputError
    from tracekit.whatif import load_graph
    from tracekit.whatif.replay import replay

    con = engine.con
    try:
        g = load_graph(engine)
    except InputError:  # nothing to replay: an empty table, the query explains why
        table = SCHEMA.empty_table()
    else:
        table = critical_path(g, replay(g))
    con.register("tk_critical_path", table)
