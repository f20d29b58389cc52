"""Nsight Systems collector: SQLite exports (and .nsys-rep/.qdrep reports via the local nsys).

Reads every table listed in :mod:`tracekit.collectors.nsys_mapping` in Arrow batches (memory does
not grow with the export's size; no Python work per row) and writes the run-folder tables.
Structural steps that need all rows of a table in order (NVTX nesting, scheduler intervals) run
in DuckDB over the decoded batches, with a memory limit and spilling to a work folder inside the
temporary run folder (removed before the run folder is renamed into place).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.collectors import nsys_mapping as M
from tracekit.collectors import nsys_versions
from tracekit.collectors.sqlite_export import Export, TypeMismatch, decode_utf8, is_sqlite
from tracekit.errors import InputError, MissingTableError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter, describe_input
from tracekit.schema import table as schema_table

NAME = "nsys"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
DUCKDB_MEMORY_LIMIT = "512MB"
OUT_BATCH_ROWS = 65536


def sniff(path: Path) -> bool:
    """An SQLite file (any: a non-nsys SQLite gets a precise error in :func:`collect`) or an
    nsys report by its suffix."""
    return path.suffix in REPORT_SUFFIXES or is_sqlite(path)


def column_sources() -> dict[tuple[str, str], str]:
    """{(table, column): where the value comes from in nsys exports}, for docs/schema.md."""
    out = {}
    for m in M.TABLE_MAPS.values():
        src = " or ".join(m.sources)
        for c, alts in m.columns.items():
            if not c.startswith("_"):
                out[(m.table, c)] = "; else ".join(a.describe(src) for a in alts)
        for c, text in m.computed.items():
            out[(m.table, c)] = text
    return out


# -- per-export context: event types and small lookup dictionaries ----------------------------

class _Context:
    """What decoding needs beyond a row: NVTX event type ids, lookup dictionaries, enums."""

    def __init__(self, export: Export):
        self.export = export
        self._lookups: dict[str, dict[int, str]] = {}
        self.event_types = dict(M.FALLBACK_EVENT_TYPES)
        if export.has("ENUM_NSYS_EVENT_TYPE", "id", "name"):
            for i, name in export.rows("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE"):
                if name in self.event_types:
                    self.event_types[name] = int(i)

    def types(self, names: tuple[str, ...]) -> str:
        return ", ".join(str(self.event_types[n]) for n in names)

    def where(self, clause: str) -> str:
        return clause.format(**self.event_types)

    def lookup(self, name: str) -> dict[int, str]:
        if name not in self._lookups:
            self._lookups[name] = getattr(self, f"_lookup_{name}")()
        return self._lookups[name]

    def _nvtx_names(self, types: tuple[str, ...], key_sql: str) -> dict[int, str]:
        ex = self.export
        if not ex.has("NVTX_EVENTS", "eventType", "globalTid"):
            return {}
        text = M.NVTX_TEXT if ex.has("NVTX_EVENTS", "textId", "text") else M.NVTX_TEXT_OLD
        # the first (earliest) naming event of each key wins, as nsys stats does for domains
        rows = ex.rows(f"SELECT {key_sql}, {text.sql} FROM NVTX_EVENTS AS t "
                       f"WHERE t.eventType IN ({self.types(types)}) ORDER BY t.start DESC")
        return {int(k): v for k, v in rows if k is not None}

    def _lookup_nvtx_domain(self) -> dict[int, str]:
        if not self.export.has("NVTX_EVENTS", "domainId"):
            return {}
        return self._nvtx_names(M.NVTX_DOMAIN_TYPES, M.NVTX_DOMAIN_KEY.sql)

    def _lookup_nvtx_category(self) -> dict[int, str]:
        if not self.export.has("NVTX_EVENTS", "domainId", "category"):
            return {}
        return self._nvtx_names(M.NVTX_CATEGORY_TYPES, M.NVTX_CATEGORY_KEY.sql)

    def _lookup_gpu_metric(self) -> dict[int, str]:
        if not self.export.has("TARGET_INFO_GPU_METRICS", "typeId", "metricId", "metricName"):
            return {}
        rows = self.export.rows("SELECT (typeId << 32) | (metricId & 4294967295), metricName "
                                "FROM TARGET_INFO_GPU_METRICS")
        return {int(k): str(v) for k, v in rows}

    def _lookup_cuda_device(self) -> dict[int, str]:
        """GPU id -> CUDA device ordinal (as text, cast back by the schema)."""
        ex = self.export
        out: dict[int, str] = {}
        if ex.has("TARGET_INFO_GPU", "id", "cuDevice"):
            for gid, cu in ex.rows("SELECT id, cuDevice FROM TARGET_INFO_GPU"):
                out[int(gid)] = str(cu if cu is not None else gid)
        if ex.has("TARGET_INFO_CUDA_DEVICE", "gpuId", "cudaId"):
            for gid, cu in ex.rows("SELECT gpuId, min(cudaId) FROM TARGET_INFO_CUDA_DEVICE GROUP BY gpuId"):
                if gid is not None:
                    out[int(gid)] = str(cu)
        return out


# -- decoding -------------------------------------------------------------------------------

def _kind(t: pa.DataType | None, decode: str) -> str:
    if decode == "text":
        return "blob"
    if decode != "raw":
        return "int"
    if t is not None and pa.types.is_floating(t):
        return "float"
    if t is not None and pa.types.is_string(t):
        return "blob"
    return "int"


def _decode_enum(arr: pa.Array, mapping: dict[int, str]) -> pa.Array:
    keys = pa.array(list(mapping), pa.int64())
    values = pa.array(list(mapping.values()), pa.string())
    idx = pc.index_in(arr, value_set=keys)
    out = pc.take(values, idx)
    unknown = pc.and_(pc.is_null(idx), pc.is_valid(arr))
    if pc.any(unknown).as_py():
        out = pc.if_else(unknown, arr.cast(pa.string()), out)
    return out


def _decode_lookup(arr: pa.Array, name: str, ctx: _Context) -> pa.Array:
    """Keys (int64, computed in SQL) -> names; keys without an entry get a visible label."""
    mapping = ctx.lookup(name)
    out = _decode_enum(arr, mapping) if mapping else arr.cast(pa.string())
    missing = pc.and_(pc.is_valid(arr), pc.invert(pc.is_in(arr, value_set=pa.array(list(mapping), pa.int64()))))
    if not pc.any(missing).as_py():
        return out
    low = pc.bit_wise_and(arr, pa.scalar(0xFFFFFFFF, pa.int64()))
    if name == "nvtx_domain":  # domain 0 is the default domain
        label = pc.if_else(pc.equal(low, 0), pa.scalar("", pa.string()),
                           pc.binary_join_element_wise("<unknown domain ", low.cast(pa.string()), ">", ""))
    elif name == "nvtx_category":  # an unnamed category is shown by its number
        label = low.cast(pa.string())
    elif name == "cuda_device":  # no mapping: the GPU id
        label = arr.cast(pa.string())
    else:
        label = pc.binary_join_element_wise(f"<unknown {name} ", low.cast(pa.string()), ">", "")
    return pc.if_else(missing, label, out)


def _decode_style(arr: pa.Array, ctx: _Context) -> pa.Array:
    pushpop = pa.array([ctx.event_types[n] for n in M.NVTX_PUSHPOP_TYPES], pa.int64())
    return pc.if_else(pc.is_in(arr, value_set=pushpop), pa.scalar("push/pop"), pa.scalar("start/end"))


def _from_sql(export: Export, table: str, numeric: set[str]) -> str:
    """``table`` with each column in ``numeric`` made NULL where it does not hold a number (text
    or blob in a damaged or hand-edited export: SQLite would cast 'abc' to 0) or holds a real
    outside int64. Other columns pass through. SQLite flattens this subquery."""
    if not numeric:
        return f'"{table}"'
    cols = ['rowid AS "rowid"']  # range_id and the scheduler order use the source rowid
    for c in export.columns[table]:
        if c in numeric:
            cols.append(f"CASE typeof(\"{c}\") WHEN 'integer' THEN \"{c}\" WHEN 'real' THEN "
                        f"CASE WHEN abs(\"{c}\") < 9.2e18 THEN \"{c}\" END END AS \"{c}\"")
        else:
            cols.append(f'"{c}"')
    return f'(SELECT {", ".join(cols)} FROM "{table}")'


def _relabel(arr: pa.Array, mapping: dict[str, str]) -> pa.Array:
    """Rename decoded labels listed in ``mapping`` (see nsys_mapping.RELABEL); others stay."""
    keys = pa.array(list(mapping), pa.string())
    vals = pa.array(list(mapping.values()), pa.string())
    idx = pc.index_in(arr, value_set=keys)
    return pc.if_else(pc.is_null(idx), arr, pc.take(vals, idx))


class _TablePlan:
    """The resolved reading plan of one table for one export."""

    def __init__(self, export: Export, tmap: M.TableMap, ctx: _Context):
        self.tmap = tmap
        self.ctx = ctx
        self.source = next((s for s in tmap.sources if s in export.columns), None)
        self.select: list[tuple[str, str, str]] = []
        self.decoders: dict[str, str] = {}
        self.missing: list[str] = []
        self.numeric: set[str] = set()  # source columns read as numbers (sanitized by _from_sql)
        self.required: dict[str, tuple[str, ...]] = {}
        if self.source is None:
            return
        tdef = schema_table(tmap.table)
        for name, alts in tmap.columns.items():
            chosen = next((a for a in alts if self._available(export, a)), None)
            if chosen is None:
                self.missing.append(name)
                chosen = M.null()
            ctype = None if name.startswith("_") else tdef.column(name).type
            self.select.append((name, chosen.sql, _kind(ctype, chosen.decode)))
            self.decoders[name] = chosen.decode
            if self.select[-1][2] != "blob":
                self.numeric.update(n for n in chosen.needs if "." not in n)
            if ctype is not None and tdef.column(name).required:
                self.required[name] = chosen.needs
        computed = set(tmap.computed)
        for c in tdef.columns:
            if c.required and c.name not in self.decoders and c.name not in computed:
                raise InputError(
                    f"table {self.source} lacks the column(s) needed for {tmap.table}.{c.name}",
                    path=export.path)

    def _available(self, export: Export, expr: M.Expr) -> bool:
        for need in expr.needs:
            tab, _, column = need.rpartition(".")
            if not export.has(tab or self.source, column):
                return False
        return True

    @property
    def where(self) -> str:
        return self.ctx.where(self.tmap.where) if self.tmap.where else ""

    def count(self, export: Export) -> int:
        where = f" WHERE {self.where}" if self.where else ""
        return export.rows(f'SELECT count(*) FROM "{self.source}" AS t{where}')[0][0]

    def batches(self, export: Export, advance: Callable[[int], None], strict: bool = False,
                threads: int = 1) -> Iterator[pa.RecordBatch]:
        """Decoded batches of this table, in source rowid order. ``strict`` reads numbers
        unguarded (raises :class:`TypeMismatch` on a value of another type); ``threads`` > 1
        splits a large table into rowid ranges read ahead on that many threads."""
        source = f'"{self.source}"' if strict else _from_sql(export, self.source, self.numeric)
        conds = [self.where] if self.where else []
        ranges = export.rowid_ranges(self.source) if threads > 1 else None
        if ranges:
            sqls = [f"{source} AS t WHERE " + " AND ".join([f"t.rowid > {lo} AND t.rowid <= {hi}"] + conds)
                    for lo, hi in ranges]
        else:
            sqls = [f"{source} AS t" + (f" WHERE {conds[0]}" if conds else "")]
        for batch in export.scan_ranges(self.select, sqls, threads, strict=strict):
            for name, needs in self.required.items():
                if batch.column(name).null_count:
                    raise InputError(
                        f"table {self.source}: {batch.column(name).null_count} row(s) with a NULL or "
                        f"non-numeric {'/'.join(needs) or name} (needed for {self.tmap.table}.{name})",
                        path=export.path)
            cols = {}
            for name in batch.schema.names:
                arr = batch.column(name)
                dec = self.decoders[name]
                if dec == "string":
                    arr = export.resolve_strings(arr)
                elif dec == "string_api":
                    arr = pc.replace_substring_regex(export.resolve_strings(arr), r"_v\d{4,5}$", "")
                elif dec == "text":
                    arr = decode_utf8(arr)
                elif dec == "bool":
                    arr = pc.not_equal(arr, 0)
                elif dec == "nvtx_style":
                    arr = _decode_style(arr, self.ctx)
                elif dec.startswith("lookup:"):
                    arr = _decode_lookup(arr, dec[7:], self.ctx)
                elif dec.startswith("enum:"):
                    tab = dec[5:]
                    arr = _decode_enum(arr, export.enum(tab, M.FALLBACK_ENUMS.get(tab)))
                    relabel = M.RELABEL.get((self.tmap.table, name))
                    if relabel:
                        arr = _relabel(arr, relabel)
                elif pa.types.is_binary(arr.type):
                    arr = decode_utf8(arr)
                cols[name] = arr
            advance(batch.num_rows)
            yield pa.RecordBatch.from_pydict(cols)


# -- structural steps (DuckDB, spilling to disk) ----------------------------------------------

class _Work:
    """A DuckDB database in a work folder; batches are loaded into table ``src``."""

    def __init__(self, folder: Path):
        import duckdb

        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(str(folder / "work.duckdb"))
        self.con.execute(f"SET memory_limit = '{DUCKDB_MEMORY_LIMIT}'")
        self.con.execute(f"SET temp_directory = '{folder / 'spill'}'")
        self.con.execute("SET threads = 4")
        self.con.execute("SET enable_progress_bar = false")
        self.con.execute("SET preserve_insertion_order = false")

    def load(self, batches: Iterable[pa.RecordBatch], columns: list[str] | None = None) -> bool:
        """Insert ``batches`` (only ``columns`` when given) into table ``src``."""
        created = False
        for b in batches:
            if columns is not None:
                b = b.select(columns)
            self.con.register("batch_view", b)
            if created:
                self.con.execute("INSERT INTO src SELECT * FROM batch_view")
            else:
                self.con.execute("CREATE TABLE src AS SELECT * FROM batch_view")
                created = True
            self.con.unregister("batch_view")
        return created

    def stream(self, sql: str) -> Iterator[pa.RecordBatch]:
        rel = self.con.sql(sql)
        fn = getattr(rel, "to_arrow_reader", None) or rel.record_batch
        reader = fn(OUT_BATCH_ROWS)
        for b in reader:
            yield _plain_strings(b)

    def close(self):
        self.con.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _plain_strings(b: pa.RecordBatch) -> pa.RecordBatch:
    """DuckDB may hand strings back as string_view; the schema wants plain strings."""
    cols = []
    for a in b.columns:
        if pa.types.is_string_view(a.type) or pa.types.is_large_string(a.type):
            a = a.cast(pa.string())
        cols.append(a)
    return pa.RecordBatch.from_arrays(cols, names=b.schema.names)


_BIG = 9223372036854775807

# Push/pop nesting. Events of one thread, ordered by time; at equal times ends come before starts
# and longer ranges start first. depth = (ranges started) - (ranges ended) before a range's start
# event. Zero-length ranges open and close nothing. The parent is the latest-starting range of
# the same thread one level up (an ASOF join).
NVTX_NESTING_SQL = f"""
CREATE TABLE ev AS
  SELECT pid, tid, start_ns AS ts, 1 AS k, -coalesce(end_ns, {_BIG}) AS e2, range_id,
         CASE WHEN coalesce(end_ns, {_BIG}) > start_ns THEN 1 ELSE 0 END AS delta
  FROM src WHERE style = 'push/pop'
  UNION ALL
  SELECT pid, tid, end_ns, 0, 0, range_id, -1
  FROM src WHERE style = 'push/pop' AND end_ns > start_ns;
