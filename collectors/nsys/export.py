"""Streaming reads of Nsight Systems SQLite exports into Arrow record batches.

Bulk scans go through ADBC's SQLite driver (``adbc-driver-sqlite``), which yields Arrow batches
without a Python object per row. SQLite is dynamically typed and the driver infers each column's
type from the first rows, so every scan puts one typed *sentinel* row first (0, 0.0 or X'') and
drops it: columns that start with NULLs keep their declared type. Text is read as BLOB and
decoded to UTF-8 in Arrow; a batch holding invalid UTF-8 (seen in real exports) is decoded with
U+FFFD replacement characters instead of failing.

A *strict* scan reads numbers as SQLite stores them (no ``CAST``, no type guard): the driver then
fails with a type mismatch on the first value that is not of the column's type, and the caller
reads the table again with guards (:class:`TypeMismatch`). Clean exports, nearly all of them, pay
for no per-value checks. Large tables are read as ordered rowid ranges on several threads
(:meth:`Export.scan_ranges`).

Metadata (table and column lists, StringIds, ENUM tables, META_DATA) is read with the standard
library's ``sqlite3`` module.
"""

from __future__ import annotations

import collections
import re
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit.errors import InputError, MissingTableError, UnsupportedFormatError, one_line

SQLITE_MAGIC = b"SQLite format 3\x00"
BATCH_ROWS = 65536
RANGE_ROWS = 2 * BATCH_ROWS  # rowids per range of a scan split over threads (Export.scan_ranges)

# SQL type each Arrow type is read as (before decoding), and its sentinel literal
_READ_AS = {
    "int": ("INTEGER", "0"),
    "float": ("REAL", "0.0"),
    "blob": ("BLOB", "X''"),
}
_ARROW = {"int": pa.int64(), "float": pa.float64(), "blob": pa.binary()}
# a text value longer than this (a 900 MB NVTX message aborted the reader with std::bad_alloc) is
# cut here by SQLite's substr before Arrow sees it, ends in "…", and is counted in strings_cut
MAX_TEXT_BYTES = 1 << 20
_ELLIPSIS = "…".encode()
_SQL_IN_MESSAGE = re.compile(r"\b(?:SELECT|WITH|query:)\b.*", re.IGNORECASE | re.DOTALL)


def _reason(exc: BaseException) -> str:
    """A driver's error message on one line, without the SQL it quotes (tracekit's own SELECT
    is no help to the user), at most 200 characters."""
    text = _SQL_IN_MESSAGE.sub("", one_line(exc)).strip(" :;,") or type(exc).__name__
    return text[:200]


class TypeMismatch(Exception):
    """A strict scan met a value whose SQLite storage class is not the one read (text or a real
    in an integer column, ...): read the table again with type guards."""


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _uri(path: Path) -> str:
    q = urllib.parse.urlencode({"mode": "ro", "immutable": "1"})
    return urllib.parse.urlunsplit(["file", "", str(Path(path).resolve()), q, ""])


def decode_utf8(arr: pa.Array) -> pa.Array:
    """Binary -> string; invalid UTF-8 sequences become U+FFFD instead of raising."""
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array(
            [None if v is None else v.decode("utf-8", "replace") for v in arr.to_pylist()],
            type=pa.string(),
        )


