"""Kineto collector, the end of each trace: fix-ups that need the whole file (base time written
after the events, the host pid of GPU work, ROCm copy sizes, the tracekit domain, push/pop
nesting, flow counts), run on the temporary Parquet parts with pyarrow or DuckDB (which spills
to disk), and the small tables (processes, threads, devices) and manifest entries."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracekit import schema
from tracekit.collectors import common as nesting
from tracekit.collectors.kineto.mapping import (
    CHUNK_ROWS,
    DTYPE_BYTES,
    DUCKDB_MEMORY_LIMIT,
    DUCKDB_THREADS,
    GPU_TABLES,
    THREAD_NAME,
    TRACEKIT_DOMAIN,
    TRACEKIT_PHASE,
    TRACEKIT_STEP,
    FileState,
    Parts,
    i32,
    i64,
    s,
    to_int,
    trace_rank,
)
from tracekit.duck import fetch_arrow, file_literal, lit, scratch
from tracekit.errors import InputError


def file_base_ns(st: FileState) -> int:
    base = st.metadata.get("baseTimeNanoseconds")
    if base is None:
        return 0
    v = to_int(base)
    if v is None:
        raise InputError(f"baseTimeNanoseconds is not an integer: {str(base)[:40]!r}", path=st.path)
    if not 0 <= v < 1 << 62:  # timestamps are int64 ns from it; 2^62 ns is year 2116
        raise InputError(f"baseTimeNanoseconds {str(base)[:40]} is out of range (int64 ns since "
                         "the Unix epoch)", path=st.path)
    return v


def file_host_pid(st: FileState) -> int | None:
    cpu = {p for p in st.api_pids if p is not None} or {p for p, _ in st.cpu_threads if p is not None}
    if not cpu:
        cpu = {p for p, lab in st.process_labels.items() if lab == "CPU"}
    return next(iter(cpu)) if len(cpu) == 1 else None


def _flow_sql(parts: Parts, st: FileState) -> str | None:
    files = [str(p) for fi, p in parts.files["_flows"] if fi == st.index]
    if not files:
        return None
    return "read_parquet([" + ", ".join(file_literal(f) for f in files) + "])"


def flow_counts(parts: Parts, st: FileState) -> dict:
    """Counts of ac2g flows by which ends the trace has (computed by DuckDB: bounded memory)."""
    src = _flow_sql(parts, st)
    out = {"ac2g_flows": 0, "both_ends": 0, "start_only": 0, "finish_only": 0}
    if src is None:
        return out
    con = scratch(memory_limit=DUCKDB_MEMORY_LIMIT, threads=DUCKDB_THREADS,
                  temp_directory=parts.root / "duckdb-tmp")
    try:
        row = con.sql(
            "SELECT count(*), count(*) FILTER (WHERE s > 0 AND f > 0), "
            "count(*) FILTER (WHERE s > 0 AND f = 0), count(*) FILTER (WHERE s = 0 AND f > 0) "
            "FROM (SELECT id, count(*) FILTER (WHERE is_start) AS s, "
            f"count(*) FILTER (WHERE NOT is_start) AS f FROM {src} GROUP BY id)").fetchall()[0]
    finally:
        con.close()
    return dict(zip(out, (int(v or 0) for v in row)))


def _correlation_from_flows(cols: dict, parts: Parts, st: FileState):
    """For GPU rows without args.correlation: the id of the ac2g flow end on the same track
    (pid = device, tid = stream) at the same time, else null."""
    src = _flow_sql(parts, st)
    if src is None:
        return cols["correlation_id"]
    keys = pa.table({"_row": pa.array(range(len(cols["start_ns"])), i64),
                     "pid": cols["device_id"].cast(i64), "tid": cols["stream_id"],
                     "ts_ns": cols["start_ns"], "corr": cols["correlation_id"]})
    con = scratch()
    try:
        con.register("k", keys)
        got = fetch_arrow(con.sql(
            "SELECT coalesce(k.corr, (SELECT min(f.id) FROM " + src + " f WHERE NOT f.is_start "
            "AND f.pid = k.pid AND f.tid = k.tid AND f.ts_ns = k.ts_ns)) AS c FROM k ORDER BY k._row"))
    finally:
        con.close()
    return got.column("c")


def table_batches(table: str, parts: Parts, states: list[FileState], range_counter: list[int]):
    if table == "nvtx_ranges":
        yield from _nvtx_batches(parts, states, range_counter)
        return
    for fi, p in parts.files[table]:
        st = states[fi]
        t = pq.read_table(p)
        base = st.base_ns
        cols = {n: t.column(n) for n in t.column_names}
        if table in GPU_TABLES and cols["correlation_id"].null_count:
            cols["correlation_id"] = _correlation_from_flows(cols, parts, st)
        if base:
            try:
                cols["start_ns"] = pc.add_checked(cols["start_ns"], pa.scalar(base, i64))
                cols["end_ns"] = pc.add_checked(cols["end_ns"], pa.scalar(base, i64))
            except pa.ArrowInvalid:
                raise InputError("timestamps + baseTimeNanoseconds overflow int64 nanoseconds",
                                 path=st.path) from None
        if table in GPU_TABLES:
            cols["pid"] = pa.array([st.host_pid] * t.num_rows, i64)
        if table == "memcpy" and st.copy_sizes and cols["bytes"].null_count:
            keys = pa.array(list(st.copy_sizes), i64)
            vals = pa.array(list(st.copy_sizes.values()), i64)
            looked = pc.take(vals, pc.index_in(cols["correlation_id"], value_set=keys))
            cols["bytes"] = pc.coalesce(cols["bytes"], looked)
        yield pa.table(cols)
        del t, cols
        p.unlink()


_NVTX_SQL = """
WITH r AS (
    SELECT seq + {offset} AS range_id, start_ns + {base} AS start_ns, end_ns + {base} AS end_ns,
           duration_ns, coalesce(pid, {host_pid}) AS pid, tid, style,
           CASE WHEN {tracekit} AND domain = 'pytorch.user_annotation'
                 AND (regexp_matches(name, {step_re}) OR regexp_matches(name, {phase_re}))
                THEN '{tk_domain}' ELSE domain END AS domain,
           name, category, input_dims, input_types, concrete_inputs, op_id, sequence_number
    FROM {src}
),
-- push/pop nesting per thread: +1 at each start, -1 at each end (ends before starts at equal
-- times; longer ranges first among equal starts); a zero-length range is a point (+0) inside
-- whatever is open. depth = ranges open just before the start; parent = the last range started
-- before it on the thread one level up (ASOF).
ev AS (
    SELECT pid, tid, start_ns AS t, CASE WHEN end_ns > start_ns THEN 1 ELSE 2 END AS kind,
           end_ns - start_ns AS len, range_id FROM r WHERE style = 'push/pop'
    UNION ALL
    SELECT pid, tid, end_ns, 0, 0, range_id FROM r WHERE style = 'push/pop' AND end_ns > start_ns
),
walk AS (
    SELECT range_id, pid, tid, kind,
           sum(CASE kind WHEN 1 THEN 1 WHEN 0 THEN -1 ELSE 0 END) OVER w
             - CASE kind WHEN 1 THEN 1 ELSE 0 END AS depth,
           row_number() OVER w AS pos
    FROM ev
    WINDOW w AS (PARTITION BY pid, tid ORDER BY t, kind, len DESC, range_id
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
opens AS (SELECT * FROM walk WHERE kind > 0),
nest AS (
    SELECT c.range_id, c.depth, p.range_id AS parent_range_id
    FROM opens c ASOF LEFT JOIN (SELECT * FROM opens WHERE kind = 1) p
      ON p.pid IS NOT DISTINCT FROM c.pid AND p.tid IS NOT DISTINCT FROM c.tid
     AND p.depth = c.depth - 1 AND c.pos > p.pos
)
SELECT r.start_ns, r.end_ns, r.duration_ns, false AS is_open, r.range_id, r.pid, r.tid,
       r.style, r.domain, r.name, r.category, CAST(n.depth AS INTEGER) AS depth,
       CASE WHEN n.depth > 0 THEN n.parent_range_id END AS parent_range_id,
       r.input_dims, r.input_types, r.concrete_inputs, r.op_id, r.sequence_number
FROM r LEFT JOIN nest n USING (range_id)
ORDER BY r.range_id
"""


def _nvtx_batches(parts: Parts, states: list[FileState], range_counter: list[int]):
    """nvtx_ranges of each trace: base time, host pid of GPU annotations, the tracekit domain,
    range IDs, push/pop depth and parent. Up to :data:`nesting.MAX_ROWS` ranges per trace, with
    pids and tids that fit :func:`nesting.thread_key`, are nested in memory with NumPy
    (:func:`_nvtx_numpy`); the others go through DuckDB (:data:`_NVTX_SQL`, which spills to
    disk), as in the nsys collector. Both give the same rows."""
    for st in states:
        files = [p for fi, p in parts.files["nvtx_ranges"] if fi == st.index]
        if not files:
            continue
        nested = _nest_in_memory(files, range_counter[0]) if st.nvtx_rows <= nesting.MAX_ROWS else None
        if nested is not None:
            yield from _nvtx_numpy(files, st, range_counter[0], *nested)
        else:
            yield from _nvtx_duckdb(files, parts, st, range_counter[0])
        range_counter[0] += st.nvtx_rows


def _nest_in_memory(files: list, offset: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Depth and parent range_id of every row of the parts (:func:`nesting.nest`, about 100
    bytes per range at the peak), or None when a pid or tid does not fit :func:`nesting.thread_key`."""
    cols = pq.read_table(files, columns=["pid", "tid", "start_ns", "end_ns", "seq", "style"])
    pid, tid = cols.column("pid"), cols.column("tid")
    key = nesting.thread_key(pid.fill_null(0).to_numpy(), pid.is_valid().to_numpy(zero_copy_only=False),
                             tid.fill_null(0).to_numpy(), tid.is_valid().to_numpy(zero_copy_only=False))
    if key is None:
        return None
    arrays = {
        "key": key,
        "start": cols.column("start_ns").to_numpy(),
        "end": cols.column("end_ns").to_numpy(),
        "end_valid": np.ones(len(cols), bool),
        "range_id": cols.column("seq").to_numpy() + offset,
        "pushpop": pc.equal(cols.column("style"), "push/pop").fill_null(False).to_numpy(zero_copy_only=False),
    }
    del cols, pid, tid, key
    nesting.release_free_memory()  # the streaming pass's freed buffers, before the nesting's peak
    depth, parent = nesting.nest(arrays)  # empties ``arrays``
    parent[depth <= 0] = nesting.NO_PARENT
    return depth, parent


def _nvtx_numpy(files: list, st: FileState, offset: int, depth: np.ndarray, parent: np.ndarray):
    """The in-memory path of :func:`_nvtx_batches`: the parts again, in order, each with its
    fix-ups and its slice of ``depth`` and ``parent`` (from :func:`_nest_in_memory`)."""
    base = pa.scalar(st.base_ns, i64)
    host = pa.scalar(st.host_pid, i64)
    at = 0
    for f in files:
        t = pq.read_table(f)
        n = len(t)
        try:
            start = pc.add_checked(t.column("start_ns"), base)
            end = pc.add_checked(t.column("end_ns"), base)
        except pa.ArrowInvalid:
            raise InputError("timestamps + baseTimeNanoseconds overflow int64 nanoseconds",
                             path=st.path) from None
        domain = t.column("domain")
        if st.has_tracekit_step:
            name = t.column("name")
            ours = pc.and_(pc.equal(domain, "pytorch.user_annotation"),
                           pc.or_(pc.match_substring_regex(name, TRACEKIT_STEP),
                                  pc.match_substring_regex(name, TRACEKIT_PHASE)))
            domain = pc.if_else(ours.fill_null(False), pa.scalar(TRACEKIT_DOMAIN, s), domain)
        d, p = depth[at:at + n], parent[at:at + n]
        yield pa.table({
            "start_ns": start, "end_ns": end, "duration_ns": t.column("duration_ns"),
            "is_open": pa.array(np.zeros(n, bool)), "range_id": pc.add(t.column("seq"), pa.scalar(offset, i64)),
            "pid": pc.coalesce(t.column("pid"), host), "tid": t.column("tid"), "style": t.column("style"),
            "domain": domain, "name": t.column("name"), "category": t.column("category"),
            "depth": pa.array(d, i32, mask=d < 0),
            "parent_range_id": pa.array(p, i64, mask=p == nesting.NO_PARENT),
            **{c: t.column(c) for c in ("input_dims", "input_types", "concrete_inputs", "op_id", "sequence_number")},
        })
        at += n
        del t


def _nvtx_duckdb(files: list, parts: Parts, st: FileState, offset: int):
    """The spilling path of :func:`_nvtx_batches`, for traces with more ranges than
    :data:`nesting.MAX_ROWS` or a pid/tid too large for :func:`nesting.thread_key`."""
    import duckdb

    files = [str(p) for p in files]
    src = "read_parquet([" + ", ".join(file_literal(f) for f in files) + "])"
    sql = _NVTX_SQL.format(
        offset=offset, base=st.base_ns,
        host_pid="NULL" if st.host_pid is None else st.host_pid,
        tracekit="true" if st.has_tracekit_step else "false",
        step_re=lit(TRACEKIT_STEP), phase_re=lit(TRACEKIT_PHASE),
        tk_domain=TRACEKIT_DOMAIN, src=src)
    con = scratch(memory_limit=DUCKDB_MEMORY_LIMIT, threads=DUCKDB_THREADS,
                  temp_directory=parts.root / "duckdb-tmp", settings=["preserve_insertion_order = true"])
    try:
        reader = con.sql(sql).to_arrow_reader(CHUNK_ROWS)
        yield from reader
    except duckdb.OutOfRangeException:
        raise InputError("timestamps + baseTimeNanoseconds overflow int64 nanoseconds",
                         path=st.path) from None
    finally:
        con.close()


_COLLECTIVES_SQL = """
WITH c AS (SELECT * FROM {src}),
-- the first record_param_comms operator of each External id (PyTorch gives the operator and the
-- NCCL kernel it launched the same External id)
ops AS (
    SELECT external_id,
           arg_min({{'collective': collective, 'dtype': dtype, 'in_elements': in_elements,
                     'out_elements': out_elements, 'group_size': group_size,
                     'process_group': process_group, 'peer_rank': peer_rank}}, seq) AS a,
           arg_min(pg_seq, seq) FILTER (WHERE pg_seq IS NOT NULL) AS pg_seq
    FROM c WHERE NOT kernel AND external_id IS NOT NULL AND collective IS NOT NULL
    GROUP BY external_id
),
k AS (
    SELECT k.seq, k.start_ns, k.device_id, k.stream_id, k.correlation_id,
           coalesce(k.pg_seq, o.pg_seq) AS pg_seq,
           CASE WHEN k.collective IS NOT NULL THEN 'kernel_args'
                WHEN o.a IS NOT NULL THEN 'record_param_comms' END AS source,
           CASE WHEN k.collective IS NOT NULL
                THEN {{'collective': k.collective, 'dtype': k.dtype, 'in_elements': k.in_elements,
                       'out_elements': k.out_elements, 'group_size': k.group_size,
                       'process_group': k.process_group, 'peer_rank': k.peer_rank}}
                ELSE o.a END AS a
    FROM c k LEFT JOIN ops o ON o.external_id = k.external_id
    WHERE k.kernel
)
SELECT k.start_ns + {base} AS start_ns, CAST({host_pid} AS BIGINT) AS pid, k.device_id, k.stream_id,
       k.correlation_id, k.a.collective AS collective, k.a.dtype AS dtype,
       CAST(d.element_bytes AS INTEGER) AS element_bytes,
       k.a.in_elements AS in_elements, k.a.out_elements AS out_elements,
       TRY_CAST(CAST(k.a.in_elements AS HUGEINT) * d.element_bytes AS BIGINT) AS in_bytes,
       TRY_CAST(CAST(k.a.out_elements AS HUGEINT) * d.element_bytes AS BIGINT) AS out_bytes,
       k.a.group_size AS group_size, k.a.process_group AS process_group, k.pg_seq AS seq,
       k.a.peer_rank AS peer_rank, k.source
FROM k LEFT JOIN dtype_bytes d ON d.dtype = lower(k.a.dtype)
ORDER BY k.seq
"""


def collectives_table(parts: Parts, states: list[FileState]) -> pa.Table:
    """The collectives table: one row per NCCL kernel whose size the trace records, from the
    kernel's own args (Collective name, In/Out msg nelems, dtype, Group size, Process Group Name)
    or, when the kernel has none, from the record_param_comms operator with the same External id.
    Bytes = elements x DTYPE_BYTES[dtype]. Counts per source go to ``st.comm_counts``. The result
    has one row per NCCL kernel at most, so it is built in memory."""
    import duckdb

    out = []
    for st in states:
        files = [str(p) for fi, p in parts.files["_comms"] if fi == st.index]
        if not files:
            continue
        src = "read_parquet([" + ", ".join(file_literal(f) for f in files) + "])"
        con = scratch(memory_limit=DUCKDB_MEMORY_LIMIT, threads=DUCKDB_THREADS,
                      temp_directory=parts.root / "duckdb-tmp")
        try:
            con.register("dtype_bytes", pa.table({"dtype": pa.array(list(DTYPE_BYTES), s),
                                                  "element_bytes": pa.array(list(DTYPE_BYTES.values()), i32)}))
            t = fetch_arrow(con.sql(_COLLECTIVES_SQL.format(
                src=src, base=st.base_ns, host_pid="NULL" if st.host_pid is None else st.host_pid)))
            kernels, ops = con.sql(f"SELECT count(*) FILTER (WHERE kernel), count(*) FILTER (WHERE NOT kernel) "
                                   f"FROM {src}").fetchall()[0]
        except duckdb.OutOfRangeException:
            raise InputError("timestamps + baseTimeNanoseconds overflow int64 nanoseconds",
                             path=st.path) from None
        finally:
            con.close()
        t = t.filter(pc.is_valid(t.column("source")))  # NCCL kernels with no size anywhere: no row
        source = t.column("source").to_pylist()
        st.comm_counts = {
            "nccl_kernels": int(kernels),
            "record_param_comms": int(ops),
            "from_kernel_args": source.count("kernel_args"),
            "from_record_param_comms": source.count("record_param_comms"),
            "unsized_dtype": t.filter(pc.is_null(t.column("element_bytes"))).num_rows,
        }
        out.append(t.drop_columns(["source"]))
    if not out:
        return schema.table("collectives").arrow_schema().empty_table()
    return pa.concat_tables(out)



def processes_table(states: list[FileState]) -> pa.Table:
    rows = {}
    for st in states:
        rank = trace_rank(st.metadata)
        pids = {p for p, _ in st.cpu_threads} | {p for p in st.api_pids}
        pids |= {p for p, lab in st.process_labels.items() if lab == "CPU"}
        pids.discard(None)
        for pid in sorted(pids):
            rows[pid] = (st.process_names.get(pid), rank)
    return pa.table({"pid": pa.array(list(rows), i64),
                     "name": pa.array([v[0] for v in rows.values()], s),
                     "rank": pa.array([v[1] for v in rows.values()], i32)})


def threads_table(states: list[FileState]) -> pa.Table:
    rows = {}
    for st in states:
        hosts = {p for p, _ in st.cpu_threads} | st.api_pids
        for key in st.cpu_threads:
            rows.setdefault(key, None)
        for (pid, tid), name in st.thread_names.items():
            if pid in hosts or st.process_labels.get(pid) == "CPU":
                m = THREAD_NAME.match(name)
                rows[(pid, tid)] = m.group(1) if m else name
    keys = sorted(k for k in rows if k[0] is not None and k[1] is not None)
    return pa.table({"pid": pa.array([k[0] for k in keys], i64),
                     "tid": pa.array([k[1] for k in keys], i64),
                     "name": pa.array([rows[k] for k in keys], s)})


def devices_table(states: list[FileState]) -> pa.Table:
    rows = {}
    for st in states:
        props = st.metadata.get("deviceProperties")
        for d in props if isinstance(props, list) else []:
            if not isinstance(d, dict):
                continue
            dev = to_int(d.get("id"))
            if dev is None or dev in rows:
                continue
            warp = to_int(d.get("warpSize"))
            threads = to_int(d.get("maxThreadsPerMultiprocessor"))
            major, minor = d.get("computeMajor"), d.get("computeMinor")
            rows[dev] = {
                "device_id": dev,
                "name": d.get("name"),
                "compute_capability": f"{major}.{minor}" if major is not None and minor is not None else None,
                "sm_count": to_int(d.get("numSms")),
                "global_memory_bytes": to_int(d.get("totalGlobalMem")),
                "l2_cache_bytes": to_int(d.get("l2CacheSize")),
                "max_warps_per_sm": threads // warp if threads and warp else None,
                "threads_per_warp": warp,
            }
    types = {"device_id": i32, "name": s, "compute_capability": s, "sm_count": i32,
             "global_memory_bytes": i64, "l2_cache_bytes": i64, "max_warps_per_sm": i32,
             "threads_per_warp": i32}
    vals = list(rows.values())
    return pa.table({c: pa.array([r[c] for r in vals], t) for c, t in types.items()})


def jsonable(v):
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [jsonable(x) for x in v]
    return v


def source_entry(st: FileState) -> dict:
    meta = {k: jsonable(v) for k, v in st.metadata.items() if k not in ("deviceProperties", "INFO")}
    dist = meta.get("distributedInfo") or {}
    return {
        "file": st.path.name,
        "rank": dist.get("rank"),
        "world_size": dist.get("world_size"),
        "backend": dist.get("backend"),
        "nccl_version": dist.get("nccl_version"),
        "base_time_ns": st.base_ns,
        "host_pid": st.host_pid,
        "trace_metadata": meta,
        "metadata_complete": st.metadata_complete,
        "events_by_category": dict(sorted(st.counts.items(), key=lambda kv: str(kv[0]))),
        "skipped": dict(sorted(st.skipped.items(), key=lambda kv: str(kv[0]))),
        "invalid_kernels": st.invalid_kernels,
        "invalid_kernel_names": dict(sorted(st.invalid_kernel_names.items())[:20]),
        "bad_timestamps": st.bad_timestamps,
        "strings_truncated": st.strings_truncated,
        "surrogates_replaced": st.surrogates_replaced,
        "flows": st.flow_counts,
        "collectives": st.comm_counts,
        "tracekit_ranges": st.has_tracekit_step,
    }
