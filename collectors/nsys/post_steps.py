"""Structural post-steps of the nsys collector: work that needs all rows of a table in order
(NVTX push/pop nesting, scheduler intervals, one row per device). Each step takes the decoded
batches and a :class:`Work` folder (a DuckDB database with a memory limit, spilling to disk)
and yields the finished batches; :data:`POST_STEPS` maps the names used in
:mod:`tracekit.collectors.nsys.mapping` (``TableMap.post``) to them.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

DUCKDB_MEMORY_LIMIT = "512MB"
OUT_BATCH_ROWS = 65536


# -- structural steps (DuckDB, spilling to disk) ----------------------------------------------

class Work:
    """A DuckDB database in a work folder; batches are loaded into table ``src``."""

    def __init__(self, folder: Path, threads: int = 1):
        from tracekit.duck import scratch

        self.folder = folder
        self.threads = threads  # CPU cores a step may use (e.g. the nesting's two groups)
        folder.mkdir(parents=True, exist_ok=True)
        db = str(folder / "work.duckdb")
        # DuckDB reads '?' in a database path as the start of URL parameters (a run folder under
        # a folder named 'what?'): such a path gets an in-memory database, which spills to the
        # same temp_directory past the memory limit
        self.con = scratch(database=":memory:" if "?" in db else db,
                           memory_limit=DUCKDB_MEMORY_LIMIT, threads=4,
                           temp_directory=folder / "spill",
                           settings=["enable_progress_bar = false",
                                     "preserve_insertion_order = false"])
        # duplicate rows of the table counted by the step (tracekit.runfolder.integrity), if any
        self.duplicate_rows: int | None = None

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


def nvtx_ranges_post(batches: Iterable[pa.RecordBatch], work: Work) -> Iterator[pa.RecordBatch]:
    """nvtx_ranges' structural step: the push/pop nesting (:func:`nvtx_nesting`), then the
    operator arguments of PyTorch's NVTX op ranges (``input_dims``, ``op_id``,
    ``sequence_number``: :mod:`tracekit.collectors.nsys.pytorch_nvtx`)."""
    from tracekit.collectors.nsys.pytorch_nvtx import add_columns

    for b in nvtx_nesting(batches, work):
        yield add_columns(b)


def nvtx_nesting(batches: Iterable[pa.RecordBatch], work: Work) -> Iterator[pa.RecordBatch]:
    """Add ``depth`` and ``parent_range_id`` to push/pop NVTX ranges (rows kept in rowid order).

    Up to :data:`tracekit.collectors.common.MAX_ROWS` push/pop ranges are nested in memory by
    sort-and-sweep (:mod:`tracekit.collectors.common`); the decoded batches are spilled to an
    Arrow IPC file meanwhile and read back with the result. Past that count (or with pid/tid
    values too large for its packed thread key) the step continues in DuckDB
    (:func:`_nvtx_nesting_duckdb`), whose memory stays bounded by spilling.
    """
    import itertools

    import pyarrow.ipc as ipc

    from tracekit.collectors import common as nesting

    spill = work.folder / "nvtx_ranges.mem.arrow"
    writer = None
    parts: dict[str, list] = {k: [] for k in ("key", "start", "end", "end_valid", "range_id", "pushpop")}
    n_pp = 0
    fallback = False
    it = iter(batches)
    try:
        for b in it:
            if writer is None:
                schema = b.schema
                writer = ipc.new_file(str(spill), schema)
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
            parts["range_id"].append(b.column("range_id").fill_null(0).to_numpy())
            parts["pushpop"].append(pp)
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
    nesting.release_free_memory()  # the scan's freed buffers, before the peak of the nesting
    rows = sum(a.shape[0] for a in parts["key"])
    depth, parent = nesting.nest_batches(parts, min(2, work.threads))  # empties ``parts``
    nesting.release_free_memory()  # the nesting's work arrays
    # on a thread beside the merge, the PyTorch columns and the writing of the table
    check = _DuplicateCheck(spill, schema, work, rows)
    try:
        reader = ipc.open_file(str(spill))
        off = 0
        for i in range(reader.num_record_batches):
            b = reader.get_batch(i)
            d = depth[off:off + b.num_rows]
            p = parent[off:off + b.num_rows]
            off += b.num_rows
            yield b.append_column("depth", pa.array(d, pa.int32(), mask=d < 0)).append_column(
                "parent_range_id", pa.array(p, pa.int64(), mask=p == nesting.NO_PARENT))
        work.duplicate_rows = check.result()
    finally:
        check.close()


class _DuplicateCheck:
    """The duplicate-row count of nvtx_ranges (:func:`tracekit.runfolder.integrity.duplicate_rows`)
    made from the spilled batches on a thread of its own while the nested batches are finished
    and written (after the nesting, whose peak memory it would add to), instead of from the
    written file after it (decompressed and decoded again at the end of the conversion: a
    second on the benchmark export). It compares the spilled columns the table keeps: the columns
    :mod:`~tracekit.collectors.nsys.pytorch_nvtx` adds follow from ``name``, and the nesting's
    ``depth`` and ``parent_range_id`` are left out of the comparison, as ``range_id`` is. No
    count (``result()`` None; the file is checked after it was written) when it fails."""

    def __init__(self, spill: Path, schema: pa.Schema, work: Work, rows: int):
        from tracekit.collectors.nsys.pytorch_nvtx import COLUMNS as DERIVED
        from tracekit.duck import scratch
        from tracekit.runfolder.integrity import compared_columns

        self.spill, self.rows = spill, rows
        self.columns = [c for c in compared_columns("nvtx_ranges") if c not in DERIVED and c in schema.names]
        self._count: int | None = None
        self.con = scratch(memory_limit="256MB", threads=2, temp_directory=work.folder / "dupcheck")
        self.thread = None
        if "name" in self.columns:  # the derived columns follow from it
            self.thread = threading.Thread(target=self._run, name=f"{threading.current_thread().name}-dup",
                                           daemon=True)
            self.thread.start()

    def _relation(self) -> str:
        import pyarrow.ipc as ipc

        reader = ipc.open_file(str(self.spill))
        cols = self.columns
        batches = (reader.get_batch(i).select(cols) for i in range(reader.num_record_batches))
        schema = pa.schema([reader.schema.field(c) for c in cols])
        self.con.register("spilled", pa.RecordBatchReader.from_batches(schema, batches))
        return "spilled"

    def _run(self) -> None:
        from tracekit.runfolder.integrity import duplicate_rows

        try:
            self._count = duplicate_rows(self.con, self._relation, self.columns, rows=self.rows)
        except Exception:  # noqa: BLE001 - counted from the written file instead
            self._count = None

    def result(self) -> int | None:
        if self.thread is not None:
            self.thread.join()
        return self._count

    def close(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            self.con.interrupt()  # the conversion stopped early
            self.thread.join()
        self.con.close()


def _nvtx_nesting_duckdb(batches: Iterable[pa.RecordBatch], work: Work) -> Iterator[pa.RecordBatch]:
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


def sched_intervals(batches: Iterable[pa.RecordBatch], work: Work) -> Iterator[pa.RecordBatch]:
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


def one_row_per_device(batches: Iterable[pa.RecordBatch], work: Work) -> Iterator[pa.RecordBatch]:
    """TARGET_INFO_CUDA_GPU has a row per (process, device): keep the first row of each device."""
    if not work.load(batches):
        return
    yield from work.stream("SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER "
                           "(PARTITION BY device_id ORDER BY gpu_id) AS rn FROM src) WHERE rn = 1 "
                           "ORDER BY device_id")


POST_STEPS = {"nvtx_ranges_post": nvtx_ranges_post, "sched_intervals": sched_intervals,
              "one_row_per_device": one_row_per_device}
