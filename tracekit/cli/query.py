"""``tracekit query``, ``tracekit sql`` and ``tracekit queries``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tracekit.cli.app import (
    QUIET,
    app,
    jobs_option,
    scheduler_option,
    scheduler_timeout_option,
    set_quiet,
)
from tracekit.cli.filter_opts import filtered
from tracekit.cli.options import COLUMNS, FORMAT, MEMORY_LIMIT, OUTPUT, ROWS, RUNS, STEP_PATTERN
from tracekit.cli.output import Format, needs_arrow, render, select_columns
from tracekit.errors import QueryError


def parse_params(items: list[str]) -> dict[str, str]:
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise QueryError(f"--param {item!r}: expected KEY=VALUE")
        params[key.strip()] = value
    return params


def _report(res) -> None:
    """A QueryResult's warnings and empty-result reason on stderr (before the rows)."""
    from tracekit.cli.messages import note, warn

    for w in res.warnings:
        warn(w)
    if res.empty_reason:
        note(res.empty_reason)


@app.command()
@filtered
def query(
    name: str = typer.Argument(..., help="Named query, e.g. kernel_summary (`tracekit queries` "
                               "lists them).", show_default=False),
    run_dirs: list[Path] = RUNS,
    format: Format = FORMAT,
    output: Path = OUTPUT,
    param: list[str] = typer.Option([], "--param", "-p", help="Query parameter KEY=VALUE "
                                    "(repeatable; `tracekit queries NAME` lists them)."),
    columns: Optional[str] = COLUMNS,
    rows: Optional[int] = ROWS,
    memory_limit: str = MEMORY_LIMIT,
    jobs: int = jobs_option("Compute the query in parts (groups of run folders) in N local "
                            "worker processes (default: in this process)."),
    scheduler: str = scheduler_option("Compute the parts"),
    scheduler_timeout: Optional[float] = scheduler_timeout_option(),
    quiet: bool = QUIET,
    step_pattern: str = STEP_PATTERN,
):
    """Run a named query over one or more run folders.

    Warnings recorded in the run folders print on stderr; an empty result says why on stderr
    (exit status 0).
    """
    from tracekit.duck import connect_ahead

    connect_ahead()  # DuckDB connects in a helper thread while the imports below run
    from tracekit.cli.messages import note
    from tracekit.outfile import check_output
    from tracekit.query import get_query, run
    from tracekit.query.filters import current

    set_quiet(quiet)
    q = get_query(name)
    params = parse_params(param)
    if output is not None:
        check_output(output, run_dirs)
    res = run(q, run_dirs, params, memory_limit=memory_limit, step_pattern=step_pattern,
              jobs=jobs, scheduler=scheduler, arrow=needs_arrow(format))
    _report(res)
    filters = current()  # --step/--window/--rank/--device/--nvtx (tracekit.cli.filter_opts)
    title = f"{name} [{filters.describe()}]" if filters else name
    render(select_columns(res.table, columns), format, output, title=title, units=res.units,
           protect=run_dirs, rows=rows, keys=q.keys, explicit=bool(columns), optional=q.optional)
    for line in res.notices:  # the query's @notice lines (coverage, why a column is NULL)
        note(line)


@app.command()
@filtered
def sql(
    statement: str = typer.Argument(..., help="DuckDB SQL over the run-folder tables (kernels, "
                                    "cuda_api, memcpy, nvtx_ranges, ...; `tracekit schema` "
                                    "documents them).", show_default=False),
    run_dirs: list[Path] = RUNS,
    format: Format = FORMAT,
    output: Path = OUTPUT,
    columns: Optional[str] = COLUMNS,
    rows: Optional[int] = ROWS,
    memory_limit: str = MEMORY_LIMIT,
    quiet: bool = QUIET,
    allow_external: bool = typer.Option(
        False, "--allow-external", help="Let the SQL read and write any file DuckDB can (COPY, "
        "read_csv, ATTACH, ...). Without it the statement reads only the run folders' tables."),
    step_pattern: str = STEP_PATTERN,
):
    """Run ad-hoc DuckDB SQL over one or more run folders.

    The tables and macros are those of the named queries; every table has a leading run_id column.
    Without --allow-external the statement reads no other file and writes none
    (docs/robustness.md).
    """
    from tracekit.duck import connect_ahead

    connect_ahead()  # as in `tracekit query`
    from tracekit.outfile import check_output
    from tracekit.query import run

    set_quiet(quiet)
    if output is not None:
        check_output(output, run_dirs)
    res = run(statement, run_dirs, sql=True, memory_limit=memory_limit,
              external_access=allow_external, step_pattern=step_pattern, arrow=needs_arrow(format))
    _report(res)
    render(select_columns(res.table, columns), format, output, protect=run_dirs, rows=rows,
           explicit=bool(columns))


@app.command()
def queries(
    name: Optional[str] = typer.Argument(None, help="Show this query in full: description, "
                                         "definition, parameters and columns.",
                                         show_default=False),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="With every query's parameters "
                                 "and output columns."),
):
    """List the named queries, or describe one (`tracekit queries kernel_summary`)."""
    import sys

    from tracekit.cli.querydoc import describe, listing
    from tracekit.query import all_queries, get_query

    if name is not None:
        sys.stdout.write(describe(get_query(name)))
        return
    sys.stdout.write(listing(list(all_queries().values()), verbose))