CREATE TABLE lvl AS
  SELECT range_id, pid, tid, depth, seq FROM (
    SELECT range_id, pid, tid, k,
           sum(delta) OVER w - delta AS depth,
           row_number() OVER w AS seq
    FROM ev
    WINDOW w AS (PARTITION BY pid, tid ORDER BY ts, k, e2, range_id ROWS UNBOUNDED PRECEDING)
  ) WHERE k = 1;
DROP TABLE ev;
CREATE TABLE nest AS
  SELECT c.range_id, c.depth::INTEGER AS depth, p.range_id AS parent_range_id
  FROM lvl AS c ASOF LEFT JOIN lvl AS p
    ON c.pid IS NOT DISTINCT FROM p.pid AND c.tid IS NOT DISTINCT FROM p.tid
       AND c.depth - 1 = p.depth AND c.seq > p.seq;
DROP TABLE lvl;
"""


def nvtx_nesting(batches: Iterable[pa.RecordBatch], work: _Work) -> Iterator[pa.RecordBatch]:
    """Add ``depth`` and ``parent_range_id`` to push/pop NVTX ranges (rows kept in rowid order).

    Up to :data:`tracekit.collectors.nesting.MAX_ROWS` push/pop ranges are nested in memory by
    sort-and-sweep (:mod:`tracekit.collectors.nesting`); the decoded batches are spilled to an
    Arrow IPC file meanwhile and read back with the result. Past that count (or with pid/tid
    values too large for its packed thread key) the step continues in DuckDB
    (:func:`_nvtx_nesting_duckdb`), whose memory stays bounded by spilling.
    """
    import itertools

    import pyarrow.ipc as ipc

    from tracekit.collectors import nesting

    spill = work.folder / "nvtx_ranges.mem.arrow"
    writer = None
    parts: dict[str, list] = {k: [] for k in ("key", "start", "end", "end_valid", "rid", "pp")}
    n_pp = 0
    fallback = False
    it = iter(batches)
    try:
        for b in it:
            if writer is None:
                writer = ipc.new_file(str(spill), b.schema)
            writer.write_batch(b)
            pid, tid, end = b.column("pid"), b.column("tid"), b.column("end_ns")
            key = nesting.thread_key(pid.fill_null(0).to_numpy(), pid.is_valid().to_numpy(zero_copy_only=False),
                                     tid.fill_null(0).to_numpy(), tid.is_valid().to_numpy(zero_copy_only=False))
            pp = pc.equal(b.column("style"), "push/pop").fill_null(False).to_numpy(zero_copy_only=False)
            n_pp += int(pp.sum())
            if key is None or n_pp > nesting.MAX_ROWS:
                fallback = True
                break
            parts["key"].append(key)
            parts["start"].append(b.column("start_ns").fill_null(0).to_numpy())
            parts["end"].append(end.fill_null(0).to_numpy())
            parts["end_valid"].append(end.is_valid().to_numpy(zero_copy_only=False))
            parts["rid"].append(b.column("range_id").fill_null(0).to_numpy())
            parts["pp"].append(pp)
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        return
    if fallback:
        parts.clear()
        reader = ipc.open_file(str(spill))
        done = (reader.get_batch(i) for i in range(reader.num_record_batches))
        yield from _nvtx_nesting_duckdb(itertools.chain(done, it), work)
        return
    arrays = {}
    for name, key in (("key", "key"), ("start", "start"), ("end", "end"), ("end_valid", "end_valid"),
                      ("range_id", "rid"), ("pushpop", "pp")):
        arrays[name] = np.concatenate(parts.pop(key))
    nesting.release_free_memory()  # the scan's freed buffers, before the peak of the nesting
    depth, parent = nesting.nest(arrays)  # empties ``arrays``
    reader = ipc.open_file(str(spill))
    off = 0
    for i in range(reader.num_record_batches):
        b = reader.get_batch(i)
        d = depth[off:off + b.num_rows]
        p = parent[off:off + b.num_rows]
        off += b.num_rows
        yield b.append_column("depth", pa.array(d, pa.int32(), mask=d < 0)).append_column(
            "parent_range_id", pa.array(p, pa.int64(), mask=p == nesting.NO_PARENT))


def _nvtx_nesting_duckdb(batches: Iterable[pa.RecordBatch], work: _Work) -> Iterator[pa.RecordBatch]:
    """Add ``depth`` and ``parent_range_id`` to push/pop NVTX ranges (rows kept in rowid order), in
    DuckDB (:data:`NVTX_NESTING_SQL`).

    The decoded batches are spilled to an Arrow IPC file in the work folder while only the six
    columns the nesting needs go into DuckDB; the result (sorted by range_id) is then merged back
    batch by batch.
    """
    import pyarrow.ipc as ipc

    spill = work.folder / "nvtx_ranges.arrow"
    writer = None

    def tee():
        nonlocal writer
        for b in batches:
            if writer is None:
                writer = ipc.new_file(str(spill), b.schema)
            writer.write_batch(b)
            yield b

    try:
        loaded = work.load(tee(), ["range_id", "pid", "tid", "start_ns", "end_ns", "style"])
    finally:
        if writer is not None:
            writer.close()
    if not loaded:
        return
    work.con.execute(NVTX_NESTING_SQL)
    nest = work.stream("SELECT range_id, depth, parent_range_id FROM nest ORDER BY range_id")
    yield from _merge_by_range_id(ipc.open_file(str(spill)), nest)


def _merge_by_range_id(reader, nest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Join ``nest`` rows (sorted by range_id) onto the spilled batches (rowid order)."""
    pending: list[pa.RecordBatch] = []
    pending_max = -1
    exhausted = False
    for i in range(reader.num_record_batches):
        b = reader.get_batch(i)
        ids = b.column("range_id")
        top = pc.max(ids).as_py()
        while not exhausted and pending_max < top:
            nb = next(nest, None)
            if nb is None:
                exhausted = True
            elif nb.num_rows:
                pending.append(nb)
                pending_max = nb.column("range_id")[-1].as_py()
        table = pa.Table.from_batches(pending) if pending else None
        if table is not None and table.num_rows:
            nid = table.column("range_id")
            idx = pc.index_in(ids, value_set=nid)
            depth = pc.take(table.column("depth"), idx)
            parent = pc.take(table.column("parent_range_id"), idx)
            # keep only the rows beyond this batch for the next one
            rest = table.filter(pc.greater(nid, top))
            pending = rest.to_batches()
        else:
            depth = pa.nulls(b.num_rows, pa.int32())
            parent = pa.nulls(b.num_rows, pa.int64())
        yield b.append_column("depth", _flat(depth)).append_column("parent_range_id", _flat(parent))


