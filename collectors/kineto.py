"""PyTorch profiler (Kineto / CUPTI / roctracer) Chrome-trace JSON collector.

Reads ``.json``, ``.json.gz`` and ``*.pt.trace.json[.gz]`` traces (recognized by content) in one
streaming pass (:mod:`tracekit.collectors.kineto_reader`) and writes the same run-folder tables
as the nsys collector: ``kernels``, ``cuda_api``, ``memcpy``, ``memset``, ``cuda_sync``,
``nvtx_ranges`` (PyTorch operators and annotations, with a ``pytorch.*`` domain, or ``tracekit``
for the ranges of tracekit's own runners), ``processes``, ``threads``, ``devices``.

Several traces (one per rank) go into one run folder together. The mapping is documented in
docs/kineto.md; :func:`column_sources` feeds docs/schema.md.

Memory: events are turned into columns in chunks of :data:`CHUNK_ROWS` rows, written to
temporary Parquet parts in the run folder being built, and copied into the final tables at the
end with vectorized fix-ups that need the whole trace (``baseTimeNanoseconds`` written after the
events, the host pid of GPU activities, bytes of ROCm copies, the ``tracekit`` domain). Peak
memory does not grow with the trace's size.
"""

from __future__ import annotations

import re
import shutil
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracekit.collectors import kineto_reader as R
from tracekit.engine import fetch_arrow
from tracekit.errors import InputError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter, describe_input
from tracekit.workloads import annotate as _annotate

NAME = "kineto"
CHUNK_ROWS = 65536

# Domains of nvtx_ranges rows made from PyTorch events (category -> domain).
ANNOTATION_DOMAINS = {
    "cpu_op": "pytorch.cpu_op",
    "user_annotation": "pytorch.user_annotation",
    "gpu_user_annotation": "pytorch.gpu_user_annotation",
    "python_function": "pytorch.python_function",
}
TRACEKIT_DOMAIN = "tracekit"
# tracekit's runners name their record_function ranges exactly like their NVTX ranges (domain
# `tracekit`, convention in tracekit.workloads.annotate): `step N` / `step N (warmup)` per step,
# `data`, `forward`, `backward`, `optimizer`, `comm ...`. A user_annotation goes to domain
# `tracekit` when its trace has at least one user_annotation matching TRACEKIT_STEP and its own
# name matches TRACEKIT_STEP or TRACEKIT_PHASE (see docs/kineto.md).
TRACEKIT_STEP = _annotate.STEP_SQL_REGEX
TRACEKIT_PHASE = "^(" + "|".join(_annotate.PHASES) + ")$|^comm( .*)?$"

API_CATEGORIES = {"cuda_runtime": "runtime", "cuda_driver": "driver"}
SKIPPED_CATEGORIES = {"Trace", "ac2g", "fwdbwd"}
SYNC_TYPES = {
    "Stream Sync": "Stream synchronize",
    "Event Sync": "Event synchronize",
    "Context Sync": "Context synchronize",
    "Stream Wait Event": "Stream wait event",
}
_MEMCPY_NAME = re.compile(r"^Memcpy\s+(\w+)\s*(?:\((\w+)\s*->\s*(\w+)\))?")
_MEMSET_NAME = re.compile(r"^Memset\s*\((\w+)\)")
_THREAD_NAME = re.compile(r"^thread \d+ \((.*)\)$")

i32, i64, s, b = pa.int32(), pa.int64(), pa.string(), pa.bool_()

