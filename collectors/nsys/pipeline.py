"""The nsys table pipeline: every table of an export converted on its own thread (SQLite, Arrow,
NumPy, Parquet and DuckDB work outside the GIL), read strictly first and again with type guards
when a value has the wrong type, cancelled as a whole when one table fails or the user
interrupts; statistics gathered while streaming and the export's metadata go to the manifest.
"""

from __future__ import annotations

import os
import queue
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit.collectors.nsys import mapping as M
from tracekit.collectors.nsys import versions as nsys_versions
from tracekit.collectors.nsys.decode import Context, TablePlan
from tracekit.collectors.nsys.export import MAX_TEXT_BYTES, Export, TypeMismatch
from tracekit.collectors.nsys.post_steps import POST_STEPS, Work
from tracekit.errors import InputError, MissingTableError
from tracekit.progress import Progress
from tracekit.runfolder import RunWriter, integrity

NAME = "nsys"

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
            meta["export_schema_version"] = nsys_versions.export_schema_version(kv)
            meta["nsys_version"] = kv.get("EXPORT_PRODUCT_VERSION") or kv.get("NSYS_VERSION")
            break
    if export.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        row = export.rows("SELECT utcEpochNs, utcTime FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
        if row:
            meta["session_start_utc_epoch_ns"] = row[0][0]
            meta["session_start_utc"] = row[0][1]
    meta.update(_host_and_rank(export))
    return meta


# environment variables that hold a process's distributed rank (torchrun/torch.distributed, Open
# MPI, MPICH/Intel MPI/PMI, MVAPICH, Slurm), most specific first
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK",
                  "SLURM_PROCID")


WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS")


def _host_and_rank(export: Export) -> dict:
    """``hostname``, ``env_rank`` (with ``env_rank_variable``) and ``env_world_size`` from
    TARGET_INFO_SYSTEM_ENV:
    the host name nsys recorded, and the rank in the profiled command's environment (e.g.
    ``nsys profile -o report_%q{RANK}`` under torchrun). Absent when the export has neither."""
    if not export.has("TARGET_INFO_SYSTEM_ENV", "name", "value"):
        return {}
    out: dict = {}
    kv: dict = {}
    for name, value in export.rows("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV "
                                   "WHERE name IN ('Hostname', 'DeviceEnvironment')"):
        kv.setdefault(_text(name), _text(value))
    if isinstance(kv.get("Hostname"), str):
        out["hostname"] = kv["Hostname"]
    env = kv.get("DeviceEnvironment")
    if isinstance(env, str):
        pairs = dict(item.split("=", 1) for item in env.split(";") if "=" in item)
        for var in RANK_VARIABLES:
            if _whole_number(pairs.get(var)):  # '²' is a digit to str.isdigit, not to int()
                out["env_rank"] = int(pairs[var])
                out["env_rank_variable"] = var
                break
        for var in WORLD_SIZE_VARIABLES:
            if _whole_number(pairs.get(var)):
                out["env_world_size"] = int(pairs[var])
                break
    return out


def _whole_number(text: str | None) -> bool:
    """ASCII digits only, at most 19 (an int64; the job checks the rank's range)."""
    t = (text or "").strip()
    return t.isascii() and t.isdigit() and len(t) <= 19


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


FIRST_TABLES = ("nvtx_ranges", "cpu_thread_state", "gpu_metrics", "cuda_api", "kernels", "osrt_api")


def workers() -> int:
    """Tables converted at the same time (threads; SQLite, Arrow, NumPy, Parquet and DuckDB work
    outside the GIL): one per CPU core, at most 4. ``TRACEKIT_THREADS`` overrides it."""
    env = os.environ.get("TRACEKIT_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, os.cpu_count() or 1))


# How much lower (in nice steps) the threads of tables without a post-step run
BACKGROUND_NICE = 10


def background_priority() -> None:
    """Lower the calling thread's scheduling priority by :data:`BACKGROUND_NICE` (Linux only:
    there a thread has a nice value of its own, and the threads it starts inherit it).

    A table with a post-step (the NVTX nesting above all) can write nothing before every row
    is read, and its post-step and Parquet encoding are the longest chain of a conversion; the
    other tables stream. Their threads yield the cores to that table's while both want them
    and run at full speed when they do not, so the nesting starts sooner and the other tables
    fill the cores it leaves idle: on the benchmark export (2 cores) the cores are busy 2-3 %
    more of the conversion (docs/performance-history.md). Never raises a priority; errors are
    ignored (the conversion is the same, only scheduled differently)."""
    if not sys.platform.startswith("linux") or getattr(_LOWERED, "done", False):
        return  # elsewhere PRIO_PROCESS takes a process id; a pool thread is lowered once
    _LOWERED.done = True
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICE))
    except OSError:
        pass


