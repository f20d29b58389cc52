"""Writing query results: a rich table on the terminal, or CSV / JSON / Parquet."""

from __future__ import annotations

import io
import json
import math
import os
import sys
import tempfile
from enum import Enum
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tracekit.errors import InputError


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def format_cell(v) -> str:
    """Text of one value in the terminal table: integers exactly, floats with 3 decimals
    (or 4 significant digits below 1), NULL as empty."""
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v != 0 and abs(v) < 1:
            return f"{v:.4g}"
        return f"{v:.3f}".rstrip("0").rstrip(".")
    return str(v)


def _json_value(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def render(result: pa.Table, fmt: Format, output: Path | None, title: str | None = None) -> None:
    """Write ``result`` in ``fmt`` to ``output`` (atomically) or stdout. Parquet needs ``output``."""
    if fmt == Format.parquet and output is None:
        raise InputError("--format parquet needs --output FILE")
    if fmt == Format.table and output is None:
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title, show_lines=False, header_style="bold")
        for f in result.schema:
            numeric = pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_decimal(f.type)
            if numeric:
                t.add_column(f.name, justify="right", no_wrap=True)
            else:
                t.add_column(f.name, justify="left", overflow="fold", ratio=1, min_width=12)
        for row in result.to_pylist():
            t.add_row(*[format_cell(v) for v in row.values()])
        Console(width=max(100, Console().width)).print(t)
        return
    if fmt == Format.parquet:
        _atomic_write(output, lambda f: pq.write_table(result, f), binary=True)
        return
    if fmt == Format.csv or fmt == Format.table:
        buf = io.BytesIO()
        pacsv.write_csv(_lists_as_json(result), buf)
        text = buf.getvalue().decode()
    else:
        rows = [{k: _json_value(v) for k, v in r.items()} for r in result.to_pylist()]
        text = json.dumps(rows, indent=1) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        _atomic_write(output, lambda f: f.write(text.encode()), binary=True)


def _lists_as_json(result: pa.Table) -> pa.Table:
    """List columns (operator shapes, ...) as JSON text, which CSV can hold."""
    for i, f in enumerate(result.schema):
        if pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
            text = [None if v is None else json.dumps(v) for v in result.column(i).to_pylist()]
            result = result.set_column(i, f.name, pa.array(text, pa.string()))
    return result


def _atomic_write(path: Path, write, binary: bool):
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
