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
names extensions provide (:mod:`tracekit.query.hooks`: the roofline tables and macros, the
critical path) are there too, so named and ad-hoc SQL can call them.

Views, macros and extensions' names are created on demand: before a statement runs, the ones whose
names it (or a macro it calls) mentions are created, so a query that reads one table does not pay
for binding sixteen Parquet views and every macro (a third of a `tracekit query` run's time on a
small query). :attr:`Engine.con` creates all of them first, for direct DuckDB use.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit import schema
from tracekit.duck import (
    ROWS_CELLS,
    Rows,
    fetch,
    fetch_arrow,
    fetch_query,
    glob_literal,
    lit,
    memory_connection,
    native,
    with_relations,
)
from tracekit.errors import QueryError, one_line
from tracekit.query import catalog, hooks, interruptible
from tracekit.query.named_queries import NamedQuery, get_query
from tracekit.runfolder import Run, open_run

if TYPE_CHECKING:  # pyarrow is imported where an Arrow result is made, not by `tracekit query`'s start
    import duckdb
    import pyarrow as pa

# DuckDB's extension module: connections, exception classes, DB-API methods. A named query
# fetched as Rows never needs the duckdb package's Python layer (relations; tracekit.duck.native);
# the methods that make relations on the connection import it (with_relations).
_db = native()

__all__ = ["Engine", "fetch_arrow", "glob_literal", "resolve_step_pattern",
           "set_step_pattern", "STEP_PATTERN_ENV"]