# column name -> Arrow type of the temporary parts (before the fix-ups).
_PART_COLUMNS = {
    "kernels": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "device_id": i32,
                "context_id": i64, "stream_id": i64, "correlation_id": i64, "name": s,
                "grid_x": i32, "grid_y": i32, "grid_z": i32, "block_x": i32, "block_y": i32,
                "block_z": i32, "registers_per_thread": i32},
    "cuda_api": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "pid": i64, "tid": i64,
                 "correlation_id": i64, "name": s, "api": s},
    "memcpy": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "device_id": i32,
               "context_id": i64, "stream_id": i64, "correlation_id": i64, "bytes": i64,
               "kind": s, "src_kind": s, "dst_kind": s, "src_device_id": i32, "dst_device_id": i32},
    "memset": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "device_id": i32,
               "context_id": i64, "stream_id": i64, "correlation_id": i64, "bytes": i64,
               "mem_kind": s},
    "cuda_sync": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "device_id": i32,
                  "context_id": i64, "stream_id": i64, "correlation_id": i64, "sync_type": s},
    "nvtx_ranges": {"seq": i64, "start_ns": i64, "end_ns": i64, "duration_ns": i64, "pid": i64,
                    "tid": i64, "style": s, "domain": s, "name": s, "category": s},
}
# ac2g flow ends: not a run-folder table; used for the manifest's flow counts and to find the
# correlation ID of a GPU activity whose args lack it (the flow end at the same track and time).
_FLOW_COLUMNS = {"id": i64, "is_start": b, "pid": i64, "tid": i64, "ts_ns": i64}
_ALL_PART_COLUMNS = {**_PART_COLUMNS, "_flows": _FLOW_COLUMNS}
GPU_TABLES = ("kernels", "memcpy", "memset", "cuda_sync")


def sniff(path: Path) -> bool:
    """A JSON object (plain or gzip) with ``traceEvents`` near its start, or named .json[.gz]."""
    return R.sniff_bytes(Path(path))


def column_sources() -> dict[tuple[str, str], str]:
    """{(table, column): where the value comes from in a Kineto trace}, for docs/schema.md."""
    ts = "ts (us) x 1000 + baseTimeNanoseconds"
    out = {}
    for t in ("kernels", "cuda_api", "memcpy", "memset", "cuda_sync", "nvtx_ranges"):
        out[(t, "start_ns")] = ts
        out[(t, "end_ns")] = "start_ns + dur (us) x 1000"
        out[(t, "duration_ns")] = "dur (us) x 1000"
    for t in GPU_TABLES:
        out[(t, "device_id")] = "args.device (else the event's pid)"
        out[(t, "context_id")] = "args.context"
        out[(t, "stream_id")] = "args.stream (else the event's tid)"
        out[(t, "correlation_id")] = "args.correlation (else the ac2g flow id)"
        out[(t, "pid")] = "pid of the trace's host process (the CPU events' pid)"
    out.update({
        ("kernels", "name"): "name of cat=kernel events",
        ("kernels", "grid_x"): "args.grid[0] (y, z: [1], [2])",
        ("kernels", "block_x"): "args.block[0] (y, z: [1], [2])",
        ("kernels", "registers_per_thread"): "args['registers per thread']",
        ("cuda_api", "name"): "name of cat=cuda_runtime / cuda_driver events",
        ("cuda_api", "api"): "'runtime' for cat=cuda_runtime, 'driver' for cat=cuda_driver",
        ("cuda_api", "correlation_id"): "args.correlation",
        ("memcpy", "bytes"): "args.bytes (ROCm: args.size of the API call with the same correlation)",
        ("memcpy", "kind"): "from the name 'Memcpy HtoD (Pageable -> Device)'",
        ("memset", "bytes"): "args.bytes",
        ("memset", "mem_kind"): "from the name 'Memset (Device)'",
        ("cuda_sync", "sync_type"): "args.cuda_sync_kind (else name), e.g. 'Stream Sync' -> 'Stream synchronize'",
        ("nvtx_ranges", "domain"): "pytorch.cpu_op / pytorch.user_annotation / pytorch.gpu_user_annotation / "
                                   "pytorch.python_function from cat; tracekit for tracekit's runner ranges",
        ("nvtx_ranges", "name"): "event name (operator or record_function name)",
        ("processes", "name"): "process_name metadata event",
        ("processes", "rank"): "distributedInfo.rank",
        ("threads", "name"): "thread_name metadata event ('thread N (NAME)' -> NAME)",
        ("devices", "name"): "deviceProperties[].name",
    })
    return out


