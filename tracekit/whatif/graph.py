"""The dependency graph of a run folder (one rank or a whole job) as NumPy arrays.

The edges come from the SQL macros of ``queries/whatif/_macros.sql`` (tk_wi_nodes,
tk_wi_launch_edges, tk_wi_sync_edges, tk_wi_wait_edges, tk_wi_event_edges, tk_wi_collectives,
tk_wi_step_nodes, tk_wi_ranks); this module turns them
into arrays and derives, for every node, the measured lags the replay keeps (docs/whatif.md):

- ``lead_ns``: the node's start minus the latest of its chain predecessor's end and its start
  dependencies (the launch call's start, the end of the work an event wait waits for) -- host
  time before a host node, launch latency or the stream's gap before a GPU node. Negative when
  the trace's clocks disagree (it is kept, so the replay of the measured durations reproduces
  the trace);
- ``d1_ns`` / ``d2_ns``: the node's own time before and after its end dependency: a sync call
  returns ``d2`` after the awaited work ended (d2 = the part of the call after that end, the
  whole call when the work had ended before it began; d1 = 0), a collective kernel of a rank
  ends ``d2`` after the instance's transfer ends; else d1 = the duration, d2 = 0.

Every collective instance adds one *transfer* node (category 'transfer'): it starts when the last
rank has arrived (the latest start of its kernels) and lasts the last rank's kernel duration; each
rank's kernel ends when it ends. Cost grows with the events; a large graph's arrays are files
mapped into memory (:mod:`tracekit.whatif.store`), derived a chunk of nodes at a time, so the
process's own memory does not grow with them (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.whatif import cpu as _cpu
from tracekit.whatif.store import Appender, Store, chunks, disk_nodes

NEG = np.int64(-(2**62))
"""No time: the value of a missing dependency (every real time is larger)."""

CATEGORIES = ("mark", "api", "launch", "sync", "kernel", "memcpy", "memset", "collective", "transfer", "op")
"""Node categories; 'op': a CPU rank's top operator (:mod:`tracekit.whatif.cpu`)."""
CAT = {c: i for i, c in enumerate(CATEGORIES)}


@dataclass
class Graph:
    """Nodes in chain order (a chain's nodes are contiguous, in program/stream order).

    Per node (length n): ``start``, ``end`` (measured, ns relative to ``t0``), ``chain``,
    ``first`` (True for a chain's first node), ``cat`` (index into :data:`CATEGORIES`),
    ``rank``, ``name_idx`` (into ``names``), ``lead``, ``d1``, ``d2``, ``anchor`` (a fixed
    earliest start for a chain's first node without dependencies, else NEG).
    Edges: ``start_src``/``start_dst`` (dst may start once src has started: launches, and a
    collective's kernels into its transfer node), ``end_src``/``end_dst`` (dst may end once src
    has ended: syncs, the transfer node into each rank's collective kernel), ``after_src``/
    ``after_dst`` (dst may start once src has ended: cross-stream event waits).
    ``steps``: Arrow table run_id, rank, step, start_node, end_node, measured_ns.
    ``instance``: per node, the collective instance (-1 if none); ``run_id``: per node, index
    into ``run_ids``. ``chain_device``: per chain, the device of a GPU stream's chain (-1 for a
    host thread or a transfer). ``counts``: sizes, and ``wait:RULE`` the edges each rule of
    tk_wi_wait_edges found (they are among the end edges).
    """

    t0: int
    start: np.ndarray
    end: np.ndarray
    chain: np.ndarray
    first: np.ndarray
    cat: np.ndarray
    rank: np.ndarray
    run: np.ndarray
    name_idx: np.ndarray
    names: list
    run_ids: list
    lead: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    anchor: np.ndarray
    start_src: np.ndarray
    start_dst: np.ndarray
    end_src: np.ndarray
    end_dst: np.ndarray
    after_src: np.ndarray
    after_dst: np.ndarray
    instance: np.ndarray
    steps: pa.Table
    counts: dict = field(default_factory=dict)
    store: Store = field(default_factory=Store)
    chain_device: np.ndarray | None = None
    ops: pa.Table | None = None  # CPU ranks' operators per 'op' node (tracekit.whatif.cpu.OPS)

    @property
    def n(self) -> int:
        return len(self.start)


