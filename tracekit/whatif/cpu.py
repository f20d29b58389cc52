"""The what-if graph of CPU ranks (no CUDA API call: PyTorch on CPUs, Gloo collectives).

A CPU rank's threads are chains of *op* nodes, its top operators (``pytorch.cpu_op`` ranges no
other operator of the thread encloses; the time between two is the next one's lead: Python),
and each Gloo range (``gloo:<op>``, the backend's execution of a collective on its worker
thread) is a *collective* node, matched across ranks into instances as ``collective_skew``
matches them (queries/ranks/_macros.sql: tk_cpu_procs, tk_cpu_ops, tk_cpu_gloo). A CPU trace
records no call that waits for another thread, so the waits between threads are inferred from
timing (tk_cpu_edges; docs/whatif.md, "CPU ranks", says how often each rule fires):

- ``gloo start``: the ``c10d::<op>_`` call hands its collective to a Gloo worker thread (the
  k-th call of a type, the k-th range): the range may start once the calling operator started;
- ``gloo wait``: a thread idle until the first-issued unfinished Gloo range of its process
  ended, waking right after it (the main thread waiting for a gradient bucket's all-reduce): it
  may start once that ended. A range can close after the thread woke (its worker records the end
  after completing the collective's future); such a range's node ends at the wake
  (:func:`end_at_wakes`): the collective had completed by then;
- ``thread wait``: the same after an operator of another thread (the autograd thread).

:data:`OPS` holds every operator of a CPU rank with the node it runs in, for ``ops:REGEX=F``
(:func:`scaled_time`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

OPS = pa.schema([("node_id", pa.int64()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
                 ("name", pa.string())])
"""Graph.ops: per operator of a CPU rank (the top ones too), its 'op' node and recorded times."""

RULES = ("gloo start", "gloo wait", "thread wait")
"""The inferred waits between a CPU rank's threads, as Graph.counts keys ``wait:RULE``."""


def read(con, fetch) -> tuple[dict, pa.Table | None]:
    """The inferred edges of the CPU ranks ``con`` sees (tk_wi_n: tk_wi_nodes' table):
    {'start': (src, dst) table, 'after': (src, dst) table, 'counts': {rule: edges}}, and their
    operators (:data:`OPS`; None when there is no CPU rank)."""
    e = fetch(con, "SELECT src, dst, rule FROM tk_cpu_edges('tk_wi_n')")
    rule = e.column("rule").to_numpy(zero_copy_only=False).astype(object)
    start = e.filter(pa.array(rule == "gloo start")).select(["src", "dst"])
    after = e.filter(pa.array(rule != "gloo start")).select(["src", "dst"])
    gloo = e.filter(pa.array(rule == "gloo wait")).select(["src", "dst"])
    counts = {r: int((rule == r).sum()) for r in RULES if (rule == r).any()}
    ops = fetch(con, "SELECT node_id, start_ns, end_ns, name FROM tk_cpu_op_parts('tk_wi_n') "
                     "ORDER BY node_id, start_ns")
    return ({"start": start, "after": after, "gloo": gloo, "counts": counts},
            (ops.cast(OPS) if ops.num_rows else None))


def end_at_wakes(start: np.ndarray, end: np.ndarray, edges: dict) -> tuple[np.ndarray, int]:
    """``end`` with each Gloo range that a ``gloo wait`` edge of ``edges`` (:func:`read`'s) says a
    thread waited for ended no later than that thread's wake (``end[src] = min(end[src],
    start[dst])``; node ids index ``start`` and ``end``): its worker recorded the end after
    completing the collective's future, which the waiting thread saw first. Returns that array
    (``end`` itself, untouched, when no range closed late; else a changed copy) and how many
    ranges it moved."""
    g = edges["gloo"]
    if not g.num_rows:
        return end, 0
    src = g.column("src").to_numpy()
    wake = start[g.column("dst").to_numpy()]
    late = end[src] > wake
    if not late.any():
        return end, 0
    end = end.copy()
    np.minimum.at(end, src[late], wake[late])
    return end, int(late.sum())


