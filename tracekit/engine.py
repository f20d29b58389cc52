"""DuckDB views over one or many run folders, and the runner for named and ad-hoc SQL.

Every table of :mod:`tracekit.schema` is a view with the same name and an extra leading column
``run_id`` (the run folder's ``run_id`` from its manifest, by default the folder name). A table a
run did not capture contributes no rows; a table no run captured is an empty view with the right
column types. Two more views describe the runs themselves:

- ``runs``: ``run_id, path, manifest`` (the manifest as DuckDB JSON)
- ``run_tables``: ``run_id, table_name, captured, rows, reason`` — whether each table was captured,
  so queries can tell "not captured" (NULL) from "captured, zero events" (0).

The macros of ``queries/_macros.sql`` (``tk_steps()``, ``tk_busy_islands(set)``, ``tk_gpu_gaps()``,
... — shared definitions of steps, GPU busy intervals and idle gaps; see docs/metrics.md) and the
roofline tables and macros (:mod:`tracekit.roofline`) are there too, so named and ad-hoc SQL can
call them.

Views, macros and roofline tables are created on demand: before a statement runs, the ones whose
names it (or a macro it calls) mentions are created, so a query that reads one table does not pay
for binding sixteen Parquet views and every macro (a third of a `tracekit query` run's time on a
small query). :attr:`Engine.con` creates all of them first, for direct DuckDB use.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tracekit import schema
from tracekit.errors import QueryError
from tracekit.named_queries import NamedQuery, get_query, macros_sql
from tracekit.runfolder import Run, open_run

_DUCK_TYPES = {
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.string(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
}


def duck_type(t: pa.DataType) -> str:
    """DuckDB type name of a schema column's Arrow type (lists as ``T[]``)."""
    if pa.types.is_list(t):
        return duck_type(t.value_type) + "[]"
    return _DUCK_TYPES[t]


def _lit(s: str) -> str:
    return "'" + str(s).replace("'", "''") + "'"