def _flat(a):
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def sched_intervals(batches: Iterable[pa.RecordBatch], work: _Work) -> Iterator[pa.RecordBatch]:
    """SCHED_EVENTS rows -> on-CPU intervals: each switch-in to the same thread's next event.

    Switch-outs with no earlier switch-in (thread running when the capture began) open no
    interval. The state columns of an interval are those of the switch-out that ends it.
    """
    if not work.load(batches):
        return
    yield from work.stream("""
        WITH s AS (
          SELECT *, lead(start_ns) OVER w AS next_ns, lead(_is_in) OVER w AS next_in,
                 lead(out_state) OVER w AS next_state, lead(block_reason) OVER w AS next_block
          FROM src WINDOW w AS (PARTITION BY pid, tid ORDER BY start_ns, _seq))
        SELECT start_ns, coalesce(next_ns, (SELECT max(start_ns) FROM src)) AS end_ns,
               coalesce(next_ns, (SELECT max(start_ns) FROM src)) - start_ns AS duration_ns,
               cpu, pid, tid,
               CASE WHEN next_in = 0 THEN next_state END AS out_state,
               CASE WHEN next_in = 0 THEN next_block END AS block_reason,
               next_in IS DISTINCT FROM 0 AS is_clipped
        FROM s WHERE _is_in <> 0 ORDER BY start_ns, _seq""")