_LOWERED = threading.local()


class _Cancelled(Exception):
    """Another table's conversion failed or the user interrupted: stop this one."""


PREFETCH_BATCHES = 2  # decoded batches a table's decoding runs ahead of its Parquet encoding


def prefetched(batches: Iterable[pa.RecordBatch], depth: int = PREFETCH_BATCHES) -> Iterator[pa.RecordBatch]:
    """``batches``, produced on a helper thread up to ``depth`` batches ahead of the consumer:
    decoding (and a post-step's tail, e.g. the NVTX operator arguments) overlaps the Parquet
    encoding of the previous batch instead of taking turns with it on one thread. An exception of
    the producer is raised here, in order; when the consumer stops early the producer stops at its
    next batch and the source iterator is closed."""
    items: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    it = iter(batches)

    def put(item) -> bool:
        while not stop.is_set():
            try:
                items.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for b in it:
                if not put((b, None)):
                    return
            put((None, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put((None, exc))

    helper = threading.Thread(target=produce, name=f"{threading.current_thread().name}-decode", daemon=True)
    helper.start()
    try:
        while True:
            b, exc = items.get()
            if exc is not None:
                raise exc
            if b is None:
                return
            yield b
    finally:
        stop.set()
        helper.join()
        close = getattr(it, "close", None)
        if close is not None:
            close()


def _convert_table(export: Export, plan: TablePlan, writer: RunWriter, progress: Progress, stats: _Stats,
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
    if not tmap.post:
        background_priority()
    # Read without per-value type guards first; a value of the wrong type (a damaged or
    # hand-edited export) makes the strict scan fail, and the table is read again with guards.
    for strict in (True, False) if STRICT_FIRST else (False,):
        mine = _Stats()
        read = 0
        batches = plan.batches(export, advance, strict=strict, threads=range_threads)
        work = None
        try:
            if tmap.post:
                work = Work(work_root / tname, threads=range_threads)
                batches = POST_STEPS[tmap.post](batches, work)
            writer.write_table(tname, mine.watch(tname, prefetched(batches)))
            if work is not None and work.duplicate_rows is not None:
                writer.counted_duplicates[tname] = work.duplicate_rows
            integrity.count_table_duplicates(writer, tname)  # while other tables still convert
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


# columns whose absence changes what results mean (a device, stream or process per row)
KEY_COLUMNS = ("device_id", "stream_id", "context_id", "correlation_id", "pid", "tid")


def convert_export(path: Path, sqlite_path: Path, writer: RunWriter, progress: Progress) -> None:
    with Export(sqlite_path) as export:
        _check_export(export, path)
        ctx = Context(export)
        source = {"format": "nsys-sqlite", **_metadata(export), "tables_read": {}, "source_rows": {},
                  "missing_columns": {}}
        writer.manifest["sources"][NAME] = source
        nsys_versions.check(export, writer, source)  # schema registry: required columns, newer versions
        stats = _Stats()
        work_root = writer.path / ".work"
        # Plans in TABLE_MAPS order; a table whose plan fails stops the list there, and of all
        # failures the one of the earliest table is raised: the error a one-by-one conversion gives.
        order = list(M.TABLE_MAPS)
        plans: dict[str, TablePlan] = {}
        errors: dict[str, BaseException] = {}
        for tname, tmap in M.TABLE_MAPS.items():
            try:
                plan = TablePlan(export, tmap, ctx)
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
            keys = [c for c in plan.missing if c in KEY_COLUMNS]
            if keys and read[t]:
                writer.warn(f"{t}: the export has no column for {', '.join(keys)} ({plan.source}); "
                            f"all {read[t]} row(s) have it NULL, so results per "
                            f"{' / '.join(k.removesuffix('_id') for k in keys)} group them as NULL")
        if export.strings_cut:
            writer.warn(f"{export.strings_cut} text value(s) longer than "
                        f"{MAX_TEXT_BYTES >> 20} MiB were cut there (they end in …)")
        source["strings_cut"] = export.strings_cut
        if export.labels_cut:
            writer.warn(f"{export.labels_cut} NVTX domain or category name(s) longer than "
                        "1 KiB were cut there (they end in …)")
            source["labels_cut"] = export.labels_cut
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
        # zero and negative durations: counted, said and warned by tracekit.runfolder.integrity
        writer.manifest["gpus"] = _gpus(writer)


def _text(v):
    """A metadata value as text (SQLite may hand out bytes for damaged text)."""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v
