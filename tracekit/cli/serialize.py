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

A :class:`~tracekit.duck.Rows` result (plain types only: integers, DOUBLE, VARCHAR, BOOLEAN) is
written without pyarrow, byte for byte as pyarrow writes the same values: text always quoted
(quotes doubled), NULL as an empty field, ``true``/``false``, floats by :func:`float_text`.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import io
import json
import math
from typing import TYPE_CHECKING

from tracekit.duck import Rows

if TYPE_CHECKING:  # imported for Arrow results only: a Rows result writes without pyarrow
    import pyarrow as pa


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


def _finite(col: pa.ChunkedArray) -> bool:
    """True when a floating-point column holds no NaN or infinity (its values pass as they are)."""
    import pyarrow.compute as pc

    return bool(pc.all(pc.is_finite(col)).as_py() in (True, None))


def json_rows(table: pa.Table | Rows) -> list[dict]:
    """The rows of ``table`` as JSON-ready dicts (see the module docstring)."""
    names = table.column_names
    if isinstance(table, Rows):
        if "DOUBLE" not in table.types:
            return [dict(zip(names, row)) for row in table.rows]
        fix = [t == "DOUBLE" for t in table.types]
        return [dict(zip(names, (jsonable(v) if f else v for v, f in zip(row, fix)))) for row in table.rows]
    import pyarrow as pa

    plain_types = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_boolean)
    cols = []
    for f, col in zip(table.schema, table.columns):
        values = col.to_pylist()
        plain = any(test(f.type) for test in plain_types) or (pa.types.is_floating(f.type) and _finite(col))
        if not plain:
            values = [jsonable(v) for v in values]
        cols.append(values)
    return [dict(zip(names, row)) for row in zip(*cols)] if cols else []


def json_text(table: pa.Table | Rows) -> str:
    """A JSON array of row objects, one row per line; never NaN or Infinity (invalid JSON)."""
    enc = json.JSONEncoder(ensure_ascii=False, allow_nan=False)  # compact: the C encoder
    rows = json_rows(table)
    if not rows:
        return "[]\n"
    return "[\n" + ",\n".join(enc.encode(r) for r in rows) + "\n]\n"


def _csv_ready(table: pa.Table) -> pa.Table:
    import pyarrow as pa

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


def csv_bytes(table: pa.Table | Rows) -> bytes:
    """CSV of ``table`` (header row, then one line per row), UTF-8."""
    if isinstance(table, Rows):
        return _rows_csv(table)
    import pyarrow.csv as pacsv

    buf = io.BytesIO()
    pacsv.write_csv(_csv_ready(table), buf)
    return buf.getvalue()


def float_text(v: float) -> str:
    """``v`` as pyarrow's CSV writer prints a float64: the shortest digits that read back as
    ``v`` (Python's ``repr`` finds the same ones), in decimal notation for a decimal exponent
    from -6 to 9 and as ``d.ddde+NN`` / ``d.ddde-NN`` outside it; no trailing ``.0``; ``nan``,
    ``inf``, ``-inf``, ``-0``."""
    if 1e-4 <= abs(v) < 1e10:  # where repr is in decimal notation too: the common case, fast
        text = repr(v)
        return text[:-2] if text.endswith(".0") else text
    if v != v:
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    sign = "-" if math.copysign(1.0, v) < 0 else ""
    if v == 0:
        return sign + "0"
    mant, _, e = repr(abs(v)).partition("e")
    whole, _, frac = mant.partition(".")
    digits = (whole + frac).lstrip("0")
    point = len(whole) - (len(whole) + len(frac) - len(digits)) + int(e or 0)  # v = 0.DIGITS x 10^point
    digits = digits.rstrip("0")
    exp = point - 1
    if -6 <= exp < 10:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return sign + digits + "0" * (point - len(digits))
        return f"{sign}{digits[:point]}.{digits[point:]}"
    rest = "." + digits[1:] if len(digits) > 1 else ""
    return f"{sign}{digits[0]}{rest}e{'+' if exp >= 0 else '-'}{abs(exp)}"


def _text_field(v: str) -> str:
    return '"' + v.replace('"', '""') + '"'


_CSV_FIELD = {"VARCHAR": _text_field, "DOUBLE": float_text,
              "BOOLEAN": lambda v: "true" if v else "false"}


def _rows_csv(table: Rows) -> bytes:
    if not table.num_columns:
        return b""
    cols = []  # formatted a column at a time: one function per column, not per value
    for t, values in zip(table.types, zip(*table.rows) if table.rows else [()] * table.num_columns):
        f = _CSV_FIELD.get(t, str)
        cols.append(["" if v is None else f(v) for v in values])
    lines = [",".join(_text_field(n) for n in table.names)]
    lines += [",".join(row) for row in zip(*cols)]
    return ("\n".join(lines) + "\n").encode("utf-8")
