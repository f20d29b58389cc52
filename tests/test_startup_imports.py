"""Each command imports only what it uses (issue 39): `tracekit --help` and every command's
`--help` import neither NumPy nor pyarrow (nor DuckDB, nor rich's help renderer), and `tracekit
query` imports no pandas, matplotlib or torch. Read from ``python -X importtime`` of a fresh
process, which lists every module the command imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numpy", "pyarrow", "pandas", "duckdb", "matplotlib", "torch", "rich", "scipy", "polars")
COMMANDS = ("collect", "convert", "query", "sql", "queries", "schema", "study", "compare",
            "timeline", "verify", "whatif", "workloads", "plot", "plot steps")


def imported(*args: str) -> set[str]:
    """Top-level packages a fresh ``tracekit ARGS`` process imported (exit status 0)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tracekit", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                names.add(name.split(".")[0])
    assert "tracekit" in names  # the parse read the list
    return names


def test_help_imports_no_data_library():
    assert imported("--help") & set(HEAVY) == set()


# `whatif --help` lists the scenarios from their registry (tracekit.whatif.scenarios), whose
# entries carry their NumPy code: that help, and only it, needs NumPy and pyarrow
HELP_NEEDS = {"whatif": {"numpy", "pyarrow"}}


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_imports_no_data_library(command):
    assert imported(*command.split(), "--help") & set(HEAVY) == HELP_NEEDS.get(command, set())


def test_query_imports_only_what_it_uses(small_run):
    names = imported("query", "kernel_summary", str(small_run), "-f", "csv")
    assert {"duckdb", "pyarrow"} <= names  # what the query needs
    assert names & {"pandas", "matplotlib", "torch", "scipy", "polars", "rich"} == set()