def rank_key(g: Graph, at) -> np.ndarray:
    """The (run, rank) of the nodes ``at`` of ``g`` (a slice, node ids or one id) as one int64
    key each: run index x 2^32 + rank."""
    return np.asarray(g.run[at]).astype(np.int64) * (1 << 32) + g.rank[at]


def _col(t: pa.Table, name: str, dtype=np.int64, fill=0) -> np.ndarray:
    c = t.column(name)
    if c.null_count:
        c = c.fill_null(fill)
    return c.to_numpy().astype(dtype, copy=False)


def group_max(values: np.ndarray, index: np.ndarray, n: int) -> np.ndarray:
    """Per target 0..n-1, the maximum of ``values`` with that ``index`` (NEG where none)."""
    out = np.full(n, NEG, dtype=np.int64)
    if len(index):
        np.maximum.at(out, index, values)
    return out


@dataclass
class Part:
    """The SQL's output for some of the processes of a run (or all of it), as compact arrays:
    node ids and chain ids from 0 within the part (:func:`read_part`); :func:`join` offsets
    and merges parts into one :class:`Graph`. ``names``/``run_ids``: the part's dictionaries
    (``name_idx``/``run`` index them); ``pids``: the (run_id, pid) pairs of its nodes."""

    start_abs: np.ndarray
    end_abs: np.ndarray
    chain: np.ndarray
    cat: np.ndarray
    name_idx: np.ndarray
    names: list
    run: np.ndarray
    run_ids: list
    rank: np.ndarray
    edges: dict  # launch, sync, event: (src, dst) node ids
    coll: tuple  # (node_id, instance, is_last)
    steps: pa.Table
    pids: list = field(default_factory=list)
    chain_device: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    waits: dict = field(default_factory=dict)  # rule: edges of tk_wi_wait_edges
    ops: pa.Table | None = None  # tracekit.whatif.cpu: a CPU rank's operators per 'op' node

    @property
    def n(self) -> int:
        return len(self.start_abs)


