"""The front door for running a query: :func:`run` returns a :class:`QueryResult`, the rows and
everything a reader is told beside them. The CLI (``tracekit query``, ``tracekit sql``), the
plots, the study, the timeline, the clock fit and the Dask workers all run queries through it,
directly or through a :class:`Session` (many queries over one set of run folders).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracekit.duck import Rows
from tracekit.errors import QueryError
from tracekit.query.engine import Engine
from tracekit.query.explain import run_warnings, tables_read, why_empty
from tracekit.query.named_queries import NamedQuery, get_query
from tracekit.runfolder import Run

if TYPE_CHECKING:  # an Arrow result imports pyarrow where it is made (tracekit.duck.fetch)
    import pyarrow as pa

_NAME = re.compile(r"^\s*\w+\s*$")


@dataclass
class QueryResult:
    """What one query returned.

    ``table``: the rows (Arrow; a :class:`~tracekit.duck.Rows` where :func:`run` was called
    with ``arrow=False`` and the result is small and of plain types: :func:`tracekit.duck.fetch`,
    :meth:`~tracekit.query.engine.Engine.reads_few_rows`); ``name``: the named query (None
    for SQL); ``units``: {column: (unit, description)} from the query's ``@column`` lines
    (empty for SQL); ``notices``: the lines of its ``@notice`` statements over the rows;
    ``warnings``: the manifest warnings of the runs that concern the tables it read (``run
    RUN_ID: ...``); ``empty_reason``: when there are no rows, one sentence saying why
    (:func:`tracekit.query.explain.why_empty`), else None."""

    table: pa.Table | Rows
    name: str | None = None
    query: NamedQuery | None = None
    units: dict[str, tuple[str, str]] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    empty_reason: str | None = None


def resolve(name_or_sql: str | NamedQuery, sql: bool | None = None) -> NamedQuery | None:
    """The named query ``name_or_sql`` names, or None when it is SQL. ``sql``: True (always SQL),
    False (always a name: :class:`~tracekit.errors.QueryError` when unknown), None (a single word
    is a name, anything else SQL)."""
    if isinstance(name_or_sql, NamedQuery):
        return name_or_sql
    if sql or (sql is None and not _NAME.match(name_or_sql)):
        return None
    return get_query(name_or_sql.strip())


def run(name_or_sql: str | NamedQuery, runs: Sequence[str | os.PathLike] | None = None,
        params: dict[str, str] | None = None, *, sql: bool | None = None,
        engine: Engine | None = None, memory_limit: str | None = None,
        step_pattern: str | None = None, external_access: bool = True,
        jobs: int | None = None, scheduler: str | None = None,
        explain: bool = True, arrow: bool = True) -> QueryResult:
    """Run a named query (with ``params``: name -> text value) or an ad-hoc SQL statement over the
    run folders ``runs``, or over the open ``engine`` (its runs; reused across calls, so steps
    are detected once). ``jobs`` > 1 or a Dask ``scheduler``: a named query is computed in parts
    on workers (:mod:`tracekit.query.parts`). ``explain``: also collect the runs' warnings and,
    for an empty result, the reason (costs no query: manifests only). ``arrow`` False: the rows
    may come as a :class:`~tracekit.duck.Rows` (Python values, no pyarrow import: the CLI's CSV
    and JSON writers); computed in parts, they are always Arrow.

    Raises :class:`~tracekit.errors.QueryError` for an unknown query or parameter, a bad value,
    failing SQL or a refused statement (``external_access=False``), and
    :class:`~tracekit.errors.RunFolderError` for a path that is not a run folder."""
    q = resolve(name_or_sql, sql)
    if q is None and params:
        raise QueryError("parameters are for named queries; SQL has none")
    if engine is None:
        with Engine(runs or [], memory_limit=memory_limit, step_pattern=step_pattern,
                    external_access=external_access) as eng:
            return _run(eng, q, name_or_sql, params or {}, memory_limit, step_pattern, jobs,
                        scheduler, explain, arrow)
    return _run(engine, q, name_or_sql, params or {}, memory_limit, step_pattern, jobs,
                scheduler, explain, arrow)


def _run(eng: Engine, q: NamedQuery | None, text, params: dict, memory_limit, step_pattern,
         jobs, scheduler, explain: bool, arrow: bool = True) -> QueryResult:
    if q is None:
        table = eng.sql(text, arrow)
        out = QueryResult(table)
        if explain:
            out.warnings = run_warnings(eng.runs, tables_read(text))
            if table.num_rows == 0 and table.num_columns:
                out.empty_reason = why_empty(eng.runs, sql=text)
        return out
    if scheduler or (jobs or 1) > 1:  # in parts on workers (docs/multirank.md)
        from tracekit.query.parts import compute_in_parts

        if eng.filters is not None:  # the workers' engines would not see them (tracekit.query.filters)
            raise QueryError("--step/--window/--rank/--device/--nvtx are not supported with "
                             "--jobs or --scheduler yet; run the filtered query in this process")
        eng.set_params(q, params)  # bad parameters fail here, before any worker starts
        table = compute_in_parts(eng.runs, q, params, jobs=jobs, scheduler=scheduler,
                                 memory_limit=memory_limit, step_pattern=step_pattern)
        notices = eng.notices_for(q, table)
    else:
        table = eng.query(q, params, arrow)
        notices = list(eng.notices)
    out = QueryResult(table, q.name, q, {c.name: (c.unit, c.description) for c in q.columns},
                      notices)
    if explain:
        out.warnings = run_warnings(eng.runs, tables_read(q.sql))
        if table.num_rows == 0:
            out.empty_reason = why_empty(eng.runs, q, params=params)
    return out


class Session:
    """The front door for a caller that runs several queries over the same run folders (a plot,
    the study, the timeline, the clock fit): one :class:`~tracekit.query.engine.Engine` (steps
    detected once, views made once), every query through :func:`run`, so each result comes with
    its warnings and empty-result reason; :attr:`warnings` gathers the warnings of every query
    it ran (each once, in order), :attr:`empty` why each query that returned no rows did. In the
    spirit of HTA's ``TraceAnalysis``: one object per set of run folders.

    ``Session(["runs/a"]).query("gpu_idle")`` returns the rows as :func:`run`'s ``table``;
    :meth:`run` the whole :class:`QueryResult`. Options are :class:`Engine`'s; raises as it does.
    """

    def __init__(self, runs: Sequence[str | os.PathLike | Run], *, memory_limit: str | None = None,
                 step_pattern: str | None = None, threads: int | None = None,
                 external_access: bool = True, filters=None, explain: bool = True):
        self.engine = Engine(runs, memory_limit=memory_limit, step_pattern=step_pattern,
                             threads=threads, external_access=external_access, filters=filters)
        self.explain = explain
        self.warnings: list[str] = []  # of every query run so far, each once
        self.empty: dict[str, str] = {}  # query (name or SQL) -> why it returned no rows
        self._memory_limit, self._step_pattern = memory_limit, step_pattern

    @property
    def runs(self):
        """The run folders (:class:`tracekit.runfolder.Run`), in the order given."""
        return self.engine.runs

    def run(self, name_or_sql: str | NamedQuery, params: dict[str, str] | None = None, *,
            sql: bool | None = None, jobs: int | None = None,
            scheduler: str | None = None) -> QueryResult:
        """:func:`run` over this session's runs."""
        out = run(name_or_sql, params=params, sql=sql, engine=self.engine, jobs=jobs,
                  scheduler=scheduler, memory_limit=self._memory_limit,
                  step_pattern=self._step_pattern, explain=self.explain)
        self._record(out, name_or_sql)
        return out

    def query(self, name: str | NamedQuery, params: dict[str, str] | None = None) -> pa.Table:
        """The rows of the named query ``name`` with ``params``."""
        return self.run(name, params, sql=False).table

    def sql(self, text: str) -> pa.Table:
        """The rows of the SQL statement ``text``."""
        return self.run(text, sql=True).table

    def query_batches(self, name: str | NamedQuery, params: dict[str, str] | None = None, *,
                      batch_rows: int = 65_536) -> pa.RecordBatchReader:
        """The rows of the named query ``name``, streamed
        (:meth:`tracekit.query.engine.Engine.query_batches`); its warnings are recorded."""
        q = resolve(name, False)
        reader = self.engine.query_batches(q, params, batch_rows=batch_rows)
        if self.explain:
            self._record(QueryResult(reader.schema.empty_table(), q.name, q,
                                     warnings=run_warnings(self.runs, tables_read(q.sql))))
        return reader

    def _record(self, out: QueryResult, text=None) -> None:
        if out.empty_reason is not None:
            self.empty[out.name or str(text)] = out.empty_reason
        self.warnings.extend(w for w in out.warnings if w not in self.warnings)

    def close(self) -> None:
        self.engine.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
