"""DuckDB helpers shared by the collectors, the integrity checks and the query engine: quoting,
literal file globs, scratch connections and Arrow results. The one place these are written.

- :func:`lit`: a Python string as a SQL string literal (``'it''s'``);
- :func:`ident`: a name as a quoted SQL identifier (``"my col"``);
- :func:`glob_literal` / :func:`file_literal`: a path as a DuckDB glob that matches only itself
  (DuckDB's file functions expand ``[``, ``*`` and ``?``);
- :func:`scratch`: an in-memory connection with bounded memory and threads, spilling to a folder;
- :func:`connect_ahead` / :func:`memory_connection`: an in-memory connection opened in a helper
  thread while the caller goes on (the query commands' start), taken by the query engine;
  :func:`native`: DuckDB's extension module without the package's Python layer (relations),
  :func:`with_relations`: a connection with it;
- :func:`fetch_arrow`: a relation's result as a :class:`pyarrow.Table` (any DuckDB >= 1.3);
- :func:`fetch`: the same, or as :class:`Rows` (Python values) when every column is a plain type;
  :func:`fetch_query` the same for a statement's text, run once where it can;
- :func:`re2_error`: why DuckDB's regular expressions (RE2) refuse a pattern, if they do.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by fetch_arrow: the CLI's --help must not pay for pyarrow (issue 39)
    import pyarrow as pa


def lit(text: object) -> str:
    """``text`` (made a string) as a SQL string literal, quotes doubled."""
    return "'" + str(text).replace("'", "''") + "'"


def lit_list(items: Iterable[str]) -> str:
    """A SQL list literal of string literals: ``['a', 'b']``."""
    return "[" + ", ".join(lit(s) for s in items) + "]"


def ident(name: str) -> str:
    """``name`` as a quoted SQL identifier, double quotes doubled."""
    return '"' + str(name).replace('"', '""') + '"'


def glob_literal(path: str | os.PathLike) -> str:
    """``path`` as a DuckDB glob pattern that matches only itself: ``[``, ``*`` and ``?`` (the
    characters DuckDB's file functions expand) become one-character classes (``[[]``, ``[*]``,
    ``[?]``), so a run folder named ``run[12]`` reads its own files, not run1's and run2's."""
    return re.sub(r"([\[*?])", r"[\1]", str(path))


def file_literal(path: str | os.PathLike) -> str:
    """SQL string literal naming one file for ``read_parquet`` and the other file functions,
    which read their argument as a glob (:func:`glob_literal`)."""
    return lit(glob_literal(path))


def scratch(*, memory_limit: str | None = None, threads: int | None = None,
            temp_directory: str | os.PathLike | None = None, database: str = ":memory:",
            settings: Iterable[str] = ()):
    """A DuckDB connection for work on the side (collectors' decoding, duplicate checks) with
    bounded ``memory_limit`` and ``threads``; past the limit it spills to ``temp_directory``.
    ``settings``: further ``SET`` statements' bodies, e.g. ``"preserve_insertion_order = false"``.
    The caller closes it."""
    import duckdb

    con = duckdb.connect(database)
    try:
        if memory_limit:
            con.execute(f"SET memory_limit = {lit(memory_limit)}")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        if temp_directory is not None:
            con.execute(f"SET temp_directory = {lit(temp_directory)}")
        for s in settings:
            con.execute(f"SET {s}")
    except BaseException:
        con.close()
        raise
    return con


def native():
    """DuckDB's C++ extension module, ``_duckdb``, which the ``duckdb`` package re-exports
    (``duckdb.connect is _duckdb.connect``, ``duckdb.Error is _duckdb.Error``); the package itself
    where a DuckDB has no such module. It has the connections, the exception classes and the
    DB-API methods (``execute``, ``fetchmany``, ``description``, ``abort``, ``interrupt``), not the
    relations the package's Python layer adds to every connection when it is imported (``sql()``,
    ``to_arrow_table()``, ...: about 45 ms of a small query's import time, issue 39). Code that
    makes relations on a connection calls :func:`with_relations` first."""
    try:
        import _duckdb as module
    except ImportError:  # another packaging of DuckDB
        import duckdb as module
    return module


def with_relations(con):
    """``con`` once the ``duckdb`` package is imported: its Python layer gives every connection
    its relation methods (``sql()``, ``to_arrow_table()``, ...; :func:`native`)."""
    import duckdb  # noqa: F401 - imported for its effect on the connection type

    return con


_AHEAD: dict[str, tuple[threading.Thread, dict]] = {}  # the connection connect_ahead is opening


def connect_ahead() -> None:
    """Start opening an in-memory DuckDB connection in a helper thread; the next
    :func:`memory_connection` takes it. DuckDB's ``connect()`` (about 20 ms, the first in a
    process) releases the GIL, so it overlaps the imports and run-folder reads that come before a
    query's engine opens (issue 39: a small ``tracekit query``'s start-up). Does nothing when one
    is already being opened. The thread is not a daemon: an exit waits for it.

    Only DuckDB's C++ extension (:func:`native`, about 10 ms) is imported, in the calling
    thread; the helper thread imports nothing."""
    if "pending" in _AHEAD:
        return
    module = native()
    box: dict = {}

    def target():
        try:
            box["con"] = module.connect(":memory:")
        except BaseException:  # noqa: BLE001 - memory_connection connects again and raises
            pass

    thread = threading.Thread(target=target, name="tracekit-connect")
    _AHEAD["pending"] = (thread, box)
    thread.start()


def memory_connection():
    """A new in-memory DuckDB connection: the one :func:`connect_ahead` started (each is taken
    once), else one opened now; without the relation methods until the ``duckdb`` package is
    imported (:func:`with_relations`). Raises as ``duckdb.connect`` does."""
    pending = _AHEAD.pop("pending", None)
    if pending is not None:
        thread, box = pending
        thread.join()
        if "con" in box:
            return box["con"]
    return native().connect(":memory:")


def fetch_arrow(result) -> pa.Table:
    """Arrow table of a DuckDB relation (``to_arrow_table`` in DuckDB >= 1.4, else ``arrow``)."""
    fn = getattr(result, "to_arrow_table", None) or result.arrow
    out = fn()
    import pyarrow as pa

    return out if isinstance(out, pa.Table) else out.read_all()


PLAIN_TYPES = frozenset({"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT",
                         "USMALLINT", "UINTEGER", "UBIGINT", "DOUBLE", "VARCHAR"})
"""DuckDB types whose Python values (bool, int, float, str, None) write exactly as their Arrow
values do (tracekit/cli/serialize.py); results of other types are fetched as Arrow."""


class Rows:
    """A query result as Python rows, fetched without pyarrow (:func:`fetch`): ``names`` (column
    names, in order), ``types`` (DuckDB type names, all in :data:`PLAIN_TYPES`), ``rows`` (list of
    tuples). Has the few :class:`pyarrow.Table` members the CLI's writers use: ``num_rows``,
    ``num_columns``, ``column_names``, :meth:`select`."""

    __slots__ = ("names", "types", "rows")

    def __init__(self, names: list[str], types: list[str], rows: list[tuple]):
        self.names, self.types, self.rows = list(names), list(types), rows

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    @property
    def num_columns(self) -> int:
        return len(self.names)

    @property
    def column_names(self) -> list[str]:
        return list(self.names)

    def select(self, names: list[str]) -> Rows:
        """The columns ``names`` (each present), in that order."""
        idx = [self.names.index(n) for n in names]
        return Rows(names, [self.types[i] for i in idx], [tuple(r[i] for i in idx) for r in self.rows])


ROWS_CELLS = 200_000
"""At most this many values (rows x columns) come as :class:`Rows`; a larger result comes as Arrow.
The CLI writes a Rows result as CSV in Python at about 0.4 µs a value, against about 0.1 s to
import pyarrow and a few ns a value in its writer (12,300 rows of 12 columns: 0.06 s in Python).
The query engine also asks for Rows only where the tables a query reads hold at most this many
rows (:meth:`tracekit.query.engine.Engine.reads_few_rows`)."""


def fetch(result, arrow: bool = True) -> pa.Table | Rows:
    """The rows of DuckDB relation ``result``: as :func:`fetch_arrow`, or, with ``arrow`` False,
    every column of a :data:`PLAIN_TYPES` type, the names distinct and at most :data:`ROWS_CELLS`
    values, as :class:`Rows` (no pyarrow import). Which one is found by fetching at most
    ROWS_CELLS values plus one row (``LIMIT``: a scan stops there); a larger result is then
    fetched whole as Arrow, so its query runs a second time (a sort keeps the top rows only the
    first time; an aggregation runs twice)."""
    if arrow or result is None:
        return fetch_arrow(result)
    types, names = [str(t) for t in result.types], list(result.columns)
    most = _rows_most(names, types)
    if most is None:
        return fetch_arrow(result)
    head = result.limit(most + 1).fetchall()
    return Rows(names, types, head) if len(head) <= most else fetch_arrow(result)


def _rows_most(names: list[str], types: list[str]) -> int | None:
    """The most rows a result of these columns may have as :class:`Rows` (:data:`ROWS_CELLS`
    values), or None where it cannot be Rows at all (a type not in :data:`PLAIN_TYPES`, a
    repeated name)."""
    if not all(t in PLAIN_TYPES for t in types) or len(set(names)) < len(names):
        return None
    return max(ROWS_CELLS // max(len(names), 1), 1)


def fetch_query(con, text: str, arrow: bool = True) -> pa.Table | Rows:
    """The rows of ``text``, one SELECT with no side effects (a named query), on connection
    ``con``: as :func:`fetch`, but with ``arrow`` False the statement runs once through DB-API
    (``execute``, ``fetchmany``) instead of as a relation and again with a ``LIMIT``, which binds
    and plans it twice (about 4 ms of a small query's 8). A result not all of
    :data:`PLAIN_TYPES`, with a repeated name or of more than :data:`ROWS_CELLS` values runs a
    second time, fetched as Arrow."""
    if arrow:
        return fetch_arrow(with_relations(con).sql(text))
    cur = con.execute(text)
    try:
        names = [d[0] for d in cur.description]
        types = [str(d[1]) for d in cur.description]
        most = _rows_most(names, types)
        if most is not None:
            head = cur.fetchmany(most + 1)
            if len(head) <= most:
                return Rows(names, types, head)
    finally:  # DuckDB >= 2.0 keeps the connection busy until a result is read to its end
        end = getattr(con, "abort", None)
        if end is not None:
            end()
    return fetch_arrow(with_relations(con).sql(text))


def re2_error(pattern: str) -> str | None:
    """Why DuckDB's regular expressions refuse ``pattern`` (one line, at most 200 characters), or
    None when they compile it. DuckDB uses RE2: linear time in the text, so no backreferences
    and no lookaround (``(?=a)``: ``invalid perl operator``), which Python's ``re`` accepts."""
    import duckdb

    from tracekit.errors import one_line

    con = duckdb.connect(":memory:")
    try:
        con.execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
    except duckdb.Error as exc:
        return one_line(exc)[:200]
    finally:
        con.close()
    return None
