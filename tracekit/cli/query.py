"""``tracekit query``, ``tracekit sql`` and ``tracekit queries``."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import app
from tracekit.cli.output import Format, render
from tracekit.errors import QueryError

_RUNS = typer.Argument(..., help="One or more run folders (made by `tracekit convert` or `collect`).")
_FORMAT = typer.Option(Format.table, "--format", "-f", help="Output format.")
_OUTPUT = typer.Option(None, "--output", "-o", help="Write to FILE instead of stdout.")
_MEMORY = typer.Option(
    None, "--memory-limit", envvar="TRACEKIT_MEMORY_LIMIT",
    help="DuckDB memory limit, e.g. 1GB (default: DuckDB's, 80% of RAM); past it, joins and sorts "
         "spill to disk instead of growing.")


def parse_params(items: list[str]) -> dict[str, str]:
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise QueryError(f"--param {item!r}: expected KEY=VALUE")
        params[key.strip()] = value
    return params


@app.command()
def query(
    name: str = typer.Argument(..., help="Named query (see `tracekit queries`)."),
    run_dirs: list[Path] = _RUNS,
    format: Format = _FORMAT,
    output: Path = _OUTPUT,
    param: list[str] = typer.Option([], "--param", "-p", help="Query parameter KEY=VALUE (repeatable)."),
    memory_limit: str = _MEMORY,
    jobs: int = typer.Option(None, "--jobs", "-j", min=1,
                             help="Compute the query in parts (groups of run folders) in N local "
                                  "worker processes (default: in this process)."),
    scheduler: str = typer.Option(None, "--scheduler", metavar="ADDRESS", envvar="TRACEKIT_SCHEDULER",
                                  help="Compute the parts on this Dask scheduler's workers "
                                       "(tcp://host:8786; pip install 'tracekit\\[dask]')."),
):
    """Run a named query over one or more run folders."""
    if scheduler or (jobs or 1) > 1:
        from tracekit.cluster import query_runs

        result = query_runs(run_dirs, name, parse_params(param), jobs=jobs, scheduler=scheduler,
                            memory_limit=memory_limit)
    else:
        from tracekit.engine import Engine

        with Engine(run_dirs, memory_limit=memory_limit) as eng:
            result = eng.query(name, parse_params(param))
    render(result, format, output, title=name)


@app.command()
def sql(
    statement: str = typer.Argument(..., help="SQL over the run-folder tables (kernels, cuda_api, ...)."),
    run_dirs: list[Path] = _RUNS,
    format: Format = _FORMAT,
    output: Path = _OUTPUT,
    memory_limit: str = _MEMORY,
):
    """Run ad-hoc DuckDB SQL over one or more run folders (same table names as named queries)."""
    from tracekit.engine import Engine

    with Engine(run_dirs, memory_limit=memory_limit) as eng:
        result = eng.sql(statement)
    render(result, format, output)


@app.command()
def queries(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show parameters and output columns."),
):
    """List the named queries with their descriptions."""
    from rich.console import Console
    from rich.table import Table

    from tracekit.named_queries import all_queries

    t = Table(show_lines=verbose, header_style="bold")
    t.add_column("query")
    t.add_column("topic")
    t.add_column("description")
    for q in all_queries().values():
        desc = q.description
        if verbose:
            extra = [f"--param {p.name}={p.default} ({p.type}): {p.description}" for p in q.params]
            extra += [f"{c.name} [{c.unit}]: {c.description}" for c in q.columns]
            desc = "\n".join([desc] + extra)
        t.add_row(q.name, q.topic, desc)
    Console().print(t)