def offset(ops: pa.Table, n: int) -> pa.Table:
    """``ops`` with its node ids moved by ``n`` (a part's place in the joined graph)."""
    return ops.set_column(0, "node_id", pc.add(ops.column("node_id"), pa.scalar(int(n), pa.int64())))


def scaled_time(g, hit_names: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Per 'op' node of ``g`` with a matching operator: (node ids, the union of its matching
    operators' time inside it, ns) and how many operators matched. ``hit_names(names)``: a
    boolean per name of a list (:func:`tracekit.whatif.limits.name_hits` with the pattern).
    Nested matches count once."""
    t = g.ops
    if t is None or not t.num_rows:
        return np.empty(0, np.int64), np.empty(0, np.int64), 0
    names = pc.dictionary_encode(t.column("name")).combine_chunks()
    hit = hit_names(names.dictionary.to_pylist())[names.indices.to_numpy(zero_copy_only=False)]
    if not hit.any():
        return np.empty(0, np.int64), np.empty(0, np.int64), 0
    node = t.column("node_id").to_numpy()[hit]
    s = t.column("start_ns").to_numpy()[hit]
    e = t.column("end_ns").to_numpy()[hit]
    o = np.lexsort((s, node))  # already so ordered (tk_cpu_op_parts); kept for safety
    node, s, e = node[o], s[o], e[o]
    new = np.ones(len(node), dtype=bool)
    new[1:] = node[1:] != node[:-1]
    # union per node: each interval counts beyond the furthest end of the node's earlier ones
    reach = _running_max(e, new)
    prev = np.empty(len(node), np.int64)
    prev[1:] = reach[:-1]
    prev[new] = np.iinfo(np.int64).min
    part = np.clip(e - np.maximum(s, prev), 0, None)
    u, inv = np.unique(node, return_inverse=True)
    return u, np.bincount(inv, weights=part).astype(np.int64), int(hit.sum())


def _running_max(x: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per row, the maximum of ``x`` from its group's first row (``new``) up to it."""
    grp = (np.cumsum(new) - 1).astype(np.int64)
    lo = int(x.min())
    span = int(x.max()) - lo + 1  # groups in increasing bands of int64 (a node's ops: < 2^40 ns)
    key = grp * span + (x - lo)
    return np.maximum.accumulate(key) - grp * span + lo


def _scaled_nodes(g, pattern: str):
    from tracekit.whatif.limits import name_hits

    return scaled_time(g, lambda names: name_hits(names, pattern))


def apply_ops(g, c, st) -> None:
    """``ops:REGEX=F``: each 'op' node's time in operators matching ``c.pattern`` x ``c.factor``
    (the union of the matches inside it; the rest of the node keeps its time), in ``st``."""
    from tracekit.whatif.limits import scaled

    nodes, t, _ = _scaled_nodes(g, c.pattern)
    if len(nodes):
        d1 = np.asarray(st.d1[nodes])
        st.d1[nodes] = np.maximum(d1 - t + scaled(t, c.factor, c), 0)


def describe_ops(g, c) -> list[str]:
    """What ``ops:REGEX=F`` scales in ``g``, one line (none when it matches nothing: n/a)."""
    nodes, t, hits = _scaled_nodes(g, c.pattern)
    if not hits:
        return []
    names = pc.unique(g.ops.filter(pc.is_in(g.ops.column("node_id"), pa.array(nodes)))
                      .column("name")).to_pylist()
    from tracekit.whatif.limits import name_hits

    k = int(name_hits(names, c.pattern).sum())
    return [f"ops:{c.pattern}={c.factor:g} scales {hits:,} operators of {k} names "
            f"({float(t.sum()) / 1e6:,.3f} ms of host time)"]


def unable_ops(g, c) -> str | None:
    """Why ``ops:REGEX=F`` cannot act on ``g``: no CPU rank, or no operator matches."""
    total = 0 if g.ops is None else g.ops.num_rows
    if not total:
        return ("the run has no operators of a CPU rank (ops:REGEX=F scales the PyTorch operators "
                "of ranks without CUDA; GPU work is kernels:REGEX=F)")
    if _scaled_nodes(g, c.pattern)[2]:
        return None
    return f"ops:{c.pattern}={c.factor:g} matches none of the {total:,} operators"
