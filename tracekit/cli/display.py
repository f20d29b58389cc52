"""Display units of the terminal table: durations in ns/µs/ms/s, sizes in B/KiB/MiB/GiB (binary,
as PyTorch, nvidia-smi and ``tracekit plot memory``; size columns of like magnitude in one unit),
rates in decimal GB/s (bandwidths, as NVIDIA quotes them) or TFLOP/s, fractions as %. Only the
``table`` format uses them; CSV, JSON and Parquet keep the raw values and column names.

Each column gets one unit for all its rows, the one that shows its largest value with at most
four digits before the point (``12345678`` ns -> ``12.346 ms``), and the header says it:
``total_ns`` becomes ``total ms``, ``time_pct`` becomes ``time %``. Timestamps (``start_ns``,
``*_start_ns``, ``*_end_ns``, ``first_ns``, ``last_ns``) stay in integer ns: they are positions on
the profiler's clock, not durations (the table leaves them out unless they are main measures).

The kind of a column comes from its documented unit (the ``@column`` lines of a named query, see
:mod:`tracekit.query.named_queries`), refined by its name and description (a ``value`` that is "a
fraction 0-1" is shown as %, ``*flop_per_s`` as FLOP/s); for ad-hoc SQL, from the name alone.
"""

from __future__ import annotations

import decimal
import math

import pyarrow as pa

from tracekit.cli.termtable import MIN_NAME, Col, visible

_TIME = (("ns", 1), ("µs", 1e3), ("ms", 1e6), ("s", 1e9))
_SI = ("", "K", "M", "G", "T", "P", "E")
_TIMESTAMP_NAMES = {"start_ns", "end_ns", "first_ns", "last_ns", "ts_ns"}
_KEY_TEXT = {"name", "step", "collective", "range", "kernel", "kernel_name", "scope", "kind",
             "direction", "metric", "status"}


def is_timestamp(name: str) -> bool:
    return name in _TIMESTAMP_NAMES or name.endswith(("_start_ns", "_end_ns", "_at_ns"))


def kind_of(name: str, unit: str | None, description: str = "", arrow_type=None) -> str:
    """Display kind of a column: duration, timestamp, bytes, bytes/s, FLOP, FLOP/s, fraction, %,
    count, id, enum, text, flag or value."""
    n = name.lower()
    d = description.lower()
    if unit is None:  # ad-hoc SQL: from the name (and the Arrow type)
        if arrow_type is not None and (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)):
            return "text"
        if arrow_type is not None and pa.types.is_boolean(arrow_type):
            return "flag"
        if n.endswith("_ns") or "_ns_" in n:
            unit = "ns"
        elif n.endswith("bytes_per_s"):
            unit = "bytes/s"
        elif n.endswith("_bytes") or n == "bytes":
            unit = "bytes"
        elif n.endswith("_pct"):
            unit = "%"
        elif n in ("run_id", "pid", "tid", "rank") or n.endswith("_id"):
            unit = "id"
        else:
            unit = "value"
    if unit == "ns":
        return "timestamp" if is_timestamp(n) else "duration"
    if unit == "value":
        if n.endswith("flop_per_s"):
            return "FLOP/s"
        if n.endswith("_fraction") or n in ("utilization", "cpu_utilization") or "fraction 0-1" in d:
            return "fraction"
        return "value"
    if unit == "bytes/s" or unit == "FLOP" or unit == "bytes":
        return unit
    return unit  # %, count, id, enum, text, flag, Hz


