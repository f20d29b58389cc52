"""Limits on ad-hoc SQL (``tracekit sql`` without ``--allow-external``).

``tracekit sql`` can be offered to people who may not read or write the machine's other files
(a notebook server, a shared analysis box). Without ``--allow-external``:

- only statements that read or change the in-memory database run: SELECT (with WITH, DESCRIBE,
  SUMMARIZE, SHOW), EXPLAIN, CREATE, INSERT, UPDATE, DELETE, DROP. ``COPY``, ``EXPORT``,
  ``ATTACH``, ``DETACH``, ``INSTALL``, ``LOAD``, ``SET``, ``PRAGMA`` and the rest are refused with a
  :class:`~tracekit.errors.QueryError` (exit 2) before anything runs;
- DuckDB's external access is switched off (``enable_external_access = false``) with only the
  run folders' table files, the roofline data tables and the spill folder allowed, and the
  configuration is locked, so ``read_text('/etc/passwd')``, ``read_csv``/``glob`` of other
  files and a ``SET`` back are refused by DuckDB itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import duckdb

from tracekit import schema
from tracekit.duck import glob_literal, lit_list
from tracekit.errors import QueryError, one_line

ALLOWED = frozenset({"SELECT", "EXPLAIN", "CREATE", "INSERT", "UPDATE", "DELETE", "DROP"})


def check_statements(text: str) -> None:
    """Raise :class:`QueryError` when ``text`` holds a statement outside :data:`ALLOWED`."""
    try:
        statements = duckdb.extract_statements(text)
    except duckdb.Error as exc:
        raise QueryError(f"SQL failed: {one_line(exc)}") from None
    for st in statements:
        kind = str(st.type).rsplit(".", 1)[-1]
        if kind not in ALLOWED:
            words = " ".join(st.query.split())[:60]
            raise QueryError(f"{kind} statements are not allowed in `tracekit sql` ({words!r}): it "
                             "reads only the run folders; pass --allow-external to lift this")


def _data_files() -> list[str]:
    try:
        from tracekit.roofline import peaks_path
    except ImportError:  # pragma: no cover - moved by a layout change
        return []
    return [os.path.dirname(peaks_path()) + os.sep]


def lock(con: duckdb.DuckDBPyConnection, runs: Iterable, spill: str) -> None:
    """Allow ``con`` to read only the runs' table files (and tracekit's own data tables), then
    switch external access off and lock the configuration."""
    paths = []
    for run in runs:
        for name in schema.TABLES:
            for p in run.table_files(name):  # a job's tables have a file per rank
                # the engine reads each file through its literal glob pattern (run[12] -> run[[]12])
                for form in (os.path.realpath(p), str(p), str(p.absolute())):
                    paths += [form, glob_literal(form)]
    dirs = [spill.rstrip(os.sep) + os.sep] + _data_files()
    con.execute(f"SET allowed_paths = {lit_list(sorted(set(paths)))}")
    con.execute(f"SET allowed_directories = {lit_list(dirs)}")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