def one_row_per_device(batches: Iterable[pa.RecordBatch], work: _Work) -> Iterator[pa.RecordBatch]:
    """TARGET_INFO_CUDA_GPU has a row per (process, device): keep the first row of each device."""
    if not work.load(batches):
        return
    yield from work.stream("SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER "
                           "(PARTITION BY device_id ORDER BY gpu_id) AS rn FROM src) WHERE rn = 1 "
                           "ORDER BY device_id")


POST_STEPS = {"nvtx_nesting": nvtx_nesting, "sched_intervals": sched_intervals,
              "one_row_per_device": one_row_per_device}


# -- statistics gathered while streaming -----------------------------------------------------

_STATS_LOCK = threading.Lock()
# Read each table without per-value type guards first (Export.scan(strict=True)); tests turn it
# off to compare both paths.
STRICT_FIRST = True


class _Stats:
    def __init__(self):
        self.nonpositive: dict[str, int] = {}
        self.open_nvtx = 0

    def merge(self, other: _Stats) -> None:
        with _STATS_LOCK:
            for t, n in other.nonpositive.items():
                self.nonpositive[t] = self.nonpositive.get(t, 0) + n
            self.open_nvtx += other.open_nvtx

    def watch(self, table: str, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            names = b.schema.names
            if "duration_ns" in names:
                d = b.column("duration_ns")
                n = pc.sum(pc.less_equal(d, 0).cast(pa.int64())).as_py() or 0
                if n:
                    self.nonpositive[table] = self.nonpositive.get(table, 0) + n
            if table == "nvtx_ranges" and "is_open" in names:
                self.open_nvtx += pc.sum(b.column("is_open").cast(pa.int64())).as_py() or 0
            yield b


# -- manifest ---------------------------------------------------------------------------------

def _metadata(export: Export) -> dict:
    meta: dict = {"export_metadata_table": None, "export_schema_version": None, "nsys_version": None}
    for tab in ("EXPORT_META_DATA", "META_DATA_EXPORT"):
        if export.has(tab, "name", "value"):
            kv = dict(export.rows(f'SELECT name, value FROM "{tab}"'))
            meta["export_metadata_table"] = tab
            meta["export_schema_version"] = kv.get("EXPORT_SCHEMA_VERSION") or _schema_version(kv)
            meta["nsys_version"] = kv.get("EXPORT_PRODUCT_VERSION") or kv.get("NSYS_VERSION")
            break
    if export.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        row = export.rows("SELECT utcEpochNs, utcTime FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
        if row:
            meta["session_start_utc_epoch_ns"] = row[0][0]
            meta["session_start_utc"] = row[0][1]
    return meta


def _schema_version(kv: dict) -> str | None:
    parts = [kv.get(k) for k in ("EXPORT_SCHEMA_VERSION_MAJOR", "EXPORT_SCHEMA_VERSION_MINOR",
                                  "EXPORT_SCHEMA_VERSION_MICRO")]
    return ".".join(str(p) for p in parts) if parts[0] is not None else None


def _gpus(writer: RunWriter) -> list[dict]:
    info = writer.manifest["tables"].get("devices")
    if not info:
        return []
    import pyarrow.parquet as pq

    t = pq.read_table(writer.path / info["file"], columns=["device_id", "name"])
    return t.to_pylist()


# -- entry point -------------------------------------------------------------------------------

def _check_export(export: Export, path: Path) -> None:
    if "StringIds" not in export.columns:
        raise MissingTableError("no StringIds table: not an Nsight Systems SQLite export", path=path)
    if not export.has("StringIds", "id", "value"):
        raise InputError("table StringIds lacks its id/value columns: not a readable nsys export", path=path)
    export.count("StringIds")


def collect(paths: list[Path], writer: RunWriter, progress: Progress = NULL_PROGRESS) -> None:
    """Convert one nsys export (or report) into ``writer``'s run folder.

    Raises :class:`InputError` for more than one export, a file SQLite cannot read, a required
    column missing, or an export without the StringIds table (not an nsys export).
    """
    if len(paths) != 1:
        raise InputError("give one nsys export per run folder (got %d)" % len(paths))
    path = Path(paths[0])
    if path.suffix in REPORT_SUFFIXES:
        from tracekit.collectors.nsys_report import export_report

        writer.manifest["inputs"].append(describe_input(path, "nsys-report"))
        sqlite_path = export_report(path, writer.path)
    else:
        sqlite_path = path
    hashing = None
    if sqlite_path == path:  # the SHA-256 of the input is computed while converting
        hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracekit-sha256")
        described = hashing.submit(describe_input, path, "nsys-sqlite")
    try:
        _convert(path, sqlite_path, writer, progress)
        if hashing is not None:
            writer.manifest["inputs"].append(described.result())
    except InputError as exc:
        if sqlite_path == path or exc.path != str(sqlite_path):
            raise
        raise type(exc)(str(exc)[len(exc.path) + 2:], path=path) from None
    finally:
        if hashing is not None:
            hashing.shutdown(wait=True)
        if sqlite_path != path:  # the export made from a report, in <run tmp>/.export/
            shutil.rmtree(Path(sqlite_path).parent, ignore_errors=True)


# Tables converted first (the largest in typical exports); the rest follow in TABLE_MAPS order.
FIRST_TABLES = ("nvtx_ranges", "cpu_thread_state", "gpu_metrics", "cuda_api", "kernels", "osrt_api")


def workers() -> int:
    """Tables converted at the same time (threads; SQLite, Arrow, NumPy, Parquet and DuckDB work
    outside the GIL): one per CPU core, at most 4. ``TRACEKIT_THREADS`` overrides it."""
    env = os.environ.get("TRACEKIT_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, os.cpu_count() or 1))


class _Cancelled(Exception):
    """Another table's conversion failed or the user interrupted: stop this one."""


def _convert_table(export: Export, plan: _TablePlan, writer: RunWriter, progress: Progress, stats: _Stats,
                   work_root: Path, cancel: threading.Event, not_needed: Callable[[], bool]) -> int:
    """Convert one table (in a worker thread); returns the number of source rows read."""
    tname, tmap = plan.tmap.table, plan.tmap
    total = plan.count(export) if progress.enabled else None  # only the progress bar needs it
    bar = progress.task(f"{tname:<16}", total=total)

    def advance(n: int = 1) -> None:
        nonlocal read
        if cancel.is_set() or not_needed():
            raise _Cancelled()
        read += n
        bar(n)

    range_threads = workers()  # a large table is read as rowid ranges on this many threads
    # Read without per-value type guards first; a value of the wrong type (a damaged or
    # hand-edited export) makes the strict scan fail, and the table is read again with guards.
    for strict in (True, False) if STRICT_FIRST else (False,):
        mine = _Stats()
        read = 0
        batches = plan.batches(export, advance, strict=strict, threads=range_threads)
        work = None
        try:
            if tmap.post:
                work = _Work(work_root / tname)
                batches = POST_STEPS[tmap.post](batches, work)
            writer.write_table(tname, mine.watch(tname, batches))
            break
        except TypeMismatch:
            if not strict:
                raise
            bar(-read)  # the progress bar counts the guarded read again from zero
        finally:
            if work is not None:
                work.close()
    stats.merge(mine)
    return read


def _convert(path: Path, sqlite_path: Path, writer: RunWriter, progress: Progress) -> None:
    with Export(sqlite_path) as export:
        _check_export(export, path)
        ctx = _Context(export)
        source = {"format": "nsys-sqlite", **_metadata(export), "tables_read": {}, "source_rows": {},
                  "missing_columns": {}}
        writer.manifest["sources"][NAME] = source
        nsys_versions.check(export, writer, source)  # schema registry: required columns, newer versions
        stats = _Stats()
        work_root = writer.path / ".work"
        # Plans in TABLE_MAPS order; a table whose plan fails stops the list there, and of all
        # failures the one of the earliest table is raised: the error a one-by-one conversion gives.
        order = list(M.TABLE_MAPS)
        plans: dict[str, _TablePlan] = {}
        errors: dict[str, BaseException] = {}
        for tname, tmap in M.TABLE_MAPS.items():
            try:
                plan = _TablePlan(export, tmap, ctx)
            except InputError as exc:
                errors[tname] = exc
                break
            if plan.source is None:
                writer.not_captured(tname, f"export has no {' or '.join(tmap.sources)} table")
                continue
            plans[tname] = plan
        queue = [t for t in FIRST_TABLES if t in plans] + [t for t in plans if t not in FIRST_TABLES]
        cancel = threading.Event()
        stop_after = [len(order)]  # tables later than this index stop (an earlier one failed)
        read: dict[str, int] = {}
        with ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="tracekit-nsys") as pool:
            futures = {pool.submit(_convert_table, export, plans[t], writer, progress, stats, work_root,
                                   cancel, lambda i=order.index(t): i > stop_after[0]): t for t in queue}
            try:
                for fut in as_completed(futures):
                    t = futures[fut]
                    try:
                        read[t] = fut.result()
                    except _Cancelled:
                        pass
                    except BaseException as exc:  # noqa: BLE001 - re-raised below, in table order
                        errors[t] = exc
                        # tables after the failed one are not needed; earlier ones may still fail first
                        stop_after[0] = min(stop_after[0], order.index(t))
            except BaseException:
                cancel.set()  # KeyboardInterrupt / SIGTERM: stop the workers, then re-raise
                raise
        if errors:
            raise errors[min(errors, key=order.index)]
        # manifest entries in TABLE_MAPS order, whatever order the threads finished in
        tables = writer.manifest["tables"]
        for t in order:
            if t in tables:
                tables[t] = tables.pop(t)
        stats.nonpositive = {t: stats.nonpositive[t] for t in order if t in stats.nonpositive}
        for t, plan in plans.items():
            source["tables_read"][t] = plan.source
            source["source_rows"][t] = read[t]
            if plan.missing:
                source["missing_columns"][t] = plan.missing
        shutil.rmtree(work_root, ignore_errors=True)
        source["stats"] = {"nvtx_open_ranges": stats.open_nvtx,
                           "nonpositive_duration_rows": stats.nonpositive}
        if stats.open_nvtx and export.has("NVTX_EVENTS", "start", "end"):
            # nsys stats closes open ranges at the last NVTX timestamp; queries that reproduce it
            # can read this value
            last = export.rows('SELECT max(max(start), coalesce(max("end"), max(start))) FROM NVTX_EVENTS')
            source["stats"]["nvtx_last_timestamp_ns"] = last[0][0]
        if stats.open_nvtx:
            writer.warn(f"{stats.open_nvtx} NVTX range(s) were never closed (nvtx_ranges.is_open; "
                        "end_ns and duration_ns are null)")
        for t, n in stats.nonpositive.items():
            writer.warn(f"{n} row(s) of {t} have a zero or negative duration")
        writer.manifest["gpus"] = _gpus(writer)