def _scale(kind: str, maxabs: float) -> tuple[str, float, int]:
    """(unit label, divisor, decimals) for a column whose largest magnitude is ``maxabs``."""
    if kind == "duration":
        for label, f in _TIME:
            if maxabs / f < 1e4 or label == "s":
                return label, f, 0 if label == "ns" else 3
    if kind == "bytes":  # sizes in binary units, as PyTorch, nvidia-smi and `tracekit plot memory`
        for i, label in enumerate(("B", "KiB", "MiB", "GiB", "TiB", "PiB")):
            f = 1024.0 ** i
            if maxabs / f < 1e4 or label == "PiB":
                return label, f, 0 if i == 0 else 2
    base = {"bytes/s": "B/s", "FLOP": "FLOP", "FLOP/s": "FLOP/s"}[kind]
    for i, prefix in enumerate(_SI):
        f = 1000.0 ** i
        if maxabs / f < 1e4 or i == len(_SI) - 1:
            return prefix + base, f, 0 if i == 0 else 2
    raise AssertionError


_SUFFIXES = {"duration": ("_ns",), "bytes": ("_bytes",), "bytes/s": ("_bytes_per_s",),
             "FLOP": ("_flop",), "FLOP/s": ("flop_per_s",), "fraction": ("_fraction",),
             "%": ("_pct",)}


def _header(name: str, kind: str, label: str) -> str:
    base = name
    for suffix in _SUFFIXES.get(kind, ()):
        if base.endswith(suffix) and base != suffix:
            base = base[: -len(suffix)].rstrip("_")
            break
        if suffix.startswith("_") and f"{suffix}_" in base:  # total_ns_a -> total_a
            base = base.replace(f"{suffix}_", "_", 1)
            break
    if any(base == suffix.lstrip("_") for suffix in _SUFFIXES.get(kind, ())):
        return label  # bytes -> MB, bytes_per_s -> GB/s
    return f"{base} {label}" if base else label


