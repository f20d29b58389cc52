"""DuckDB views over one or many run folders, and the runner for named and ad-hoc SQL.

Every table of :mod:`tracekit.schema` is a view with the same name and an extra leading column
``run_id`` (the run folder's ``run_id`` from its manifest, by default the folder name). A table a
run did not capture contributes no rows; a table no run captured is an empty view with the right
column types. Two more views describe the runs themselves:

- ``runs``: ``run_id, path, manifest`` (the manifest as DuckDB JSON)
- ``run_tables``: ``run_id, table_name, captured, rows, reason`` — whether each table was captured,
  so queries can tell "not captured" (NULL) from "captured, zero events" (0).

The macros of ``queries/_macros.sql`` (``tk_steps()``, ``tk_busy_islands(set)``, ``tk_gpu_gaps()``,
... — shared definitions of steps, GPU busy intervals and idle gaps; see docs/metrics.md) are
created on every connection after the views, so named and ad-hoc SQL can call them.
"""

from __future__ import annotations

import json
import os
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
        self.con = duckdb.connect(":memory:")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        if memory_limit:
            self.con.execute(f"SET memory_limit = {_lit(memory_limit)}")
        self._create_views()
        self._create_macros()
        from tracekit.roofline import register as _register_roofline

        _register_roofline(self.con)  # gpu_peaks table + roofline macros (docs/roofline.md)

    # -- views ----------------------------------------------------------------------------
    def _create_views(self):
        for name, tdef in schema.TABLES.items():
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
            self.con.execute(sql)
        rows, tables = [], []
        for r in self.runs:
            rows.append((r.run_id, str(r.path), json.dumps(r.manifest)))
            for name in schema.TABLES:
                info = r.manifest.get("tables", {}).get(name)
                reason = r.manifest.get("not_captured", {}).get(name)
                tables.append((r.run_id, name, info is not None, None if info is None else info.get("rows"), reason))
        self.con.execute("CREATE TABLE runs (run_id VARCHAR, path VARCHAR, manifest JSON)")
        if rows:
            self.con.executemany("INSERT INTO runs VALUES (?, ?, ?)", rows)
        self.con.execute(
            "CREATE TABLE run_tables (run_id VARCHAR, table_name VARCHAR, captured BOOLEAN, rows BIGINT, reason VARCHAR)"
        )
        if tables:
            self.con.executemany("INSERT INTO run_tables VALUES (?, ?, ?, ?, ?)", tables)

    def _create_macros(self):
        """Shared macros of the named queries (queries/_macros.sql: tk_busy_islands, tk_steps, ...)."""
        text = macros_sql()
        if text:
            try:
                self.con.execute(text)
            except duckdb.Error as exc:
                raise QueryError(f"queries/_macros.sql failed: {_one_line(exc)}") from None

    # -- running --------------------------------------------------------------------------
    def sql(self, text: str) -> pa.Table:
        """Run ad-hoc SQL over the views; returns an Arrow table. :class:`QueryError` on failure."""
        try:
            return fetch_arrow(self.con.sql(text))
        except duckdb.Error as exc:
            raise QueryError(f"SQL failed: {_one_line(exc)}") from None

    def query(self, name: str | NamedQuery, params: dict[str, str] | None = None) -> pa.Table:
        """Run a named query with ``params`` (name -> text value, cast to the declared type)."""
        q = name if isinstance(name, NamedQuery) else get_query(name)
        self._set_params(q, params or {})
        try:
            return fetch_arrow(self.con.sql(q.sql))
        except duckdb.Error as exc:
            raise QueryError(f"query {q.name} failed: {_one_line(exc)}") from None

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
                self.con.execute(f"SET VARIABLE {p.name} = {expr}")
            except duckdb.Error:
                raise QueryError(
                    f"query {q.name}: parameter {p.name}={value!r} is not a valid {p.type}"
                ) from None

    def close(self):
        self.con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


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
