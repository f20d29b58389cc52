"""The front door for running a query: :func:`run` returns a :class:`QueryResult`, the rows and
everything a reader is told beside them. The CLI (``tracekit query``, ``tracekit sql``), the
plots, the study, the timeline and the Dask workers all run queries through it or through an
:class:`~tracekit.query.engine.Engine` it opened.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from tracekit.errors import QueryError
from tracekit.query.engine import Engine
from tracekit.query.explain import run_warnings, tables_read, why_empty
from tracekit.query.named_queries import NamedQuery, get_query

_NAME = re.compile(r"^\s*\w+\s*$")


@dataclass
class QueryResult:
    """What one query returned.

    ``table``: the rows (Arrow); ``name``: the named query (None for SQL); ``units``: {column:
    (unit, description)} from the query's ``@column`` lines (empty for SQL); ``notices``: the
    lines of its ``@notice`` statements over the rows; ``warnings``: the manifest warnings of the
    runs that concern the tables it read (``run RUN_ID: ...``); ``empty_reason``: when there are
    no rows, one sentence saying why (:func:`tracekit.query.explain.why_empty`), else None."""

    table: pa.Table
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
        explain: bool = True) -> QueryResult:
    """Run a named query (with ``params``: name -> text value) or an ad-hoc SQL statement over the
    run folders ``runs``, or over the open ``engine`` (its runs; reused across calls, so steps
    are detected once). ``jobs`` > 1 or a Dask ``scheduler``: a named query is computed in parts
    on workers (:mod:`tracekit.query.parts`). ``explain``: also collect the runs' warnings and,
    for an empty result, the reason (costs no query: manifests only).

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
                        scheduler, explain)
    return _run(engine, q, name_or_sql, params or {}, memory_limit, step_pattern, jobs,
                scheduler, explain)


def _run(eng: Engine, q: NamedQuery | None, text, params: dict, memory_limit, step_pattern,
         jobs, scheduler, explain: bool) -> QueryResult:
    if q is None:
        table = eng.sql(text)
        out = QueryResult(table)
        if explain:
            out.warnings = run_warnings(eng.runs, tables_read(text))
            if table.num_rows == 0 and table.num_columns:
                out.empty_reason = why_empty(eng.runs, sql=text)
        return out
    if scheduler or (jobs or 1) > 1:  # in parts on workers (docs/multirank.md)
        from tracekit.query.parts import compute_in_parts

        eng.set_params(q, params)  # bad parameters fail here, before any worker starts
        table = compute_in_parts(eng.runs, q, params, jobs=jobs, scheduler=scheduler,
                                 memory_limit=memory_limit, step_pattern=step_pattern)
        notices = eng.notices_for(q, table)
    else:
        table = eng.query(q, params)
        notices = list(eng.notices)
    out = QueryResult(table, q.name, q, {c.name: (c.unit, c.description) for c in q.columns},
                      notices)
    if explain:
        out.warnings = run_warnings(eng.runs, tables_read(q.sql))
        if table.num_rows == 0:
            out.empty_reason = why_empty(eng.runs, q, params=params)
    return out