def format_plain(v) -> str:
    """Text of a value without a display unit: integers exactly, floats with 3 decimals (or 4
    significant digits below 1), NULL as empty, text with control characters made visible."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v != 0 and abs(v) < 1:
            return f"{v:.4g}"
        return f"{v:.3f}".rstrip("0").rstrip(".")
    if isinstance(v, decimal.Decimal):
        return format_plain(int(v)) if v == v.to_integral_value() else format_plain(float(v))
    if isinstance(v, str):
        return visible(v)
    if isinstance(v, bytes):
        return visible(v.decode("latin-1"))
    return visible(str(v))


def _num(v) -> float | None:
    t = type(v)
    if t is int:
        return float(v)
    if t is float:
        return None if v != v or v in (math.inf, -math.inf) else v
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float, decimal.Decimal)):
        f = float(v)
        return None if math.isnan(f) or math.isinf(f) else f
    return None


_SECONDARY_IDS = ("range_id", "parent_range_id", "correlation_id", "launch_id", "step_id", "tid",
                  "stream_id")
_NAMING = ("name", "kernel_name", "range_name", "api_name", "metric_name", "thread_name")


def priority(name: str, kind: str) -> float:
    """Drop order when a table is too wide (lowest first): timestamps 0, standard deviations 1,
    min/max/median/percentiles and secondary identifiers (range_id, tid, correlation_id, ...) 2,
    other text 2.5, counts and other values 3, durations 3.5, percentages, fractions, totals and
    deltas 4, flags 4.5, identifiers (run_id, pid, rank, device_id, enumerations, steps) 5; the column naming
    the rows is 6 (see :func:`columns_of`)."""
    n = name.lower()
    if kind == "timestamp":
        return 0
    if kind == "flag":  # warmup: says which rows are not like the others
        return 4.5
    if "stddev" in n:
        return 1
    if n in _SECONDARY_IDS or n.startswith("parent_"):
        return 2
    if kind in ("id", "enum") or n in _KEY_TEXT:
        return 5
    if any(n.startswith(p) or f"_{p}" in n for p in ("min", "max", "med", "p50", "p90", "p99")):
        return 2
    if kind in ("fraction", "%") or n.startswith(("total", "delta")) or n.endswith("total_ns"):
        return 4
    if kind == "text":
        return 2.5
    return 3.5 if kind == "duration" else 3


def column(name: str, values: list, kind: str, maxabs: float | None = None) -> Col:
    """A displayed column of ``values`` shown as ``kind`` (see :func:`kind_of`); ``maxabs``: the
    magnitude its unit is chosen for (default: its own largest value)."""
    if kind in ("duration", "bytes", "bytes/s", "FLOP", "FLOP/s"):
        nums = [_num(v) for v in values]
        if maxabs is None:
            maxabs = max((abs(x) for x in nums if x is not None), default=0.0)
        label, f, dec = _scale(kind, maxabs)
        cells = ["" if x is None else (f"{x / f:.{dec}f}" if dec else str(round(x / f)))
                 for x in nums]
        cells = [c if c or v is None else format_plain(v) for c, v in zip(cells, values)]
        return Col(name, _header(name, kind, label), cells, "right", "num", priority(name, kind))
    if kind in ("fraction", "%"):
        k = 100.0 if kind == "fraction" else 1.0
        cells = ["" if (x := _num(v)) is None else f"{x * k:.1f}" for v in values]
        return Col(name, _header(name, kind, "%"), cells, "right", "num", priority(name, kind))
    if all(type(v) is int or v is None for v in values):  # the common id/count case, fast
        cells = ["" if v is None else str(v) for v in values]
    elif all(type(v) is str or v is None for v in values):
        cells = ["" if v is None else visible(v) for v in values]
    else:
        cells = _float_cells(values)
    if kind in ("text", "enum") or (kind == "value" and values
                                    and all(isinstance(v, str) or v is None for v in values)):
        key = kind == "enum" or name in _KEY_TEXT
        return Col(name, name, cells, "left", "key" if key else "text", priority(name, kind),
                   shortenable=kind == "text" or len(max(cells, key=len, default="")) > 16)
    right = kind not in ("flag",)
    if kind == "id":
        return Col(name, name, cells, "right" if _all_numeric(values) else "left", "key",
                   priority(name, kind), shortenable=not _all_numeric(values))
    return Col(name, name, cells, "right" if right else "left", "num", priority(name, kind))


def _float_cells(values: list) -> list[str]:
    """Cells of a column of plain values. A column whose floats are all 0 or at least 1 in size
    shows each with 3 decimals, trailing zeros kept, so its digits line up (a speedup column reads
    1.059, 1.000, 1.030, not 1.059, 1, 1.03); other values as :func:`format_plain` writes them."""
    floats = [v for v in values if type(v) is float and math.isfinite(v)]
    if floats and all(v == 0 or abs(v) >= 1 for v in floats):
        return [f"{v:.3f}" if type(v) is float and math.isfinite(v) else format_plain(v)
                for v in values]
    return [format_plain(v) for v in values]


def _all_numeric(values) -> bool:
    return all(v is None or (isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool))
               for v in values)


def columns_of(table: pa.Table, units: dict[str, tuple[str, str]] | None = None) -> list[Col]:
    """Displayed columns of an Arrow table. ``units``: {column: (unit, description)} from a named
    query's header; columns without one are typed from their names."""
    units = units or {}
    kinds = [kind_of(f.name, *units.get(f.name, (None, "")), f.type) for f in table.schema]
    texts = [f.name for f, k in zip(table.schema, kinds) if k == "text"]
    naming = next((n for n in _NAMING if n in texts), texts[0] if texts else None)
    out = []
    # size columns of like magnitude in one unit, the one of the largest (peak allocated and
    # reserved side by side in GiB, not MiB beside GiB); a column 1024 times smaller keeps its own
    tops = {f.name: max((abs(x) for x in (_num(v) for v in col.to_pylist()) if x is not None), default=0.0)
            for f, col, kind in zip(table.schema, table.columns, kinds) if kind == "bytes"}
    for f, col, kind in zip(table.schema, table.columns, kinds):
        top = tops.get(f.name)
        shared = None if top is None else max(t for t in tops.values() if t <= top * 1024)
        c = column(f.name, col.to_pylist(), kind, shared)
        if f.name == naming:  # names the rows (kernel, range, API call): kept longest and widest
            c.kind, c.priority, c.min_width = "key", 6, MIN_NAME
        out.append(c)
    return out
