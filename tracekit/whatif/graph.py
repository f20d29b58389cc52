"""The dependency graph of a run folder (one rank or a whole job) as NumPy arrays.

The edges come from the SQL macros of ``queries/whatif/_macros.sql`` (tk_wi_nodes,
tk_wi_launch_edges, tk_wi_sync_edges, tk_wi_event_edges, tk_wi_collectives, tk_wi_step_nodes,
tk_wi_ranks); this module turns them
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
rank's kernel ends when it ends. Cost and memory grow with the events (docs/performance.md:
the SQL's sorts over the whole job make the build superlinear in memory past ~1 M nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NEG = np.int64(-(2**62))
"""No time: the value of a missing dependency (every real time is larger)."""

CATEGORIES = ("mark", "api", "launch", "sync", "kernel", "memcpy", "memset", "collective", "transfer")
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
    into ``run_ids``.
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

    @property
    def n(self) -> int:
        return len(self.start)


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
    sync = fetch(con, "SELECT src, dst FROM tk_wi_sync_edges('tk_wi_n', 'tk_wi_l')")
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
    return Part(start_abs=_col(nodes, "start_ns"), end_abs=_col(nodes, "end_ns"),
                chain=_col(nodes, "chain_id"), cat=cat,
                name_idx=names_dict.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                names=names_dict.dictionary.to_pylist(),
                run=run_dict.indices.to_numpy(zero_copy_only=False).astype(np.int32),
                run_ids=run_dict.dictionary.to_pylist(), rank=_col(nodes, "rank", np.int32),
                edges={k: (_col(t, "src"), _col(t, "dst")) for k, t in
                       (("launch", launch), ("sync", sync), ("event", event))},
                coll=(_col(coll, "node_id"), _col(coll, "instance"),
                      coll.column("is_last").to_numpy(zero_copy_only=False).astype(bool)),
                steps=steps, pids=pids)


def load(con) -> Graph:
    """Build the graph of every run the DuckDB connection ``con`` (an engine's, with the
    whatif macros) sees. Raises ValueError when the runs hold no events to replay."""
    return join([read_part(con)])


def fetch(con, sql: str) -> pa.Table:
    """The result of ``sql`` on ``con`` as one Arrow table."""
    out = con.sql(sql).arrow()
    return out.read_all() if hasattr(out, "read_all") else out


def _merge_dict(merged: dict, local: list) -> np.ndarray:
    """Indices into ``merged`` (value -> index, first occurrence first, extended in place) of
    every value of ``local``."""
    return np.array([merged.setdefault(v, len(merged)) for v in local], dtype=np.int64)


def join(parts: list[Part]) -> Graph:
    """One :class:`Graph` of ``parts`` (in order: their nodes follow each other; the node ids of
    a part's edges, collectives and steps are offset by the nodes before it; names and run ids
    merged in first-occurrence order, so parts of one run in node order give the graph of the
    whole run exactly). Raises ValueError when the parts hold no nodes."""
    parts = [p for p in parts if p.n]
    if not parts:
        raise ValueError("no events to replay (no CUDA API calls, GPU activities or step ranges)")
    names: dict = {}
    runs: dict = {}
    node_off = np.cumsum([0] + [p.n for p in parts])
    chain_off = np.cumsum([0] + [int(p.chain.max()) + 1 for p in parts])
    cat = np.concatenate([p.cat for p in parts])
    name_idx = np.concatenate([_merge_dict(names, p.names)[p.name_idx] if p.n else p.name_idx
                               for p in parts])
    run = np.concatenate([_merge_dict(runs, p.run_ids)[p.run].astype(np.int32) for p in parts])

    def cat_edges(key):
        return tuple(np.concatenate([p.edges[key][j] + o for p, o in zip(parts, node_off)])
                     for j in (0, 1))

    c_node = np.concatenate([p.coll[0] + o for p, o in zip(parts, node_off)])
    c_inst = np.concatenate([p.coll[1] for p in parts])
    c_last = np.concatenate([p.coll[2] for p in parts])
    steps = _join_steps(parts, node_off)
    start_abs = np.concatenate([p.start_abs for p in parts])
    return _assemble(start_abs, np.concatenate([p.end_abs for p in parts]),
                     np.concatenate([p.chain + o for p, o in zip(parts, chain_off)]), cat,
                     name_idx, list(names), run, list(runs),
                     np.concatenate([p.rank for p in parts]),
                     cat_edges("launch"), cat_edges("sync"), cat_edges("event"),
                     (c_node, c_inst, c_last), steps)


def _join_steps(parts: list[Part], node_off) -> pa.Table:
    """The parts' steps with node ids offset, ordered by run_id, rank, step and start as
    tk_wi_step_nodes orders them."""
    tables = []
    for p, o in zip(parts, node_off):
        t = p.steps
        for c in ("start_node", "end_node"):
            i = t.column_names.index(c)
            t = t.set_column(i, c, pc.add(t.column(c), pa.scalar(int(o), t.schema.field(c).type)))
        tables.append(t)
    steps = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    if len(tables) > 1:
        start = np.concatenate([p.start_abs for p in parts])[_col(steps, "start_node")]
        key = steps.append_column("_start", pa.array(start, pa.int64()))
        order = pc.sort_indices(key, sort_keys=[("run_id", "ascending"), ("rank", "ascending"),
                                                        ("step", "ascending"), ("_start", "ascending")])
        steps = steps.take(order)
    return steps


def _assemble(start_abs, end_abs, chain, cat, name_idx, names, run, run_ids, rank, launch, sync,
              event, coll, steps) -> Graph:
    t0 = int(start_abs.min())
    start = start_abs - t0
    end = end_abs - t0
    n = len(start)
    first = np.ones(n, dtype=bool)
    first[1:] = chain[1:] != chain[:-1]

    # collectives: one transfer node per instance, appended after the event nodes
    c_node, c_inst, c_last = coll
    n_inst = int(c_inst.max()) + 1 if len(c_inst) else 0
    instance = np.full(n + n_inst, -1, dtype=np.int64)
    instance[c_node] = c_inst
    x_ids = n + np.arange(n_inst)
    x_start = group_max(start[c_node], c_inst, n_inst)
    x_dur = np.zeros(n_inst, dtype=np.int64)
    x_dur[c_inst[c_last]] = (end - start)[c_node[c_last]]
    x_end = x_start + x_dur
    x_rank = np.zeros(n_inst, dtype=np.int32)
    x_rank[c_inst[c_last]] = rank[c_node[c_last]]
    x_run = np.zeros(n_inst, dtype=np.int32)
    x_run[c_inst] = run[c_node]

    start_all = np.concatenate([start, x_start])
    end_all = np.concatenate([end, x_end])
    start_src = np.concatenate([launch[0], c_node])
    start_dst = np.concatenate([launch[1], x_ids[c_inst]])
    end_src = np.concatenate([sync[0], x_ids[c_inst]])
    end_dst = np.concatenate([sync[1], c_node])

    N = n + n_inst
    chain_all = np.concatenate([chain, chain.max() + 1 + np.arange(n_inst)]) if n_inst else chain
    first_all = np.concatenate([first, np.ones(n_inst, dtype=bool)])
    after_src = event[0]
    after_dst = event[1]
    r_meas = np.maximum(group_max(start_all[start_src], start_dst, N),
                        group_max(end_all[after_src], after_dst, N))
    w_meas = group_max(end_all[end_src], end_dst, N)
    prev_end = np.empty(N, dtype=np.int64)
    prev_end[1:] = end_all[:-1]
    prev_end[first_all] = NEG
    anchor = np.where(first_all & (r_meas == NEG), start_all, NEG)
    ready = np.maximum(np.maximum(prev_end, r_meas), anchor)
    lead = start_all - ready
    dur = end_all - start_all
    has_w = w_meas != NEG
    # a call that waits returns when the awaited work ends (d1 = 0) plus the part of it after
    # that end; a call whose work had ended before it began takes its measured time (d2)
    post = np.where(has_w, np.clip(end_all - w_meas, 0, dur), 0)
    d1 = np.where(has_w, 0, dur)
    d2 = post
    is_coll = np.zeros(N, dtype=bool)
    is_coll[c_node] = True
    d1[is_coll] = 0
    d2[c_node] = end[c_node] - x_end[c_inst]
    cat_all = np.concatenate([cat, np.full(n_inst, CAT["transfer"], dtype=np.int8)])
    names = list(names)
    tname = len(names)
    names.append("collective transfer")
    name_all = np.concatenate([name_idx, np.full(n_inst, tname, dtype=np.int64)])
    return Graph(t0=t0, start=start_all, end=end_all, chain=chain_all, first=first_all, cat=cat_all,
                 rank=np.concatenate([rank, x_rank]), run=np.concatenate([run, x_run]),
                 name_idx=name_all, names=names, run_ids=run_ids,
                 lead=lead, d1=d1, d2=d2, anchor=anchor, start_src=start_src, start_dst=start_dst,
                 end_src=end_src, end_dst=end_dst, after_src=after_src, after_dst=after_dst,
                 instance=instance, steps=steps,
                 counts={"nodes": n, "instances": n_inst, "launch_edges": len(launch[0]),
                         "sync_edges": len(sync[0]), "event_edges": len(event[0]),
                         "collective_calls": len(c_node)})


def _cat_fast(col) -> np.ndarray:
    d = pc.dictionary_encode(col).combine_chunks()
    lut = np.array([CAT[c] for c in d.dictionary.to_pylist()], dtype=np.int8)
    return lut[d.indices.to_numpy(zero_copy_only=False)]