def read_part(con) -> Part:
    """Run the graph SQL (queries/whatif/_macros.sql) on the DuckDB connection ``con`` (an
    engine's, with the whatif macros) over every run it sees, into a :class:`Part`."""
    con.execute("CREATE OR REPLACE TEMP TABLE tk_wi_n AS SELECT * FROM tk_wi_nodes()")
    con.execute("CREATE OR REPLACE TEMP TABLE tk_wi_l AS SELECT * FROM tk_wi_launch_edges('tk_wi_n')")
    nodes = fetch(con, "SELECT n.node_id, n.chain_id, n.run_id, n.pid, "  # on rank 0's clock
                        "tk_clock_true(n.start_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS start_ns, "
                        "tk_clock_true(n.end_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS end_ns, "
                        "n.category, n.name, c.rank FROM tk_wi_n n JOIN tk_wi_clock('tk_wi_n') c "
                        "ON c.run_id = n.run_id AND c.pid = n.pid ORDER BY n.node_id")
    launch = fetch(con, "SELECT src, dst FROM tk_wi_l")
    cpu_edges, ops = _cpu.read(con, fetch)  # CPU ranks: waits between threads, operators
    sync = fetch(con, "SELECT src, dst FROM tk_wi_sync_edges('tk_wi_n', 'tk_wi_l')")
    wait = fetch(con, "SELECT src, dst, rule FROM tk_wi_wait_edges('tk_wi_n', 'tk_wi_l')")
    devs = fetch(con, "SELECT chain_id, CASE WHEN any_value(chain_kind) = 1 THEN any_value(thread_or_device) "
                      "ELSE -1 END AS device FROM tk_wi_n GROUP BY chain_id ORDER BY chain_id")
    event = fetch(con, "SELECT DISTINCT src, dst FROM tk_wi_event_edges('tk_wi_n', 'tk_wi_l')")
    coll = fetch(con, "SELECT node_id, instance, is_last FROM tk_wi_collectives('tk_wi_n')")
    steps = fetch(con, "SELECT * FROM tk_wi_step_nodes('tk_wi_n')")
    pids = con.sql("SELECT DISTINCT run_id, pid FROM tk_wi_n ORDER BY ALL").fetchall()
    con.execute("DROP TABLE tk_wi_n")
    con.execute("DROP TABLE tk_wi_l")
    n = nodes.num_rows
    cat = np.array([CAT[c] for c in nodes.column("category").to_pylist()], dtype=np.int8) \
        if n < 2_000_000 else _cat_fast(nodes.column("category"))
    names_dict = pc.dictionary_encode(nodes.column("name")).combine_chunks()
    run_dict = pc.dictionary_encode(nodes.column("run_id")).combine_chunks()
    start_abs = _col(nodes, "start_ns")
    end_abs, closed_late = _cpu.end_at_wakes(start_abs, _col(nodes, "end_ns"), cpu_edges)
    return Part(start_abs=start_abs, end_abs=end_abs,
                chain=_col(nodes, "chain_id", np.int32), cat=cat,
                name_idx=names_dict.indices.to_numpy(zero_copy_only=False).astype(np.int32),
                names=names_dict.dictionary.to_pylist(),
                run=run_dict.indices.to_numpy(zero_copy_only=False).astype(np.int32),
                run_ids=run_dict.dictionary.to_pylist(), rank=_col(nodes, "rank", np.int32),
                edges={k: (_col(t, "src"), _col(t, "dst")) for k, t in
                       (("launch", pa.concat_tables([launch, cpu_edges["start"]])),
                        ("sync", pa.concat_tables([sync, wait.drop(["rule"])])),
                        ("event", pa.concat_tables([event, cpu_edges["after"]])))},
                coll=(_col(coll, "node_id"), _col(coll, "instance"),
                      coll.column("is_last").to_numpy(zero_copy_only=False).astype(bool)),
                steps=steps, pids=pids, chain_device=_col(devs, "device", fill=-1),
                waits={**(dict(zip(*np.unique(np.asarray(wait.column("rule").to_pylist(), dtype=object),
                                             return_counts=True))) if wait.num_rows else {}),
                       **cpu_edges["counts"], **({"gloo closed late": closed_late} if closed_late else {})},
                ops=ops)


def load(con) -> Graph:
    """Build the graph of every run the DuckDB connection ``con`` (an engine's, with the
    whatif macros) sees. Raises ValueError when the runs hold no events to replay."""
    part = read_part(con)
    return join([part], Store(disk=part.n >= disk_nodes()))


def fetch(con, sql: str) -> pa.Table:
    """The result of ``sql`` on ``con`` as one Arrow table."""
    out = con.sql(sql).arrow()
    return out.read_all() if hasattr(out, "read_all") else out


def _merge_dict(merged: dict, local: list) -> np.ndarray:
    """Indices into ``merged`` (value -> index, first occurrence first, extended in place) of
    every value of ``local``."""
    return np.array([merged.setdefault(v, len(merged)) for v in local], dtype=np.int64)


_NODE_TYPES = (("start", np.int64), ("end", np.int64), ("chain", np.int32), ("cat", np.int8),
               ("name_idx", np.int32), ("run", np.int32), ("rank", np.int32))