class Engine:
    """Query engine over run folders.

    ``Engine(["runs/a", "runs/b"]).query("kernel_summary")`` returns a :class:`pyarrow.Table`.
    A run folder is a path or an opened :class:`~tracekit.runfolder.Run` (a worker's part of a
    job: the folder with its manifest narrowed to some ranks' files, tracekit.whatif.parts).
    Raises :class:`~tracekit.errors.RunFolderError` for a path that is not a run folder and
    :class:`~tracekit.errors.QueryError` for two runs with the same run_id, failing SQL or an
    invalid ``step_pattern``.

    ``step_pattern``: a regular expression (RE2 syntax) naming the NVTX / annotation ranges that are
    training steps, the first capture group being the step number (``--step-pattern``); None reads
    the environment variable ``TRACEKIT_STEP_PATTERN``; '' or unset means none. Steps come from the
    first source a run has: tracekit's ``step N`` ranges, PyTorch's ``ProfilerStep#N``, this
    pattern, else iterations detected in the kernel sequence (``tk_steps()``, docs/metrics.md).

    ``filters``: a :class:`tracekit.query.filters.Filters` (``--step``, ``--window``, ``--rank``,
    ``--device``, ``--nvtx``) narrowing every table's view; None: those of the caller's context
    (:func:`tracekit.query.filters.use`, none by default).
    """

    def __init__(self, run_dirs: Sequence[str | os.PathLike | Run], *, threads: int | None = None,
                 memory_limit: str | None = None, external_access: bool = True,
                 step_pattern: str | None = None, filters=None):
        self.runs: list[Run] = [p if isinstance(p, Run) else open_run(p) for p in run_dirs]
        seen: dict[str, Run] = {}
        for r in self.runs:
            if r.run_id in seen:
                raise QueryError(
                    f"two run folders have run_id {r.run_id!r}: {seen[r.run_id].path} and {r.path}"
                )
            seen[r.run_id] = r
        self._con = memory_connection()  # opened ahead by the query commands (duck.connect_ahead)
        # joins and sorts past the memory limit spill here (DuckDB's default for an in-memory
        # database is .tmp in the working directory); removed by close(), or when the engine is
        # collected or Python exits if no one closes it
        self._spill = tempfile.mkdtemp(prefix="tracekit-spill-")
        self._remove_spill = weakref.finalize(self, shutil.rmtree, self._spill, True)
        self._con.execute(f"SET temp_directory = {lit(self._spill)}")
        # DuckDB picks quadratic join algorithms for inputs it estimates small: an ASOF join with
        # <= 64 rows on its left as a nested-loop join plus a group-by, a range join with <= 1000
        # rows on a side as a piecewise merge join, any join of <= 5 rows a side as a nested
        # loop. Its estimates of a view over many runs' files are far too small (gpu_idle over
        # 30 run folders: 49 s instead of 2.5 s, nvtx_gpu_projection 92 s instead of 3.3 s), so
        # the linear algorithms are always used (ASOF, IEJoin, hash join).
        self._con.execute("SET asof_loop_join_threshold = 0")
        self._con.execute("SET merge_join_threshold = 0")
        self._con.execute("SET nested_loop_join_threshold = 0")
        # every scan of a view opens each of its files and reads its footer again; a step-based
        # query scans kernels and nvtx_ranges several times, 300 run folders' files each time.
        # The footers are kept (DuckDB checks each file's modification time before reusing one).
        self._con.execute("SET parquet_metadata_cache = true")
        if threads:
            self._con.execute(f"SET threads = {int(threads)}")
        if memory_limit:
            try:
                self._con.execute(f"SET memory_limit = {lit(memory_limit)}")
            except _db.Error as exc:
                self.close()
                raise QueryError(f"memory limit {memory_limit!r}: {one_line(exc)}") from None
        self._created: set[str] = set()  # views, macros and extension markers created so far
        self._external = external_access  # False: sql() reads only the run folders' tables
        self._locked = False
        if not external_access:  # the views read through the read-only file system (sql_guard)
            from tracekit.query.sql_guard import mount

            mount(with_relations(self._con))
        self.step_pattern = resolve_step_pattern(step_pattern)
        if self.step_pattern is not None:
            try:
                set_step_pattern(self._con, self.step_pattern)
            except QueryError:
                self.close()
                raise
        self.notices: list[str] = []  # lines of the last named query's @notice statements
        if filters is None:  # the filters of the caller's context (tracekit.query.filters.use)
            from tracekit.query.filters import current

            filters = current()
        self.filters = None  # tracekit.query.filters.Filters: narrowed views
        self._steps_pending = False  # filtered, and tk_filter_steps not made yet
        if filters:
            from tracekit.query.filters import prepare

            try:  # what the filter needs, from this connection's views while still unfiltered
                with self._verified():
                    prepare(with_relations(self._con), filters, self._prepare)
                self._drop_views()
            except BaseException:
                self.close()
                raise
            self.filters = filters
            self._steps_pending = not filters.steps

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection, with every view, macro and extension (the roofline tables; not
        the critical path, made on first use) created, its files' checksums checked, and
        DuckDB's relation methods."""
        with self._verified():
            self._prepare(None)
        return with_relations(self._con)

    # -- views and macros, on demand -------------------------------------------------------
    def _prepare(self, text: str | None) -> None:
        """Create the views, macros and extensions' names that ``text`` needs (all for None;
        :mod:`tracekit.query.hooks`): the names an extension reads first, then the extension."""
        macros = catalog.macro_statements()
        want = catalog.everything() if text is None else catalog.needed(text)
        exts = [e for e in hooks.extensions() if e.marker in want and e.marker not in self._created]
        if self._steps_pending and ("tk_steps" in want or any(e.steps for e in exts)):
            self._filter_steps()
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
            except _db.Error as exc:
                raise QueryError(f"queries/_macros.sql failed: {one_line(exc)}") from None
        if "tk_steps" in want:
            self._cache_steps()
        self._created |= want
        for ext in exts:  # e.g. the roofline tables (docs/roofline.md), the critical path
            try:  # marked first: its prepare may ask for Engine.con, which must not re-enter it
                ext.prepare(self, with_relations(self._con))
            except BaseException:
                self._created.discard(ext.marker)
                raise

    def _filter_steps(self) -> None:
        """The kept steps of a filtered engine (:func:`tracekit.query.filters.prepare_steps`), from the
        unfiltered views, made when a statement first calls tk_steps(): the views created so far
        are dropped, created unfiltered for the steps, and dropped again."""
        from tracekit.query.filters import prepare_steps

        filters, self.filters, self._steps_pending = self.filters, None, False
        try:
            self._drop_views()
            prepare_steps(with_relations(self._con), filters, self._prepare)
        finally:
            self._drop_views()
            self.filters = filters

    def _drop_views(self) -> None:
        """Forget the table views, the macros and the tk_steps() cache created so far (the
        unfiltered ones :func:`tracekit.query.filters.prepare` read): the next statement creates them
        anew, narrowed by ``self.filters``. The runs and run_tables tables stay."""
        for name in self._created & set(schema.TABLES):
            self._con.execute(f"DROP VIEW {name}")
        if "tk_steps" in self._created:
            self._con.execute("DROP TABLE tk_steps_cache")
        self._created &= {"runs", "run_tables"}

    def _cache_steps(self) -> None:
        """Compute ``tk_steps()`` once per engine into the temp table ``tk_steps_cache`` and make
        the macro read it: a step-based query calls it several times (every window of
        ``tk_busy_between``, ``tk_idle_between``, ...), and detecting iterations reads every
        kernel. The runs and the step pattern are fixed for the engine's lifetime."""
        source = "tk_filter_steps" if self.filters is not None else "tk_steps()"  # kept steps only
        try:
            self._con.execute(f"CREATE TEMP TABLE tk_steps_cache AS SELECT * FROM {source}")
            self._con.execute("CREATE OR REPLACE TEMP MACRO tk_steps() AS TABLE "
                              "SELECT * FROM tk_steps_cache")
        except _db.Error as exc:
            raise QueryError(f"queries/_macros.sql: tk_steps() failed: {one_line(exc)}") from None

    def _create_view(self, name: str):
        """One ``read_parquet`` over the literal list of every run's files of table ``name``,
        with ``run_id`` looked up by each row's file position: the cost of a view grows with its
        rows, not with the number of runs or files (docs/performance.md)."""
        tdef = schema.TABLES[name]
        files = [(r.run_id, self._file_path(p), r.file_columns(p))
                 for r in self.runs for p in r.table_files(name, defer=True)]  # checked by _verified
        if not files:
            cols = ", ".join(
                ["CAST(NULL AS VARCHAR) AS run_id"]
                + [f'CAST(NULL AS {c.kind.sql}) AS "{c.name}"' for c in tdef.columns]
            )
            self._con.execute(f"CREATE VIEW {name} AS SELECT {cols} WHERE false")
            return
        select = _files_select(name, files, tdef)
        if self.filters is not None:  # tracekit.query.filters: rows outside the filter are not there
            from tracekit.query.filters import narrowed

            select = narrowed(select, name, self.filters, {"run_id", *tdef.column_names})
        self._con.execute(f"CREATE VIEW {name} AS " + select)

    def _file_path(self, p: Path) -> str:
        if self._external:
            return str(p.absolute())
        from tracekit.query.sql_guard import url

        return url(p)

    def _insert(self, table: str, columns: dict[str, list]) -> None:
        """Append rows given as columns (equal-length lists) to ``table`` in one statement: one
        INSERT per row costs ~0.1 ms, 2.6 s for the run tables of 300 run folders."""
        names = list(columns)
        sel = ", ".join(f"unnest(${i + 1}) AS {n}" for i, n in enumerate(names))
        self._con.execute(f"INSERT INTO {table} BY NAME SELECT {sel}", [columns[n] for n in names])

    def _create_run_tables(self):
        runs = {"run_id": [], "path": [], "manifest": []}
        tables = {"run_id": [], "table_name": [], "captured": [], "rows": [], "reason": []}
        for r in self.runs:
            runs["run_id"].append(r.run_id)
            runs["path"].append(str(r.path))
            runs["manifest"].append(json.dumps(r.manifest))
            for name in schema.TABLES:
                info = r.manifest.get("tables", {}).get(name)
                rows = None if info is None else info.get("rows")
                tables["run_id"].append(r.run_id)
                tables["table_name"].append(name)
                tables["captured"].append(info is not None)
                ok = isinstance(rows, int) and not isinstance(rows, bool)
                tables["rows"].append(rows if ok else None)
                reason = r.manifest.get("not_captured", {}).get(name)
                tables["reason"].append(None if reason is None else str(reason))
        self._con.execute("CREATE TABLE runs (run_id VARCHAR, path VARCHAR, manifest JSON)")
        if self.runs:
            self._insert("runs", runs)
        self._con.execute(
            "CREATE TABLE run_tables (run_id VARCHAR, table_name VARCHAR, captured BOOLEAN, "
            "rows BIGINT, reason VARCHAR)"
        )
        if self.runs:
            self._insert("run_tables", tables)

    # -- running --------------------------------------------------------------------------
    def sql(self, text: str, arrow: bool = True) -> pa.Table | Rows:
        """Run ad-hoc SQL over the views; returns an Arrow table (with ``arrow`` False, a
        :class:`~tracekit.duck.Rows` where :func:`tracekit.duck.fetch` can and it :meth:`reads_few_rows`).
        :class:`QueryError` on failure.

        With ``external_access=False`` (``tracekit sql`` without ``--allow-external``) the
        statement may read no file but the run folders' tables, write none, attach nothing and
        change no setting (:mod:`tracekit.query.sql_guard`)."""
        if not self._external:
            from tracekit.query.sql_guard import check_statements

            check_statements(text)
        with self._verified():
            self._prepare(text)
            if not self._external and not self._locked:
                from tracekit.query.sql_guard import lock

                lock(with_relations(self._con), self.runs, self._spill)
                self._locked = True
            arrow = arrow or not self.reads_few_rows(text)
            try:  # Ctrl-C and SIGTERM stop DuckDB at once (tracekit/query/interruptible.py)
                con = with_relations(self._con)
                return interruptible.run(con, lambda: fetch(con.sql(text), arrow))
            except _db.Error as exc:
                from tracekit.query.explain import sql_error
                from tracekit.query.sql_guard import read_only_error

                message = one_line(exc)
                raise QueryError(read_only_error(message) or f"SQL failed: {sql_error(message)}") from None

    def query(self, name: str | NamedQuery, params: dict[str, str] | None = None,
              arrow: bool = True) -> pa.Table | Rows:
        """Run a named query with ``params`` (name -> text value, cast to the declared type).
        ``arrow`` False: :class:`~tracekit.duck.Rows` where :func:`tracekit.duck.fetch_query`
        can, the query has no ``@notice`` (which reads the result as an Arrow table) and either
        :meth:`reads_few_rows` or its header says the result has few rows (``@few_rows``,
        :meth:`NamedQuery.has_few_rows`)."""
        q = name if isinstance(name, NamedQuery) else get_query(name)
        self.set_params(q, params or {})
        with self._verified():
            self._prepare(q.sql)
            arrow = arrow or bool(q.notices) or not (q.has_few_rows(params or {})
                                                     or self.reads_few_rows(q.sql))
            try:
                result = interruptible.run(self._con, lambda: fetch_query(self._con, q.sql, arrow))
            except _db.Error as exc:
                raise QueryError(f"query {q.name} failed: {one_line(exc)}") from None
            self.notices = self.notices_for(q, result)
        return result

    @contextlib.contextmanager
    def _verified(self):
        """Check the checksums deferred while views were made (``Run.table_files(defer=True)``:
        the files are hashed in a helper thread while DuckDB reads them) before anything read
        from them leaves the engine; where reading failed first (DuckDB's error on a damaged
        page, a bad value), a damaged file's :class:`~tracekit.errors.RunFolderError` is raised
        instead."""
        try:
            yield
        finally:  # a damaged file's error replaces the one reading it raised
            self._settle()

    def _settle(self) -> None:
        for r in self.runs:
            r.settle()

    def reads_few_rows(self, text: str) -> bool:
        """Whether the run-folder tables ``text`` reads hold at most
        :data:`tracekit.duck.ROWS_CELLS` rows in all (the manifests' counts): only then may a
        result come as :class:`~tracekit.duck.Rows`. :func:`~tracekit.duck.fetch` finds out
        whether the result is small by running the query with a ``LIMIT`` first; over large
        tables a large result would then cost a second run (nvtx_gpu_projection on the 596 MB
        benchmark run: 6.7 s instead of 4.1 s), so those are fetched as Arrow at once."""
        read = catalog.tables_read(text)
        return sum(run.table_rows(name) or 0 for name in read for run in self.runs) <= ROWS_CELLS

    def notices_for(self, q: NamedQuery, result: pa.Table) -> list[str]:
        """The lines of ``q``'s ``@notice`` statements over ``result`` (see named_queries), e.g.
        over a result computed in parts on workers."""
        out: list[str] = []
        if not q.notices:
            return out
        self._con.register("result", result)
        try:
            for stmt in q.notices:
                with self._verified():  # a notice may read a view no query made yet
                    self._prepare(stmt)
                try:
                    rows = with_relations(self._con).sql(stmt).fetchall()
                except _db.Error as exc:
                    raise QueryError(f"query {q.name}: @notice failed: {one_line(exc)}") from None
                out.extend(str(r[0]) for r in rows if r and r[0] is not None)
        finally:
            self._con.unregister("result")
        return out

    def query_batches(self, name: str | NamedQuery, params: dict[str, str] | None = None, *,
                      batch_rows: int = 65_536) -> pa.RecordBatchReader:
        """Run a named query like :meth:`query` but stream the result: a
        :class:`pyarrow.RecordBatchReader` of about ``batch_rows`` rows per batch, so a result
        larger than memory can be consumed in order (DuckDB sorts out of core, spilling to the
        engine's temp folder). Read it before running another statement on this engine."""
        q = name if isinstance(name, NamedQuery) else get_query(name)
        self.set_params(q, params or {})
        with self._verified():  # before the first row is read: the reader reads lazily
            self._prepare(q.sql)
        try:
            rel = with_relations(self._con).sql(q.sql)
            fn = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch  # DuckDB >= 1.4 / older
            return fn(batch_rows)
        except _db.Error as exc:
            raise QueryError(f"query {q.name} failed: {one_line(exc)}") from None

    def set_params(self, q: NamedQuery, params: dict[str, str]) -> None:
        """Check ``params`` against ``q``'s declared parameters and set them (DuckDB variables);
        :class:`QueryError` naming the parameter for an unknown name or a bad value."""
        for key in params:
            q.param(key)  # raises for unknown names
        for p in q.params:
            value = params.get(p.name, p.default)
            if value is None or (p.name not in params and p.default.upper() == "NULL"):
                expr = f"CAST(NULL AS {p.type})"
            else:
                if p.name in params:
                    value = p.check(value, q.name)  # type and domain (named_queries.Param)
                expr = f"CAST({lit(value)} AS {p.type})"
            try:
                self._con.execute(f'SET VARIABLE "{p.name}" = {expr}')
            except _db.Error:
                raise QueryError(
                    f"query {q.name}: parameter {p.name}={value!r} is not a valid {p.type}"
                ) from None

    def close(self):
        self._con.close()
        self._remove_spill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _files_select(name: str, files: list[tuple[str, Path, tuple]], tdef) -> str:
    """SELECT of every file of one table (all runs) with exactly the schema's columns, in schema
    order, and ``run_id``: a constant when every file is one run's, else the run of the row's
    file, looked up by DuckDB's ``file_index`` (the file's position in the list) in a literal
    list of run ids. A projection, not a join: the optimizer sees ``run_id`` as a column of the
    table, so a join of two tables on ``run_id`` and a key is one hash join on both (a join with
    a file -> run table let DuckDB join 300 run folders' kernels and API calls on
    ``correlation_id`` alone first: 188 M intermediate rows).

    A column no file has (run folders written before the column was added to the schema) reads
    as NULL of the schema's type; columns the schema does not know are ignored; files with
    different column sets are read by name (``union_by_name``), missing columns as NULL.
    """
    names = [cols for _, _, cols in files]
    present = set().union(*names)
    ids = [run_id for run_id, _, _ in files]
    if len(set(ids)) == 1:
        cols = [f"CAST({lit(ids[0])} AS VARCHAR) AS run_id"]
    else:
        run_ids = ", ".join(lit(i) for i in ids)
        cols = [f"CAST([{run_ids}][CAST(t.file_index AS BIGINT) + 1] AS VARCHAR) AS run_id"]
    for c in tdef.columns:
        if c.name in present:
            cols.append(f'CAST(t."{c.name}" AS {c.kind.sql}) AS "{c.name}"')
        else:
            cols.append(f'CAST(NULL AS {c.kind.sql}) AS "{c.name}"')
    paths = ", ".join(lit(glob_literal(p)) for _, p, _ in files)
    by_name = ", union_by_name = true" if len(set(names)) > 1 else ""
    return f"SELECT {', '.join(cols)} FROM read_parquet([{paths}]{by_name}) AS t"


STEP_PATTERN_ENV = "TRACEKIT_STEP_PATTERN"


def resolve_step_pattern(pattern: str | None) -> str | None:
    """The step pattern in effect: ``pattern``, else ``$TRACEKIT_STEP_PATTERN``; None when empty."""
    if pattern is None:
        pattern = os.environ.get(STEP_PATTERN_ENV)
    return pattern or None


def set_step_pattern(con: duckdb.DuckDBPyConnection, pattern: str) -> None:
    """Set the DuckDB variable ``tk_step_pattern`` that ``tk_steps()`` reads, after checking that
    DuckDB (RE2) compiles it; :class:`QueryError` naming the pattern when it does not."""
    try:
        con.execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
    except _db.Error as exc:
        raise QueryError(f"--step-pattern {pattern!r} is not a valid regular expression: "
                         f"{one_line(exc)}") from None
    con.execute("SET VARIABLE tk_step_pattern = ?", [pattern])