class Engine:
    """Query engine over run folders.

    ``Engine(["runs/a", "runs/b"]).query("kernel_summary")`` returns a :class:`pyarrow.Table`.
    Raises :class:`~tracekit.errors.RunFolderError` for a path that is not a run folder and
    :class:`~tracekit.errors.QueryError` for two runs with the same run_id or failing SQL.
    """

    def __init__(self, run_dirs: Sequence[str | os.PathLike], *, threads: int | None = None,
                 memory_limit: str | None = None):
        self.runs: list[Run] = [open_run(p) for p in run_dirs]
        seen: dict[str, Run] = {}
        for r in self.runs:
            if r.run_id in seen:
                raise QueryError(
                    f"two run folders have run_id {r.run_id!r}: {seen[r.run_id].path} and {r.path}"
                )
            seen[r.run_id] = r
        self._con = duckdb.connect(":memory:")
        # joins and sorts past the memory limit spill here (DuckDB's default for an in-memory
        # database is .tmp in the working directory); removed by close()
        self._spill = tempfile.mkdtemp(prefix="tracekit-spill-")
        self._con.execute(f"SET temp_directory = {_lit(self._spill)}")
        if threads:
            self._con.execute(f"SET threads = {int(threads)}")
        if memory_limit:
            try:
                self._con.execute(f"SET memory_limit = {_lit(memory_limit)}")
            except duckdb.Error as exc:
                self.close()
                raise QueryError(f"memory limit {memory_limit!r}: {_one_line(exc)}") from None
        self._created: set[str] = set()  # views, macros and "roofline" created so far
        self.notices: list[str] = []  # lines of the last named query's @notice statements

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection, with every view, macro and roofline table created."""
        self._prepare(None)
        return self._con

    # -- views and macros, on demand -------------------------------------------------------
    def _prepare(self, text: str | None) -> None:
        """Create the views, macros and roofline tables that ``text`` needs (all for None)."""
        macros = _macro_statements()
        if text is None:
            want = set(schema.TABLES) | {"runs", "run_tables", _ROOFLINE} | set(macros)
        else:
            want = set()
            todo = _identifiers(text)
            seen: set[str] = set()
            while todo:  # names used by the statement and, transitively, by the macros it calls
                name = todo.pop()
                if name in seen:
                    continue
                seen.add(name)
                if name in macros:
                    want.add(name)
                    todo |= _identifiers(macros[name])
                elif name in _roofline_names():
                    want.add(_ROOFLINE)
                    todo |= _roofline_identifiers()
                elif name in schema.TABLES or name in ("runs", "run_tables"):
                    want.add(name)
        want -= self._created
        if not want:
            return
        for name in schema.TABLES:
            if name in want:
                self._create_view(name)
        if want & {"runs", "run_tables"}:
            self._create_run_tables()
            want |= {"runs", "run_tables"}
        todo = [m for m in macros if m in want]  # file order: a macro after those it calls
        if todo:
            try:
                self._con.execute("\n".join(macros[m] for m in todo))
            except duckdb.Error as exc:
                raise QueryError(f"queries/_macros.sql failed: {_one_line(exc)}") from None
        if _ROOFLINE in want:
            from tracekit.roofline import register as _register_roofline

            _register_roofline(self._con)  # gpu_peaks table + roofline macros (docs/roofline.md)
        self._created |= want

    def _create_view(self, name: str):
        tdef = schema.TABLES[name]
        parts = []
        for r in self.runs:
            p = r.table_path(name)
            if p is not None:
                parts.append(_run_select(r, p, tdef))
        if parts:
            sql = f"CREATE VIEW {name} AS " + "\nUNION ALL\n".join(parts)
        else:
            cols = ", ".join(
                ["CAST(NULL AS VARCHAR) AS run_id"]
                + [f'CAST(NULL AS {duck_type(c.type)}) AS "{c.name}"' for c in tdef.columns]
            )
            sql = f"CREATE VIEW {name} AS SELECT {cols} WHERE false"
        self._con.execute(sql)

    def _create_run_tables(self):
        rows, tables = [], []
        for r in self.runs:
            rows.append((r.run_id, str(r.path), json.dumps(r.manifest)))
            for name in schema.TABLES:
                info = r.manifest.get("tables", {}).get(name)
                reason = r.manifest.get("not_captured", {}).get(name)
                tables.append((r.run_id, name, info is not None, None if info is None else info.get("rows"), reason))
        self._con.execute("CREATE TABLE runs (run_id VARCHAR, path VARCHAR, manifest JSON)")
        if rows:
            self._con.executemany("INSERT INTO runs VALUES (?, ?, ?)", rows)
        self._con.execute(
            "CREATE TABLE run_tables (run_id VARCHAR, table_name VARCHAR, captured BOOLEAN, rows BIGINT, reason VARCHAR)"
        )
        if tables:
            self._con.executemany("INSERT INTO run_tables VALUES (?, ?, ?, ?, ?)", tables)

    # -- running --------------------------------------------------------------------------
    def sql(self, text: str) -> pa.Table:
        """Run ad-hoc SQL over the views; returns an Arrow table. :class:`QueryError` on failure."""
        self._prepare(text)
        try:
            return fetch_arrow(self._con.sql(text))
        except duckdb.Error as exc:
            raise QueryError(f"SQL failed: {_one_line(exc)}") from None

    def query(self, name: str | NamedQuery, params: dict[str, str] | None = None) -> pa.Table:
        """Run a named query with ``params`` (name -> text value, cast to the declared type)."""
        q = name if isinstance(name, NamedQuery) else get_query(name)
        self._set_params(q, params or {})
        self._prepare(q.sql)
        try:
            result = fetch_arrow(self._con.sql(q.sql))
        except duckdb.Error as exc:
            raise QueryError(f"query {q.name} failed: {_one_line(exc)}") from None
        self.notices = self._notices(q, result)
        return result

    def _notices(self, q: NamedQuery, result: pa.Table) -> list[str]:
        """The lines of ``q``'s ``@notice`` statements over ``result`` (see named_queries)."""
        out: list[str] = []
        if not q.notices:
            return out
        self._con.register("result", result)
        try:
            for stmt in q.notices:
                self._prepare(stmt)
                try:
                    rows = self._con.sql(stmt).fetchall()
                except duckdb.Error as exc:
                    raise QueryError(f"query {q.name}: @notice failed: {_one_line(exc)}") from None
                out.extend(str(r[0]) for r in rows if r and r[0] is not None)
        finally:
            self._con.unregister("result")
        return out

    def _set_params(self, q: NamedQuery, params: dict[str, str]):
        for key in params:
            q.param(key)  # raises for unknown names
        for p in q.params:
            value = params.get(p.name, p.default)
            if value is None or (p.name not in params and p.default.upper() == "NULL"):
                expr = f"CAST(NULL AS {p.type})"
            else:
                expr = f"CAST({_lit(value)} AS {p.type})"
            try:
                self._con.execute(f"SET VARIABLE {p.name} = {expr}")
            except duckdb.Error:
                raise QueryError(
                    f"query {q.name}: parameter {p.name}={value!r} is not a valid {p.type}"
                ) from None

    def close(self):
        self._con.close()
        shutil.rmtree(self._spill, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_ROOFLINE = "<roofline>"  # marker: tracekit.roofline.register has run
# the tables tracekit.roofline.register creates beside the macros of queries/roofline/_macros.sql
_ROOFLINE_TABLES = frozenset({"gpu_peaks", "gpu_aliases", "tensor_factors", "tk_ncu_spec"})
_IDENT = re.compile(r"[a-z_][a-z0-9_]*")
_COMMENT = re.compile(r"--[^\n]*")
_MACRO = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?MACRO\s+(\w+)",
                    re.IGNORECASE | re.MULTILINE)