def join(parts, store: Store | None = None) -> Graph:
    """One :class:`Graph` of ``parts`` (an iterable, in order: their nodes follow each other; the
    node ids of a part's edges, collectives and steps are offset by the nodes before it; names
    and run ids merged in first-occurrence order, so parts of one run in node order give the
    graph of the whole run exactly). Each part is consumed as it comes: its arrays are copied
    into the graph's (in ``store``: memory by default, or files) and released, so the job's
    nodes are held once. Raises ValueError when the parts hold no nodes."""
    store = store or Store()
    nodes = {k: Appender(store, t) for k, t in _NODE_TYPES}
    edges = {k: (Appender(store, np.int64), Appender(store, np.int64))
             for k in ("launch", "sync", "event")}
    coll: list[tuple] = []
    steps: list[pa.Table] = []
    names: dict = {}
    runs: dict = {}
    n = chains = 0
    chain_dev: list[np.ndarray] = []
    waits: dict = {}
    ops: list[pa.Table] = []
    for p in parts:
        if not p.n:
            continue
        for k, x in (("start", p.start_abs), ("end", p.end_abs), ("chain", p.chain + chains),
                     ("cat", p.cat), ("rank", p.rank),
                     ("name_idx", _merge_dict(names, p.names)[p.name_idx]),
                     ("run", _merge_dict(runs, p.run_ids)[p.run])):
            nodes[k].add(x)
        for k, (src, dst) in edges.items():
            src.add(p.edges[k][0] + n)
            dst.add(p.edges[k][1] + n)
        coll.append((p.coll[0] + n, p.coll[1], p.coll[2]))
        steps.append(_offset_steps(p.steps, n))
        chains += int(p.chain.max()) + 1
        chain_dev.append(p.chain_device)
        for rule, k in p.waits.items():
            waits[rule] = waits.get(rule, 0) + int(k)
        if p.ops is not None and p.ops.num_rows:
            ops.append(_cpu.offset(p.ops, n))
        n += p.n
        p.start_abs = p.end_abs = p.chain = p.cat = p.name_idx = p.run = p.rank = np.empty(0, np.int64)
        pa.default_memory_pool().release_unused()  # the part's Arrow tables, freed, not kept
    if not n:
        raise ValueError("no events to replay (no CUDA API calls, GPU activities or step ranges)")
    c_node, c_inst, c_last = (np.concatenate([c[j] for c in coll]) for j in range(3))
    n_inst = int(c_inst.max()) + 1 if len(c_inst) else 0  # a transfer node per instance
    arrays = {k: a.finish(n_inst) for k, a in nodes.items()}
    arrays["chain"][n:] = chains + np.arange(n_inst)
    counts = {"launch_edges": edges["launch"][0].n, "sync_edges": edges["sync"][0].n,
              "event_edges": edges["event"][0].n, **{f"wait:{r}": k for r, k in sorted(waits.items())}}
    # a collective's kernels start its transfer node; the transfer ends each rank's kernel
    edges["launch"][0].add(c_node)
    edges["launch"][1].add(n + c_inst)
    edges["sync"][0].add(n + c_inst)
    edges["sync"][1].add(c_node)
    done = {k: (src.finish(), dst.finish()) for k, (src, dst) in edges.items()}
    steps_t = _sort_steps(steps, arrays["start"])
    g = _assemble(arrays, n, list(names), list(runs), done, (c_node, c_inst, c_last), steps_t,
                  store, counts)
    g.chain_device = np.concatenate([*chain_dev, np.full(n_inst, -1, np.int64)]).astype(np.int64)
    g.ops = pa.concat_tables(ops) if ops else None
    return g


def _offset_steps(t: pa.Table, offset: int) -> pa.Table:
    for c in ("start_node", "end_node"):
        i = t.column_names.index(c)
        t = t.set_column(i, c, pc.add(t.column(c), pa.scalar(int(offset), t.schema.field(c).type)))
    return t


def _sort_steps(tables: list[pa.Table], start: np.ndarray) -> pa.Table:
    """The parts' steps (node ids offset) ordered by run_id, rank, step and start (``start``:
    the joined nodes' start times) as tk_wi_step_nodes orders them."""
    steps = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    if len(tables) > 1:
        key = steps.append_column("_start", pa.array(start[_col(steps, "start_node")], pa.int64()))
        order = pc.sort_indices(key, sort_keys=[("run_id", "ascending"), ("rank", "ascending"),
                                                        ("step", "ascending"), ("_start", "ascending")])
        steps = steps.take(order)
    return steps