class Export:
    """An opened nsys SQLite export.

    Raises :class:`UnsupportedFormatError` when the file is not SQLite, and :class:`InputError`
    when SQLite cannot read it (truncated or corrupt file).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not is_sqlite(self.path):
            raise UnsupportedFormatError("not an SQLite file", path=self.path)
        try:
            self.meta = self._connect()
            # metadata queries come from the tables' threads at once (the NVTX naming scan
            # walks the whole NVTX_EVENTS table): each thread has its own connection
            self._meta_local = threading.local()
            self._meta_local.con = self.meta
            self._meta_all = [self.meta]
            self._meta_lock = threading.Lock()
            names = [r[0] for r in self.meta.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
            self.columns: dict[str, list[str]] = {}
            for n in names:
                self.columns[n] = [r[1] for r in self.meta.execute(f'PRAGMA table_info("{n}")')]
            # A full integrity check reads the whole file (seconds for a large export); comparing
            # the page count SQLite expects with the file's size catches truncation instantly.
            # Corruption elsewhere surfaces as an InputError from the scan that meets it.
            pages = self.meta.execute("PRAGMA page_count").fetchone()[0]
            page_size = self.meta.execute("PRAGMA page_size").fetchone()[0]
            size = self.path.stat().st_size
            if size < pages * page_size:
                raise InputError(
                    f"truncated SQLite file: {size} bytes, its header says {pages * page_size}",
                    path=self.path)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            raise InputError(f"SQLite cannot read this file ({_reason(exc)}); is it truncated or "
                             "corrupt?", path=self.path) from None
        self._adbc_local = threading.local()  # one ADBC connection per thread that scans
        self._adbc_all: list = []
        self._adbc_lock = threading.Lock()
        self._strings: pa.Table | None = None
        self._enums: dict[str, dict[int, str]] = {}
        self._strings_lock = threading.Lock()
        self.strings_cut = 0  # text values cut at MAX_TEXT_BYTES (the collector warns)
        self.labels_cut = 0  # NVTX domain / category names cut at decode.MAX_LABEL_BYTES

    # -- structure ------------------------------------------------------------------------
    def has(self, table: str, *cols: str) -> bool:
        c = self.columns.get(table)
        return c is not None and all(x in c for x in cols)

    def require(self, table: str) -> list[str]:
        if table not in self.columns:
            raise MissingTableError(f"export has no {table} table", path=self.path)
        return self.columns[table]

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(_uri(self.path), uri=True, isolation_level=None, check_same_thread=False)
        con.text_factory = lambda b: b.decode("utf-8", "replace")
        return con

    def _meta_con(self) -> sqlite3.Connection:
        """This thread's sqlite3 connection for metadata queries (:attr:`meta` on the thread
        that opened the export)."""
        con = getattr(self._meta_local, "con", None)
        if con is None:
            con = self._meta_local.con = self._connect()
            with self._meta_lock:
                self._meta_all.append(con)
        return con

    def count(self, table: str) -> int:
        try:
            return self._meta_con().execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read table {table}: {_reason(exc)}", path=self.path) from None

    def rows(self, sql: str, params=()) -> list[tuple]:
        """Small metadata queries (Python rows)."""
        try:
            return self._meta_con().execute(sql, params).fetchall()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the export: {_reason(exc)}", path=self.path) from None

    # -- string IDs and enums -------------------------------------------------------------
    def strings(self) -> pa.Table:
        """StringIds as an Arrow table (id int64, value string), read in Arrow batches (no Python
        object per string). Values are read as BLOB and decoded as UTF-8 (invalid bytes -> U+FFFD),
        so text, BLOB and number values all come out as text."""
        with self._strings_lock:  # scanning threads ask at once: read it once
            if self._strings is None:
                self.require("StringIds")
                ids, values = [], []
                for b in self.scan([("id", "id", "int"), ("value", "value", "blob")], '"StringIds"'):
                    ids.append(b.column("id"))
                    values.append(decode_utf8(b.column("value")))
                self._strings = pa.table({"id": pa.chunked_array(ids, pa.int64()).combine_chunks(),
                                          "value": pa.chunked_array(values, pa.string()).combine_chunks()})
        return self._strings

    def resolve_strings(self, ids: pa.Array) -> pa.Array:
        """Map string IDs to text. An ID missing from StringIds becomes '<unknown string N>'
        (never a dropped row); a null ID stays null."""
        st = self.strings()
        idx = pc.index_in(ids, value_set=st.column("id"))
        out = pc.take(st.column("value"), idx)
        if isinstance(out, pa.ChunkedArray):
            out = out.combine_chunks()
        missing = pc.and_(pc.is_null(idx), pc.is_valid(ids))
        if pc.any(missing).as_py():
            labels = pc.binary_join_element_wise("<unknown string ", ids.cast(pa.string()), ">", "")
            out = pc.if_else(missing, labels, out)
        return out

    def enum(self, table: str, fallback: dict[int, str] | None = None) -> dict[int, str]:
        """{value: label} from the export's ENUM table, else ``fallback`` (documented defaults
        for exports older than the ENUM tables)."""
        if table not in self._enums:
            if self.has(table, "id", "label"):
                self._enums[table] = {int(i): str(lbl) for i, lbl in self.rows(f'SELECT id, label FROM "{table}"')}
            else:
                self._enums[table] = dict(fallback or {})
        return self._enums[table]

    # -- bulk scans -----------------------------------------------------------------------
    def _adbc_cursor(self):
        """A cursor on this thread's ADBC connection (threads may scan tables concurrently)."""
        con = getattr(self._adbc_local, "con", None)
        if con is None:
            import adbc_driver_sqlite.dbapi as adbc

            try:
                con = adbc.connect(_uri(self.path))
            except Exception as exc:  # the driver's own errors (adbc_driver_manager.Error, ...)
                # a file deleted or replaced since it was opened: the driver says "failed to
                # allocate memory" for a missing file, so say what is wrong from the file itself
                why = ("no longer exists (deleted during the conversion?)" if not Path(self.path).exists()
                       else f"cannot be opened for reading: {one_line(exc)}")
                raise InputError(why, path=self.path) from None
            self._adbc_local.con = con
            with self._adbc_lock:
                self._adbc_all.append(con)
        return con.cursor()

    def scan(self, select: list[tuple[str, str, str]], from_sql: str,
             batch_rows: int = BATCH_ROWS, strict: bool = False) -> Iterator[pa.RecordBatch]:
        """Stream ``SELECT expr AS alias, ... FROM from_sql`` as Arrow batches.

        ``select`` is a list of ``(alias, sql_expression, kind)`` with kind ``int``, ``float``
        or ``blob``. Values are cast in SQLite to that kind so every batch has the same types;
        ``blob`` columns come out as Arrow binary (decode with :func:`decode_utf8`). With
        ``strict``, ``int`` and ``float`` values are not cast: a value of another storage class
        raises :class:`TypeMismatch` (possibly after some batches were yielded). Other read
        errors raise :class:`InputError`.
        """
        def expr_sql(expr: str, kind: str) -> str:
            if strict and kind != "blob":
                return f"({expr})"
            if kind == "blob":  # one byte more than kept: tells a value that was cut
                return f"substr(CAST(({expr}) AS BLOB), 1, {MAX_TEXT_BYTES + 1})"
            return f"CAST(({expr}) AS {_READ_AS[kind][0]})"

        inner = ", ".join(f'{expr_sql(expr, kind)} AS "{alias}"' for alias, expr, kind in select)
        sentinel = ", ".join(f"{_READ_AS[kind][1]} AS \"{alias}\"" for alias, _e, kind in select)
        sql = f"SELECT {sentinel} UNION ALL SELECT * FROM (SELECT {inner} FROM {from_sql})"
        want = pa.schema([(alias, _ARROW[kind]) for alias, _e, kind in select])
        cur = self._adbc_cursor()
        try:
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(batch_rows)})
            cur.execute(sql)
            reader = cur.fetch_record_batch()
            first = True
            for batch in reader:
                if first:
                    # the driver infers types from the first batch: another storage class there
                    # widens the column instead of failing
                    if not batch.schema.equals(want):
                        if strict:
                            raise TypeMismatch(from_sql)
                        got = ", ".join(f"{f.name} {f.type}" for f in batch.schema)
                        raise InputError(f"unexpected column types reading {from_sql}: {got}",
                                         path=self.path)
                    batch = batch.slice(1)
                    first = False
                if batch.num_rows:
                    yield self._cut_long(batch)
        except Exception as exc:  # adbc raises its own DatabaseError/OSError types
            if isinstance(exc, (InputError, GeneratorExit, TypeMismatch)):
                raise
            if strict and "type mismatch" in str(exc).lower():
                raise TypeMismatch(from_sql) from None
            table = re.search(r'"([^"]+)"', from_sql)
            raise InputError(f"cannot read {table.group(1) if table else from_sql.split()[0]}: "
                             f"{_reason(exc)}",
                             path=self.path) from None
        finally:
            cur.close()

    def _cut_long(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Binary columns of ``batch`` with values longer than :data:`MAX_TEXT_BYTES` cut there."""
        for i, f in enumerate(batch.schema):
            if f.type != pa.binary():
                continue
            col = batch.column(i)
            long = pc.greater(pc.binary_length(col), MAX_TEXT_BYTES)
            n = pc.sum(long.cast(pa.int64())).as_py() or 0
            if n:
                with self._adbc_lock:
                    self.strings_cut += n
                cut = pc.binary_join_element_wise(pc.binary_slice(col, 0, MAX_TEXT_BYTES),
                                                  pa.scalar(_ELLIPSIS, pa.binary()), pa.scalar(b"", pa.binary()))
                batch = batch.set_column(i, f, pc.if_else(long, cut, col))
        return batch

    def rowid_ranges(self, table: str, rows: int | None = None) -> list[tuple[int, int]] | None:
        """Split ``table``'s rowids into ranges ``(lo, hi]`` of ``rows`` rowids each (default
        :data:`RANGE_ROWS`), or None when the table is small (or has no rowid)."""
        rows = rows or RANGE_ROWS
        try:  # two queries: SQLite answers a lone min() or max() of the rowid from the b-tree's
            # ends, but scans the whole table for both in one SELECT
            lo = self.rows(f'SELECT min(rowid) FROM "{table}"')[0][0]
            hi = self.rows(f'SELECT max(rowid) FROM "{table}"')[0][0]
        except InputError:
            return None
        if lo is None or hi - lo < 2 * rows:
            return None
        return [(a, min(a + rows, hi)) for a in range(lo - 1, hi, rows)]

    def scan_ranges(self, select: list[tuple[str, str, str]], from_sqls: Sequence[str],
                    threads: int, strict: bool = False) -> Iterator[pa.RecordBatch]:
        """:meth:`scan` of each of ``from_sqls`` in turn, the batches in that order, with up to
        ``threads`` of the scans running ahead on their own threads and connections. Memory:
        about ``threads + 1`` scans' batches at a time."""
        if threads <= 1 or len(from_sqls) <= 1:
            for f in from_sqls:
                yield from self.scan(select, f, strict=strict)
            return

        def read(f: str) -> list[pa.RecordBatch]:
            return list(self.scan(select, f, strict=strict))

        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tracekit-sqlite")
        pending: collections.deque = collections.deque()
        todo = iter(from_sqls)
        try:
            for f in todo:
                pending.append(pool.submit(read, f))
                if len(pending) >= threads:
                    break
            while pending:
                batches = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.submit(read, nxt))
                yield from batches
        finally:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=True)

    def close(self):
        with self._adbc_lock:
            for con in self._adbc_all:
                con.close()
            self._adbc_all.clear()
        self._adbc_local = threading.local()
        with self._meta_lock:
            for con in self._meta_all:
                con.close()
            self._meta_all.clear()
        self._meta_local = threading.local()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