def _identifiers(text: str) -> set[str]:
    """Every word of ``text`` outside ``--`` comments that could name a view or macro (lower case;
    words in string literals count too, which can only create more than needed)."""
    return set(_IDENT.findall(_COMMENT.sub("", text).lower()))


@functools.cache
def _macro_statements() -> dict[str, str]:
    """``queries/_macros.sql`` and ``queries/ops/_macros.sql`` as {macro name (lower case): its
    CREATE statement}, in file order."""
    text = macros_sql() + "\n" + macros_sql("ops")  # shared macros, then the operator cost model
    starts = list(_MACRO.finditer(text))
    ends = [m.start() for m in starts[1:]] + [len(text)]
    return {m.group(1).lower(): text[m.start():end] for m, end in zip(starts, ends)}


@functools.cache
def _roofline_identifiers() -> frozenset[str]:
    from tracekit.roofline import macros_text

    return frozenset(_identifiers(macros_text()))


@functools.cache
def _roofline_names() -> frozenset[str]:
    """Names that need the roofline tables and macros: its tables and every macro its
    queries/roofline/_macros.sql creates."""
    from tracekit.roofline import macros_text

    return _ROOFLINE_TABLES | {m.group(1).lower() for m in _MACRO.finditer(macros_text())}


def _run_select(run: Run, path, tdef) -> str:
    """SELECT of one run's Parquet file with exactly the schema's columns, in schema order.

    A column the file lacks (a run folder written before the column was added to the schema)
    reads as NULL of the schema's type; columns the schema does not know are ignored.
    """
    present = set(pq.read_schema(path).names)
    cols = [f"{_lit(run.run_id)} AS run_id"]
    for c in tdef.columns:
        if c.name in present:
            cols.append(f'CAST("{c.name}" AS {duck_type(c.type)}) AS "{c.name}"')
        else:
            cols.append(f'CAST(NULL AS {duck_type(c.type)}) AS "{c.name}"')
    return f"SELECT {', '.join(cols)} FROM read_parquet({_lit(path)})"


def fetch_arrow(result) -> pa.Table:
    """Arrow table of a DuckDB relation (``to_arrow_table`` in DuckDB >= 1.4, else ``arrow``)."""
    fn = getattr(result, "to_arrow_table", None) or result.arrow
    out = fn()
    return out if isinstance(out, pa.Table) else out.read_all()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