# --- small converters (per event; kept lean) ----------------------------------------------

def _int(v):
    t = type(v)
    if t is int:
        return v
    if v is None or t is bool:
        return None
    if t is Decimal:
        return int(v) if v == v.to_integral_value() else None
    if t is str:
        v = v.strip()
        try:
            return int(v, 16) if v[:2].lower() == "0x" else int(v)
        except ValueError:
            return None
    if t is float:
        return int(v) if v.is_integer() else None
    return None


def _dim(v, i):
    if type(v) is list and len(v) > i:
        return _int(v[i])
    return None


class _Columns:
    """Column lists of one temporary part of one table."""

    __slots__ = ("table", "cols", "n")

    def __init__(self, table):
        self.table = table
        self.cols = {c: [] for c in _ALL_PART_COLUMNS[table]}
        self.n = 0


class _FileState:
    """What one trace file contributes besides its events: metadata events, counters."""

    def __init__(self, index: int, path: Path):
        self.index = index
        self.path = path
        self.process_names: dict[int, str] = {}
        self.process_labels: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.cpu_threads: set[tuple[int, int]] = set()
        self.api_pids: set[int] = set()
        self.copy_sizes: dict[int, int] = {}  # correlation -> bytes, from API args (ROCm)
        self.flow_counts: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        self.invalid_kernels = 0
        self.invalid_kernel_names: dict[str, int] = {}
        self.bad_timestamps = 0
        self.has_tracekit_step = False
        self.nvtx_rows = 0
        self.metadata: dict = {}
        self.metadata_complete = True


