"""Writing query results: a plain table that fits the terminal, or CSV / JSON / Parquet."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import InputError

if TYPE_CHECKING:  # pyarrow (0.25 s with numpy) is imported by the functions that use it
    import pyarrow as pa


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def needs_arrow(fmt: Format) -> bool:
    """Whether writing ``fmt`` needs the result as an Arrow table: CSV and JSON are written from
    a :class:`~tracekit.duck.Rows` too, without importing pyarrow (a small query's start-up)."""
    return fmt not in (Format.csv, Format.json)


def _check_parquet_types(result: pa.Table) -> None:
    """:class:`InputError` naming the first column Parquet cannot hold (an INTERVAL), before
    any file is opened."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    for field in result.schema:
        try:
            pq.write_table(pa.table({"x": pa.array([], field.type)}), io.BytesIO())
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:
            raise InputError(f"column {field.name!r} has the type {field.type}, which Parquet "
                             f"cannot hold ({str(exc)[:100]}); cast it in the SQL (e.g. to "
                             "VARCHAR or BIGINT)") from None


def select_columns(result: pa.Table, columns: str | None) -> pa.Table:
    """``result`` with only the comma-separated ``columns``, in that order (all when None).
    :class:`InputError` naming an unknown column, with the closest names."""
    if not columns:
        return result
    from tracekit.suggest import did_you_mean

    names = [c.strip() for c in columns.split(",") if c.strip()]
    for n in names:
        if result.column_names.count(n) > 1:
            raise InputError(f"--columns: the result has {result.column_names.count(n)} columns "
                             f"named {n!r}; name them apart in the SQL (AS ...)")
        if n not in result.column_names:
            raise InputError(f"--columns: no column {n!r}{did_you_mean(n, result.column_names)}; "
                             f"columns: {', '.join(result.column_names)}")
    return result.select(names)


COLUMNS_HINT = "`--columns a,b,c` picks the columns; `-f csv` shows them all."

TABLE_ROWS = 100
"""Rows the terminal table shows by default (``--rows``; 0 = all): the first ones, in the
query's order; a note on stderr says how many more there are. CSV, JSON and Parquet hold every row."""


def table_lines(result: pa.Table, title: str | None = None, units: dict | None = None,
                width: int | None = None, hint: str = COLUMNS_HINT, keys=(),
                explicit: bool = False, full: pa.Table | None = None, optional=()) -> list[str]:
    """The terminal-table view of ``result``: lines of at most ``width`` cells (the terminal's by
    default) with display units, the main measures ``keys`` always among them, then one note
    naming the columns left out, wrapped to the width (with ``explicit``, the ``--columns``
    choice, none is left out). See :mod:`tracekit.cli.tableview`, :mod:`tracekit.cli.termtable`
    and :mod:`tracekit.cli.display`."""
    from tracekit.cli.tableview import table_lines as view

    return view(result, title, units, width, hint, keys=keys, explicit=explicit, full=full,
                optional=optional)


def render(result: pa.Table, fmt: Format, output: Path | None, title: str | None = None,
           units: dict | None = None, protect=(), rows: int | None = None, keys=(),
           explicit: bool = False, optional=()) -> None:
    """Write ``result`` in ``fmt`` to ``output`` or stdout (``-`` is stdout too); the file rules
    (devices, symlinks, modes, folders in ``protect`` refused) are
    :func:`tracekit.outfile.write_output`'s. Parquet needs ``output``.

    ``fmt`` table on stdout is the terminal view (:func:`table_lines`; ``units`` = {column:
    (unit, description)} from a named query); nothing is printed for an empty result (the caller
    explains it on stderr); it shows the first ``rows`` rows (default :data:`TABLE_ROWS`, 0: all)
    and says on stderr how many it left out; ``keys`` (main measures) and ``explicit`` (columns
    chosen with ``--columns``) as :func:`table_lines`. ``fmt`` table with ``output`` writes CSV (every row).
    CSV and JSON: see :mod:`tracekit.cli.serialize`.
    """
    from tracekit.outfile import write_output

    if output is not None and str(output) == "-":
        output = None  # stdout
    if fmt == Format.parquet and output is None:
        raise InputError("--format parquet needs --output FILE")
    if fmt == Format.table and output is None:
        cap = TABLE_ROWS if rows is None else rows
        shown = result.slice(0, cap) if 0 < cap < result.num_rows else result
        if shown.num_rows:
            sys.stdout.write("\n".join(table_lines(shown, title, units, keys=keys, explicit=explicit,
                                                     full=result, optional=optional)) + "\n")
        if shown.num_rows < result.num_rows:
            from tracekit.cli.messages import note

            note(f"showing the first {shown.num_rows:,} of {result.num_rows:,} rows; "
                 "`--rows 0` shows them all, `-f csv` writes them all")
        return
    twice = sorted({n for n in result.column_names if result.column_names.count(n) > 1})
    if twice:  # JSON would keep one of them, Parquet write both under one name
        raise InputError(f"the result has more than one column named {twice[0]!r}; name them "
                         "apart in the SQL (SELECT 1 AS a, 2 AS b) to write it as "
                         f"{fmt.value}")
    if fmt == Format.parquet:
        import pyarrow.parquet as pq

        _check_parquet_types(result)
        write_output(output, lambda f: pq.write_table(result, f), protect)
        return
    from tracekit.cli.serialize import csv_bytes, json_text

    data = csv_bytes(result) if fmt in (Format.csv, Format.table) else json_text(result).encode()
    if output is None:
        sys.stdout.write(data.decode())
    else:
        write_output(output, lambda f: f.write(data), protect)
