"""Kineto collector, the end of each trace: fix-ups that need the whole file (base time written
after the events, the host pid of GPU work, ROCm copy sizes, the tracekit domain, push/pop
nesting, flow counts), run on the temporary Parquet parts with pyarrow or DuckDB (which spills
to disk), and the small tables (processes, threads, devices) and manifest entries."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tracekit.collectors.kineto_mapping import (
    THREAD_NAME,
    CHUNK_ROWS,
    DUCKDB_MEMORY_LIMIT,
    GPU_TABLES,
    TRACEKIT_DOMAIN,
    TRACEKIT_PHASE,
    TRACEKIT_STEP,
    FileState,
    to_int,
    Parts,
    i32,
    i64,
    s,
)

from tracekit.engine import fetch_arrow
from tracekit.errors import InputError


def file_base_ns(st: FileState) -> int:
    base = st.metadata.get("baseTimeNanoseconds")
    if base is None:
        return 0
    v = to_int(base)
    if v is None:
        raise InputError(f"baseTimeNanoseconds is not an integer: {base!r}", path=st.path)
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
    return "read_parquet([" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "])"


def flow_counts(parts: Parts, st: FileState) -> dict:
    """Counts of ac2g flows by which ends the trace has (computed by DuckDB: bounded memory)."""
    src = _flow_sql(parts, st)
    out = {"ac2g_flows": 0, "both_ends": 0, "start_only": 0, "finish_only": 0}
    if src is None:
        return out
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"SET memory_limit = '{DUCKDB_MEMORY_LIMIT}'")
        con.execute(f"SET temp_directory = {_sql_str(str(parts.root / 'duckdb-tmp'))}")
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
    import duckdb

    keys = pa.table({"_row": pa.array(range(len(cols["start_ns"])), i64),
                     "pid": cols["device_id"].cast(i64), "tid": cols["stream_id"],
                     "ts_ns": cols["start_ns"], "corr": cols["correlation_id"]})
    con = duckdb.connect()
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
           name, category
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
       CASE WHEN n.depth > 0 THEN n.parent_range_id END AS parent_range_id
FROM r LEFT JOIN nest n USING (range_id)
ORDER BY r.range_id
"""


def _nvtx_batches(parts: Parts, states: list[FileState], range_counter: list[int]):
    """nvtx_ranges of each trace through DuckDB (spills to disk: bounded memory): base time,
    host pid of GPU annotations, the tracekit domain, range IDs, push/pop depth and parent."""
    import duckdb

    for st in states:
        files = [str(p) for fi, p in parts.files["nvtx_ranges"] if fi == st.index]
        if not files:
            continue
        src = "read_parquet([" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "])"
        sql = _NVTX_SQL.format(
            offset=range_counter[0], base=st.base_ns,
            host_pid="NULL" if st.host_pid is None else st.host_pid,
            tracekit="true" if st.has_tracekit_step else "false",
            step_re=_sql_str(TRACEKIT_STEP), phase_re=_sql_str(TRACEKIT_PHASE),
            tk_domain=TRACEKIT_DOMAIN, src=src)
        con = duckdb.connect()
        try:
            con.execute(f"SET temp_directory = {_sql_str(str(parts.root / 'duckdb-tmp'))}")
            con.execute("SET preserve_insertion_order = true")
            con.execute(f"SET memory_limit = '{DUCKDB_MEMORY_LIMIT}'")
            reader = con.sql(sql).to_arrow_reader(CHUNK_ROWS)
            for batch in reader:
                yield batch
        except duckdb.OutOfRangeException:
            raise InputError("timestamps + baseTimeNanoseconds overflow int64 nanoseconds",
                             path=st.path) from None
        finally:
            con.close()
        range_counter[0] += st.nvtx_rows


def _sql_str(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def processes_table(states: list[FileState]) -> pa.Table:
    rows = {}
    for st in states:
        rank = to_int((st.metadata.get("distributedInfo") or {}).get("rank"))
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
        "flows": st.flow_counts,
        "tracekit_ranges": st.has_tracekit_step,
    }
