"""Options that several commands share, each defined once: the run folders and the output
(``--format``, ``--output``, ``--columns``, ``--rows``) of ``tracekit query``, ``sql`` and
``whatif``, and the engine's ``--memory-limit`` and ``--step-pattern``. ``--quiet``, ``--jobs`` and
``--scheduler`` are in :mod:`tracekit.cli.app`; the filter options in :mod:`tracekit.cli.filter_opts`."""

from __future__ import annotations

import typer

from tracekit.cli.output import Format

RUNS = typer.Argument(..., help="One or more run folders (made by `tracekit convert` or "
                      "`tracekit collect`).", show_default=False)
FORMAT = typer.Option(Format.table, "--format", "-f", help="Output format: table (fits the "
                      "terminal, values in readable units), csv, json or parquet (exact values).")
OUTPUT = typer.Option(None, "--output", "-o", help="Write to FILE instead of stdout (`-`: stdout).")
COLUMNS = typer.Option(None, "--columns", "-c", help="Only these columns, comma-separated, in "
                       "this order (every format).")
ROWS = typer.Option(None, "--rows", "-n", min=0, help="Rows the table format shows (default: "
                    "100; 0: all). CSV, JSON and Parquet always hold every row.")
MEMORY_LIMIT = typer.Option(
    None, "--memory-limit", envvar="TRACEKIT_MEMORY_LIMIT",
    help="DuckDB memory limit, e.g. 1GB (default: DuckDB's, 80% of RAM); past it, joins and sorts "
         "spill to disk instead of growing.")
STEP_PATTERN = typer.Option(
    None, "--step-pattern", envvar="TRACEKIT_STEP_PATTERN", metavar="REGEX",
    help="Regular expression naming the NVTX / annotation ranges that are training steps (first "
         "capture group = step number), for runs without tracekit `step N` or PyTorch "
         "ProfilerStep#N ranges; else steps are detected from the kernel sequence.")