def _group_max_into(out: np.ndarray, values: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
    """``out[dst[j]] = max(out[dst[j]], values[src[j]])`` for every edge j, a chunk at a time."""
    for a, b in chunks(len(dst)):
        np.maximum.at(out, dst[a:b], values[src[a:b]])


def _first_of_chains(chain: np.ndarray, n: int, store: Store) -> np.ndarray:
    """True for each chain's first node (of ``n`` event nodes; every node after them is one)."""
    first = store.full(len(chain), True, bool)
    for a, b in chunks(n):
        lo = max(a, 1)
        if lo < b:
            np.not_equal(chain[lo:b], chain[lo - 1:b - 1], out=first[lo:b])
    return first


def _assemble(nodes: dict, n: int, names: list, run_ids: list, edges: dict, coll, steps,
              store: Store, counts: dict) -> Graph:
    """The graph of ``n`` event nodes (``nodes``: arrays of every node, the transfer nodes'
    entries after ``n`` still to fill, except chain; ``edges``: the collectives' edges last), a
    chunk of nodes at a time (:data:`tracekit.whatif.store.CHUNK`)."""
    start, end, rank, run = nodes["start"], nodes["end"], nodes["rank"], nodes["run"]
    N = len(start)
    t0 = min(int(start[a:b].min()) for a, b in chunks(n))
    for a, b in chunks(n):
        start[a:b] -= t0
        end[a:b] -= t0
    first = _first_of_chains(nodes["chain"], n, store)

    # collectives: one transfer node per instance, after the event nodes; it starts when the
    # last rank has arrived and lasts the last rank's kernel
    c_node, c_inst, c_last = coll
    n_inst = N - n
    instance = store.full(N, -1, np.int32)
    instance[c_node] = c_inst
    start[n:] = group_max(start[c_node], c_inst, n_inst)
    end[n:] = start[n:]
    end[n + c_inst[c_last]] += end[c_node[c_last]] - start[c_node[c_last]]
    rank[n:] = 0
    rank[n + c_inst[c_last]] = rank[c_node[c_last]]
    run[n:] = 0
    run[n + c_inst] = run[c_node]
    nodes["cat"][n:] = CAT["transfer"]
    nodes["name_idx"][n:] = len(names)
    names = [*names, "collective transfer"]

    (start_src, start_dst), (end_src, end_dst) = edges["launch"], edges["sync"]
    after_src, after_dst = edges["event"]
    r = store.full(N, NEG, np.int64)
    _group_max_into(r, start, start_src, start_dst)
    _group_max_into(r, end, after_src, after_dst)
    anchor, lead = store.empty(N, np.int64), store.empty(N, np.int64)
    for a, b in chunks(N):
        f, s, rc = first[a:b], start[a:b], r[a:b]
        anchor[a:b] = np.where(f & (rc == NEG), s, NEG)
        ready = np.empty(b - a, dtype=np.int64)  # the chain predecessor's end, then the ready time
        ready[1:] = end[a:b - 1]
        ready[0] = end[a - 1] if a else NEG
        ready[f] = NEG
        np.maximum(ready, rc, out=ready)
        np.maximum(ready, anchor[a:b], out=ready)
        lead[a:b] = s - ready
    del r
    w = store.full(N, NEG, np.int64)
    _group_max_into(w, end, end_src, end_dst)
    d1, d2 = store.empty(N, np.int64), store.empty(N, np.int64)
    for a, b in chunks(N):
        # a call that waits returns when the awaited work ends (d1 = 0) plus the part of it
        # after that end; a call whose work had ended before it began takes its measured time
        wc = w[a:b]
        has_w = wc != NEG
        own = end[a:b] - start[a:b]
        late = np.clip(end[a:b] - wc, 0, own)
        late[~has_w] = 0
        own[has_w] = 0
        d1[a:b], d2[a:b] = own, late
    del w
    d1[c_node] = 0
    d2[c_node] = end[c_node] - end[n + c_inst]
    return Graph(t0=t0, start=start, end=end, chain=nodes["chain"], first=first, cat=nodes["cat"],
                 rank=rank, run=run, name_idx=nodes["name_idx"], names=names, run_ids=run_ids,
                 lead=lead, d1=d1, d2=d2, anchor=anchor, start_src=start_src, start_dst=start_dst,
                 end_src=end_src, end_dst=end_dst, after_src=after_src, after_dst=after_dst,
                 instance=instance, steps=steps, store=store,
                 counts={"nodes": n, "instances": n_inst, **counts,
                         "collective_calls": len(c_node)})


def _cat_fast(col) -> np.ndarray:
    d = pc.dictionary_encode(col).combine_chunks()
    lut = np.array([CAT[c] for c in d.dictionary.to_pylist()], dtype=np.int8)
    return lut[d.indices.to_numpy(zero_copy_only=False)]
