"""Each command imports only what it uses (issue 39): `tracekit --help` and every command's
`--help` import neither NumPy nor pyarrow (nor DuckDB, nor rich's help renderer), and `tracekit
query -f csv` (or json) imports no pyarrow, NumPy, pandas, matplotlib or torch. Read from
``python -X importtime`` of a fresh process, which lists every module the command imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numpy", "pyarrow", "pandas", "duckdb", "matplotlib", "torch", "rich", "scipy", "polars")
COMMANDS = ("collect", "convert", "query", "sql", "queries", "schema", "study", "compare",
            "timeline", "verify", "whatif", "workloads", "plot", "plot steps")


def modules(*args: str) -> set[str]:
    """Every module a fresh ``tracekit ARGS`` process imported (exit status 0)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tracekit", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                names.add(name)
    assert "tracekit.cli" in names  # the parse read the list
    return names


def imported(*args: str) -> set[str]:
    """Top-level packages a fresh ``tracekit ARGS`` process imported (exit status 0)."""
    return {name.split(".")[0] for name in modules(*args)}


# what building the CLI needs beside the command modules (tracekit.cli.*): the errors, the
# scheduler options' names, the label-cut count every command reports, the timeline's default
BUILD_NEEDS = {"tracekit", "tracekit.errors", "tracekit.workers", "tracekit.workers.cluster",
               "tracekit.labels", "tracekit.limits"}


def test_help_imports_no_data_library():
    assert imported("--help") & set(HEAVY) == set()


def test_help_imports_only_what_building_the_cli_needs():
    """`tracekit --help` imports no library module the commands use when they run
    (tracekit.timeline, tracekit.query.filters, tracekit.outfile, ...): those are imported inside
    the command functions."""
    names = {n for n in modules("--help") if n.split(".")[0] == "tracekit"}
    assert {n for n in names if not n.startswith("tracekit.cli")} == BUILD_NEEDS
    assert names >= {"tracekit.cli.query", "tracekit.cli.timeline", "tracekit.cli.plot"}


# `whatif --help` lists the scenarios from their registry (tracekit.whatif.scenarios), whose
# entries carry their NumPy code: that help, and only it, needs NumPy and pyarrow
HELP_NEEDS = {"whatif": {"numpy", "pyarrow"}}


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_imports_no_data_library(command):
    assert imported(*command.split(), "--help") & set(HEAVY) == HELP_NEEDS.get(command, set())


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_query_imports_only_what_it_uses(small_run, fmt):
    """A named query written as CSV or JSON needs DuckDB only, and of it only its C++ extension,
    not the duckdb package's Python layer (relations, 45 ms of imports): the run folder's footers
    are read by tracekit.runfolder.footer and plain-typed rows written without pyarrow (and
    NumPy, which pyarrow imports), these being most of a small query's start-up."""
    import importlib.util

    names = modules("query", "kernel_summary", str(small_run), "-f", fmt)
    top = {name.split(".")[0] for name in names}
    if importlib.util.find_spec("_duckdb") is not None:  # DuckDB's extension, not the package's layer
        assert "_duckdb" in top and "duckdb" not in top  # tracekit.duck.native
    else:
        assert "duckdb" in top
    assert top & {"pyarrow", "numpy", "pandas", "matplotlib", "torch", "scipy", "polars", "rich"} == set()
    # no other command's library: plots, study, what-if, timeline, collect, convert, collectors
    other = ("tracekit.plots", "tracekit.study", "tracekit.whatif", "tracekit.timeline",
             "tracekit.collect", "tracekit.convert", "tracekit.collectors", "tracekit.workloads")
    assert {n for n in names if n.startswith(other)} == set()


def test_get_query_parses_one_file_until_all_are_listed(monkeypatch):
    """`tracekit query NAME` parses NAME's file only (not all of queries/); the query is the one
    all_queries() lists, and an unknown name fails with all_queries()'s message."""
    from tracekit.errors import QueryError
    from tracekit.query import named_queries

    monkeypatch.setattr(named_queries, "_CACHE", None)
    monkeypatch.setattr(named_queries, "_ONE", {})
    parsed = []
    real = named_queries.parse_query
    monkeypatch.setattr(named_queries, "parse_query",
                        lambda text, path="<string>": parsed.append(path) or real(text, path))
    q = named_queries.get_query("kernel_summary")
    assert [p.replace("\\", "/").rsplit("/", 2)[-2:] for p in parsed] == [["summary", "kernel_summary.sql"]]
    assert named_queries.get_query("kernel_summary") is q and len(parsed) == 1  # kept
    with pytest.raises(QueryError, match=r"unknown query 'kernel_sumary'.*kernel_summary"):
        named_queries.get_query("kernel_sumary")
    assert len(parsed) > 40  # the unknown name listed them all
    assert named_queries.all_queries()["kernel_summary"] == q


def test_connection_opened_ahead_is_taken_once():
    """`tracekit query` opens DuckDB's connection in a helper thread (tracekit.duck.connect_ahead);
    the engine takes it, a second engine opens its own, and asking twice starts one thread."""
    import threading

    from tracekit.duck import connect_ahead, memory_connection

    connect_ahead()
    connect_ahead()
    assert sum(t.name == "tracekit-connect" for t in threading.enumerate()) <= 1
    first, second = memory_connection(), memory_connection()
    try:
        assert first is not second
        first.execute("CREATE TABLE t AS SELECT 41 AS x")
        assert first.sql("SELECT x + 1 FROM t").fetchall() == [(42,)]
        assert second.sql("SELECT count(*) FROM duckdb_tables()").fetchall() == [(0,)]
    finally:
        first.close()
        second.close()


def test_query_process_output_and_clean_up(small_run, tmp_path):
    """A `tracekit query` process (its objects frozen before the interpreter exits, tracekit.cli.main)
    writes the whole result, exits 0 and leaves no spill folder behind (removed by the engine's
    close; its weakref finalizer, run at exit, would remove it otherwise)."""
    import os

    from tracekit.cli.serialize import csv_bytes
    from tracekit.query import run

    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "tracekit", "query", "cuda_api_summary",
                           str(small_run), "-f", "csv"], capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == csv_bytes(run("cuda_api_summary", [small_run]).table)
    assert list(tmp_path.iterdir()) == []
