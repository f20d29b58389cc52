"""CSV and JSON text of an Arrow query result, for every type DuckDB returns.

JSON (:func:`json_text`): an array of row objects, keys = column names, values exact:

- integers (also HUGEINT and integral DECIMAL, which DuckDB returns for ``sum(BIGINT)``) as JSON
  integers with every digit; other DECIMAL values and floats as JSON numbers; NaN and ±Inf as null;
- timestamps, dates and times as ISO 8601 text (nanoseconds kept where the type has them);
  INTERVAL as ``{"months", "days", "nanoseconds"}``;
- lists as arrays, structs as objects, maps as objects (as ``[[key, value], ...]`` when a key is
  not text); BLOB and BIT as base64 text; UUID and ENUM as text.

CSV (:func:`csv_bytes`): pyarrow's CSV writer (RFC 4180 quoting, header row); nested columns
(lists, structs, maps, unions) are written as their JSON text and binary columns as base64.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import io
import json
import math

import pyarrow as pa
import pyarrow.csv as pacsv


def jsonable(v):
    """One Python value of ``Table.to_pylist()`` as a value :func:`json.dumps` writes exactly."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(v, decimal.Decimal):
        if not v.is_finite():
            return None
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, tuple) and type(v).__name__ == "MonthDayNano":
        return {"months": v.months, "days": v.days, "nanoseconds": v.nanoseconds}
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # a MAP: [(key, value)]
            if all(isinstance(k, str) for k, _ in v):
                return {k: jsonable(x) for k, x in v}
            return [[jsonable(k), jsonable(x)] for k, x in v]
        return [jsonable(x) for x in v]
    if isinstance(v, tuple):
        return [jsonable(x) for x in v]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, _dt.timedelta):
        return v.total_seconds()
    if hasattr(v, "isoformat"):  # datetime, date, time, pandas Timestamp (ns)
        return v.isoformat()
    return str(v)  # UUID and anything else with a text form


_PLAIN = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_boolean)


def _finite(col: pa.ChunkedArray) -> bool:
    """True when a floating-point column holds no NaN or infinity (its values pass as they are)."""
    import pyarrow.compute as pc

    return bool(pc.all(pc.is_finite(col)).as_py() in (True, None))


def json_rows(table: pa.Table) -> list[dict]:
    """The rows of ``table`` as JSON-ready dicts (see the module docstring)."""
    names = table.column_names
    cols = []
    for f, col in zip(table.schema, table.columns):
        values = col.to_pylist()
        plain = any(test(f.type) for test in _PLAIN) or (pa.types.is_floating(f.type) and _finite(col))
        if not plain:
            values = [jsonable(v) for v in values]
        cols.append(values)
    return [dict(zip(names, row)) for row in zip(*cols)] if cols else []


def json_text(table: pa.Table) -> str:
    """A JSON array of row objects, one row per line; never NaN or Infinity (invalid JSON)."""
    enc = json.JSONEncoder(ensure_ascii=False, allow_nan=False)  # compact: the C encoder
    rows = json_rows(table)
    if not rows:
        return "[]\n"
    return "[\n" + ",\n".join(enc.encode(r) for r in rows) + "\n]\n"


def _csv_ready(table: pa.Table) -> pa.Table:
    for i, f in enumerate(table.schema):
        t = f.type
        nested = pa.types.is_nested(t) or pa.types.is_union(t) or pa.types.is_interval(t)
        binary = pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
        if nested or binary:
            vals = [None if v is None else (jsonable(v) if binary else json.dumps(jsonable(v), ensure_ascii=False))
                    for v in table.column(i).to_pylist()]
            table = table.set_column(i, f.name, pa.array(vals, pa.string()))
        elif pa.types.is_dictionary(t):
            table = table.set_column(i, f.name, table.column(i).cast(t.value_type))
    return table


def csv_bytes(table: pa.Table) -> bytes:
    """CSV of ``table`` (header row, then one line per row), UTF-8."""
    buf = io.BytesIO()
    pacsv.write_csv(_csv_ready(table), buf)
    return buf.getvalue()