class _Parts:
    """Temporary Parquet parts under the run folder being written, per table and file."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir()
        self.files: dict[str, list[tuple[int, Path]]] = {t: [] for t in _ALL_PART_COLUMNS}
        self.n = 0
        self.current: Path | None = None  # the trace being read, for error messages

    def flush(self, cols: _Columns, file_index: int):
        if not cols.n:
            return
        types = _ALL_PART_COLUMNS[cols.table]
        try:
            batch = pa.RecordBatch.from_arrays(
                [pa.array(v, type=types[c]) for c, v in cols.cols.items()], names=list(types))
        except (pa.ArrowInvalid, OverflowError) as exc:
            raise InputError(f"a value does not fit table {cols.table} ({exc})", path=self.current) from None
        self.n += 1
        p = self.root / f"{cols.table}-{file_index}-{self.n}.parquet"
        pq.write_table(pa.Table.from_batches([batch]), p, compression="lz4")
        self.files[cols.table].append((file_index, p))
        for v in cols.cols.values():
            v.clear()
        cols.n = 0


def _read_file(st: _FileState, parts: _Parts, progress: Progress, range_counter: list[int]) -> None:
    """One streaming pass over one trace: fill parts and ``st``."""
    path = st.path
    parts.current = path
    advance = progress.task(f"kineto {path.name[:40]:<40}", total=path.stat().st_size)
    stream = R.TraceStream(path, on_bytes=advance)
    tabs = {t: _Columns(t) for t in _ALL_PART_COLUMNS}
    FL = tabs["_flows"]
    K, A, MC, MS, SY, NV = (tabs[t] for t in ("kernels", "cuda_api", "memcpy", "memset", "cuda_sync", "nvtx_ranges"))
    counts = st.counts
    skipped = st.skipped
    to_ns = R.to_ns
    step_re = re.compile(TRACEKIT_STEP)
    fi = st.index

    def gpu_common(c, e, a, start, dur):
        c["start_ns"].append(start)
        c["end_ns"].append(start + dur)
        c["duration_ns"].append(dur)
        dev = a.get("device")
        c["device_id"].append(_int(dev) if dev is not None else _int(e.get("pid")))
        c["context_id"].append(_int(a.get("context")))
        stream_id = a.get("stream")
        c["stream_id"].append(_int(stream_id) if stream_id is not None else _int(e.get("tid")))
        corr = a.get("correlation")
        c["correlation_id"].append(_int(corr))

    for e in stream:
        ph = e.get("ph")
        if ph == "X":
            cat = e.get("cat")
            try:
                start = to_ns(e.get("ts"))
                dur = to_ns(e.get("dur")) or 0
            except ValueError:
                st.bad_timestamps += 1
                continue
            if start is None:
                st.bad_timestamps += 1
                continue
            a = e.get("args") or {}
            if cat == "kernel":
                name = e.get("name") or ""
                if start == 0 and dur == 0:
                    st.invalid_kernels += 1
                    st.invalid_kernel_names[name] = st.invalid_kernel_names.get(name, 0) + 1
                    continue
                c = K.cols
                gpu_common(c, e, a, start, dur)
                c["name"].append(name)
                g = a.get("grid")
                bl = a.get("block")
                c["grid_x"].append(_dim(g, 0))
                c["grid_y"].append(_dim(g, 1))
                c["grid_z"].append(_dim(g, 2))
                c["block_x"].append(_dim(bl, 0))
                c["block_y"].append(_dim(bl, 1))
                c["block_z"].append(_dim(bl, 2))
                c["registers_per_thread"].append(_int(a.get("registers per thread")))
                K.n += 1
                if K.n >= CHUNK_ROWS:
                    parts.flush(K, fi)
            elif cat in API_CATEGORIES:
                c = A.cols
                pid = _int(e.get("pid"))
                c["start_ns"].append(start)
                c["end_ns"].append(start + dur)
                c["duration_ns"].append(dur)
                c["pid"].append(pid)
                c["tid"].append(_int(e.get("tid")))
                corr = _int(a.get("correlation"))
                c["correlation_id"].append(corr)
                c["name"].append(e.get("name") or "")
                c["api"].append(API_CATEGORIES[cat])
                st.api_pids.add(pid)
                size = a.get("size") if "bytes" not in a else a.get("bytes")
                if size is not None and corr is not None:
                    st.copy_sizes[corr] = _int(size)
                A.n += 1
                if A.n >= CHUNK_ROWS:
                    parts.flush(A, fi)
            elif cat == "gpu_memcpy":
                c = MC.cols
                gpu_common(c, e, a, start, dur)
                name = e.get("name") or ""
                m = _MEMCPY_NAME.match(name)
                kind = a.get("kind") if type(a.get("kind")) is str and not a.get("kind").isdigit() else None
                c["kind"].append(kind or (m.group(1) if m else "Unknown"))
                c["src_kind"].append(m.group(2) if m else None)
                c["dst_kind"].append(m.group(3) if m else None)
                c["bytes"].append(_int(a.get("bytes")))
                c["src_device_id"].append(_int(a.get("fromDevice", a.get("src device"))))
                c["dst_device_id"].append(_int(a.get("toDevice", a.get("dst device"))))
                MC.n += 1
                if MC.n >= CHUNK_ROWS:
                    parts.flush(MC, fi)
            elif cat == "gpu_memset":
                c = MS.cols
                gpu_common(c, e, a, start, dur)
                m = _MEMSET_NAME.match(e.get("name") or "")
                c["mem_kind"].append(m.group(1) if m else None)
                c["bytes"].append(_int(a.get("bytes")))
                MS.n += 1
                if MS.n >= CHUNK_ROWS:
                    parts.flush(MS, fi)
            elif cat == "cuda_sync":
                c = SY.cols
                gpu_common(c, e, a, start, dur)
                kind = a.get("cuda_sync_kind") or e.get("name") or ""
                c["sync_type"].append(SYNC_TYPES.get(kind, kind))
                SY.n += 1
                if SY.n >= CHUNK_ROWS:
                    parts.flush(SY, fi)
            elif cat in ANNOTATION_DOMAINS:
                c = NV.cols
                name = e.get("name") or ""
                c["seq"].append(st.nvtx_rows)
                st.nvtx_rows += 1
                c["start_ns"].append(start)
                c["end_ns"].append(start + dur)
                c["duration_ns"].append(dur)
                c["name"].append(name)
                c["domain"].append(ANNOTATION_DOMAINS[cat])
                if cat == "gpu_user_annotation":
                    c["pid"].append(None)  # the host pid, filled at the end
                    c["tid"].append(None)
                    c["style"].append("start/end")
                    c["category"].append(f"device {_int(a.get('device', e.get('pid')))} "
                                         f"stream {_int(a.get('stream', e.get('tid')))}")
                else:
                    pid, tid = _int(e.get("pid")), _int(e.get("tid"))
                    c["pid"].append(pid)
                    c["tid"].append(tid)
                    c["style"].append("push/pop")
                    c["category"].append(None)
                    st.cpu_threads.add((pid, tid))
                    if cat == "user_annotation" and not st.has_tracekit_step and step_re.match(name):
                        st.has_tracekit_step = True
                NV.n += 1
                if NV.n >= CHUNK_ROWS:
                    parts.flush(NV, fi)
            else:
                skipped[cat] = skipped.get(cat, 0) + 1
                continue
            counts[cat] = counts.get(cat, 0) + 1
        elif ph == "M":
            _metadata_event(st, e)
        elif ph == "s" or ph == "f":
            if e.get("cat") == "ac2g":
                try:
                    ts = to_ns(e.get("ts"))
                except ValueError:
                    ts = None
                c = FL.cols
                c["id"].append(_int(e.get("id")))
                c["is_start"].append(ph == "s")
                c["pid"].append(_int(e.get("pid")))
                c["tid"].append(_int(e.get("tid")))
                c["ts_ns"].append(ts)
                FL.n += 1
                if FL.n >= CHUNK_ROWS:
                    parts.flush(FL, fi)
        else:
            key = f"ph={ph}"
            skipped[key] = skipped.get(key, 0) + 1
    for c in tabs.values():
        parts.flush(c, fi)
    st.metadata = stream.metadata
    st.metadata_complete = stream.metadata_complete


def _metadata_event(st: _FileState, e: dict) -> None:
    name = e.get("name")
    a = e.get("args") or {}
    pid = _int(e.get("pid"))
    if pid is None:
        return
    if name == "process_name":
        st.process_names[pid] = str(a.get("name", ""))
    elif name == "process_labels":
        st.process_labels[pid] = str(a.get("labels", ""))
    elif name == "thread_name":
        tid = _int(e.get("tid"))
        if tid is not None:
            st.thread_names[(pid, tid)] = str(a.get("name", ""))


# --- finishing: fix-ups that need the whole trace ----------------------------------------

def _base_ns(st: _FileState) -> int:
    base = st.metadata.get("baseTimeNanoseconds")
    if base is None:
        return 0
    v = _int(base)
    if v is None:
        raise InputError(f"baseTimeNanoseconds is not an integer: {base!r}", path=st.path)
    return v


def _host_pid(st: _FileState) -> int | None:
    cpu = {p for p in st.api_pids if p is not None} or {p for p, _ in st.cpu_threads if p is not None}
    if not cpu:
        cpu = {p for p, lab in st.process_labels.items() if lab == "CPU"}
    return next(iter(cpu)) if len(cpu) == 1 else None


def _flow_sql(parts: _Parts, st: _FileState) -> str | None:
    files = [str(p) for fi, p in parts.files["_flows"] if fi == st.index]
    if not files:
        return None
    return "read_parquet([" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "])"


def _flow_counts(parts: _Parts, st: _FileState) -> dict:
    """Counts of ac2g flows by which ends the trace has (computed by DuckDB: bounded memory)."""
    src = _flow_sql(parts, st)
    out = {"ac2g_flows": 0, "both_ends": 0, "start_only": 0, "finish_only": 0}
    if src is None:
        return out
    import duckdb

    con = duckdb.connect()
    try:
        row = con.sql(
            "SELECT count(*), count(*) FILTER (WHERE s > 0 AND f > 0), "
            "count(*) FILTER (WHERE s > 0 AND f = 0), count(*) FILTER (WHERE s = 0 AND f > 0) "
            "FROM (SELECT id, count(*) FILTER (WHERE is_start) AS s, "
            f"count(*) FILTER (WHERE NOT is_start) AS f FROM {src} GROUP BY id)").fetchall()[0]
    finally:
        con.close()
    return dict(zip(out, (int(v or 0) for v in row)))


def _correlation_from_flows(cols: dict, parts: _Parts, st: _FileState):
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


def _fixed_batches(table: str, parts: _Parts, states: list[_FileState], range_counter: list[int]):
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


def _nvtx_batches(parts: _Parts, states: list[_FileState], range_counter: list[int]):
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


def _processes(states: list[_FileState]) -> pa.Table:
    rows = {}
    for st in states:
        rank = _int((st.metadata.get("distributedInfo") or {}).get("rank"))
        pids = {p for p, _ in st.cpu_threads} | {p for p in st.api_pids}
        pids |= {p for p, lab in st.process_labels.items() if lab == "CPU"}
        pids.discard(None)
        for pid in sorted(pids):
            rows[pid] = (st.process_names.get(pid), rank)
    return pa.table({"pid": pa.array(list(rows), i64),
                     "name": pa.array([v[0] for v in rows.values()], s),
                     "rank": pa.array([v[1] for v in rows.values()], i32)})


def _threads(states: list[_FileState]) -> pa.Table:
    rows = {}
    for st in states:
        hosts = {p for p, _ in st.cpu_threads} | st.api_pids
        for key in st.cpu_threads:
            rows.setdefault(key, None)
        for (pid, tid), name in st.thread_names.items():
            if pid in hosts or st.process_labels.get(pid) == "CPU":
                m = _THREAD_NAME.match(name)
                rows[(pid, tid)] = m.group(1) if m else name
    keys = sorted(k for k in rows if k[0] is not None and k[1] is not None)
    return pa.table({"pid": pa.array([k[0] for k in keys], i64),
                     "tid": pa.array([k[1] for k in keys], i64),
                     "name": pa.array([rows[k] for k in keys], s)})


def _devices(states: list[_FileState]) -> pa.Table:
    rows = {}
    for st in states:
        for d in st.metadata.get("deviceProperties") or []:
            dev = _int(d.get("id"))
            if dev is None or dev in rows:
                continue
            warp = _int(d.get("warpSize"))
            threads = _int(d.get("maxThreadsPerMultiprocessor"))
            major, minor = d.get("computeMajor"), d.get("computeMinor")
            rows[dev] = {
                "device_id": dev,
                "name": d.get("name"),
                "compute_capability": f"{major}.{minor}" if major is not None and minor is not None else None,
                "sm_count": _int(d.get("numSms")),
                "global_memory_bytes": _int(d.get("totalGlobalMem")),
                "l2_cache_bytes": _int(d.get("l2CacheSize")),
                "max_warps_per_sm": threads // warp if threads and warp else None,
                "threads_per_warp": warp,
            }
    types = {"device_id": i32, "name": s, "compute_capability": s, "sm_count": i32,
             "global_memory_bytes": i64, "l2_cache_bytes": i64, "max_warps_per_sm": i32,
             "threads_per_warp": i32}
    vals = list(rows.values())
    return pa.table({c: pa.array([r[c] for r in vals], t) for c, t in types.items()})


def _jsonable(v):
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def _source_entry(st: _FileState) -> dict:
    meta = {k: _jsonable(v) for k, v in st.metadata.items() if k not in ("deviceProperties", "INFO")}
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
        "events_by_category": dict(sorted(st.counts.items())),
        "skipped": dict(sorted(st.skipped.items())),
        "invalid_kernels": st.invalid_kernels,
        "invalid_kernel_names": dict(sorted(st.invalid_kernel_names.items())[:20]),
        "bad_timestamps": st.bad_timestamps,
        "flows": st.flow_counts,
        "tracekit_ranges": st.has_tracekit_step,
    }


def collect(paths: list[Path], writer: RunWriter, progress: Progress = NULL_PROGRESS) -> None:
    """Convert one or more Kineto traces (e.g. one per rank) into ``writer``'s run folder.

    Raises :class:`InputError` for a file that is not JSON, is truncated, has no traceEvents
    array, or has a malformed ``baseTimeNanoseconds``.
    """
    paths = [Path(p) for p in paths]
    states = [_FileState(i, p) for i, p in enumerate(paths)]
    parts = _Parts(writer.path / ".kineto-parts")
    range_counter = [1]
    try:
        for st in states:
            writer.manifest["inputs"].append(describe_input(st.path, "kineto-json"))
            _read_file(st, parts, progress, range_counter)
            st.base_ns = _base_ns(st)
            st.flow_counts = _flow_counts(parts, st)
            st.host_pid = _host_pid(st)
            if st.host_pid is None and (parts.files["kernels"] or parts.files["memcpy"]):
                writer.warn(f"{st.path.name}: several host processes; GPU activities have no pid")
            if not st.metadata_complete:
                writer.warn(f"{st.path.name}: the metadata after traceEvents was not found "
                            "(more than 8 MiB of it?); baseTimeNanoseconds may be missing")
        has_gpu = any(st.counts.get(c) for st in states for c in ("kernel", "cuda_runtime", "cuda_driver",
                                                                   "gpu_memcpy", "gpu_memset", "cuda_sync"))
        has_gpu = has_gpu or any(st.metadata.get("deviceProperties") for st in states)
        for table in _PART_COLUMNS:
            if table in GPU_TABLES + ("cuda_api",) and not has_gpu:
                writer.not_captured(table, "CPU-only trace: no GPU activities were recorded (no CUPTI)")
                continue
            writer.write_table(table, _fixed_batches(table, parts, states, range_counter))
        writer.write_table("processes", [_processes(states)])
        writer.write_table("threads", [_threads(states)])
        if any(st.metadata.get("deviceProperties") for st in states):
            writer.write_table("devices", [_devices(states)])
        else:
            writer.not_captured("devices", "trace has no deviceProperties")
        for t in ("nvtx_marks", "osrt_api", "cpu_thread_state", "gpu_metrics"):
            writer.not_captured(t, "not recorded by the PyTorch profiler")
    finally:
        shutil.rmtree(parts.root, ignore_errors=True)
    ranks = [(st.metadata.get("distributedInfo") or {}).get("rank") for st in states]
    writer.manifest["sources"][NAME] = {
        "format": "kineto-json",
        "clock": "start_ns/end_ns are Unix epoch ns: ts (us) x 1000 + baseTimeNanoseconds when the "
                 "trace has it (Kineto's ts are then relative to it), else ts x 1000",
        "files": [_source_entry(st) for st in states],
        "invalid_kernels": sum(st.invalid_kernels for st in states),
        "ranks": [_jsonable(r) for r in ranks],
        "world_size": _jsonable(next(((st.metadata.get("distributedInfo") or {}).get("world_size")
                                      for st in states if (st.metadata.get("distributedInfo") or {}).get("world_size")), None)),
    }
