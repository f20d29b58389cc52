"""Units of Nsight Compute metrics and their conversion to tracekit's base units.

ncu prints scaled units in its CSV exports (``Kbyte``, ``usecond``, ``cycle/nsecond`` ...) and
plain ones in reports (``byte``, ``ns``, ``hz``, ``byte/s``). ``UNIT_TABLE`` maps each to
``(base_unit, factor)``: ``value_in_base = value * factor``. Byte prefixes are decimal
(1 Kbyte = 1000 bytes): ncu prints a 32 KiB shared-memory configuration as ``32.77 Kbyte``
(``launch__shared_mem_config_size`` in the RTX 2080 Ti fixture: 32768 bytes). Binary prefixes
(``Kibyte``) are 1024-based. Units not listed are kept as they are (factor 1).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_BYTE_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
                "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_TIME = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
         "second": 1e9, "s": 1e9}
_PER_TIME = {"nsecond": 1e9, "ns": 1e9, "usecond": 1e6, "us": 1e6, "msecond": 1e3, "ms": 1e3,
             "second": 1.0, "s": 1.0}
_HZ = {"hz": 1.0, "Hz": 1.0, "khz": 1e3, "Khz": 1e3, "KHz": 1e3, "mhz": 1e6, "Mhz": 1e6,
       "MHz": 1e6, "ghz": 1e9, "Ghz": 1e9, "GHz": 1e9}


def _build() -> dict[str, tuple[str, float]]:
    t: dict[str, tuple[str, float]] = {}
    for p, f in _BYTE_PREFIX.items():
        t[f"{p}byte"] = ("byte", f)
        for tu, tf in _PER_TIME.items():
            t[f"{p}byte/{tu}"] = ("byte/s", f * tf)
    for tu, tf in _TIME.items():
        t[tu] = ("ns", tf)
    for tu, tf in _PER_TIME.items():
        t[f"cycle/{tu}"] = ("Hz", tf)
        t[f"inst/{tu}"] = ("inst/s", tf)
    for u, f in _HZ.items():
        t[u] = ("Hz", f)
    for u in ("cycle", "inst", "%", "warp", "block", "thread", "register/thread", "byte/block",
              "inst/cycle", "byte/cycle", "sector", "request", "SM", "pass"):
        t.setdefault(u, (u, 1.0))
    t["cycles"] = ("cycle", 1.0)
    t["Kcycle"] = ("cycle", 1e3)
    t["Mcycle"] = ("cycle", 1e6)
    t["Gcycle"] = ("cycle", 1e9)
    t["Kinst"] = ("inst", 1e3)
    t["Minst"] = ("inst", 1e6)
    t["Ginst"] = ("inst", 1e9)
    return t


UNIT_TABLE: dict[str, tuple[str, float]] = _build()

_NUMBER = r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$"
# commas only as thousands separators: 1,168,078 or 1,234.5 (never 1,5 nor 12,34)
_GROUPED = r"^[-+]?\d{1,3}(,\d{3})+(\.\d*)?([eE][-+]?\d+)?$"
_COMMA_NUMBER = r"^[-+]?\d+(,\d+)+(\.\d*)?$"
_MISSING = ("", "n/a", "N/A", "nan", "NaN", "no data", "-")


def parse_values(raw: pa.Array) -> pa.Array:
    """Numbers of a string array: thousands separators (',') removed; empty, 'n/a', 'no data' and
    anything that is not a plain number give null (never 0)."""
    raw = raw.cast(pa.string())
    t = pc.utf8_trim_whitespace(raw)
    s = pc.replace_substring(t, ",", "")
    ok = pc.and_(pc.match_substring_regex(s, _NUMBER), pc.invert(pc.is_in(s, pa.array(_MISSING))))
    # a comma that is not a thousands separator (a localized '1,5') is no number: null, counted
    # by comma_decimals
    ok = pc.and_(ok, pc.or_(pc.invert(pc.match_substring(t, ",")), pc.match_substring_regex(t, _GROUPED)))
    ok = pc.fill_null(ok, False)
    clean = pc.if_else(ok, s, pa.scalar(None, pa.string())).cast(pa.float64())
    # '1e309' matches the pattern but is no measurement: infinities become null too
    return pc.if_else(pc.is_finite(clean), clean, pa.scalar(None, pa.float64()))


def comma_decimals(raw: pa.Array) -> int:
    """How many values of ``raw`` are digits with commas that are not thousands separators
    (``1,5``, ``12,34``): read as NULL by :func:`parse_values`, and worth a warning."""
    t = pc.utf8_trim_whitespace(raw.cast(pa.string()))
    bad = pc.and_(pc.match_substring_regex(t, _COMMA_NUMBER),
                  pc.invert(pc.match_substring_regex(t, _GROUPED)))
    return int(pc.sum(pc.fill_null(bad, False).cast(pa.int64())).as_py() or 0)


def convert(values: pa.Array, units: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(value in base units, base unit) for float ``values`` with raw ``units``.

    Known units are scaled by :data:`UNIT_TABLE`; unknown units keep their value and name.
    """
    units = pc.fill_null(units.cast(pa.string()), "")
    keys = pa.array(list(UNIT_TABLE), pa.string())
    idx = pc.index_in(units, value_set=keys)
    base = pc.take(pa.array([v[0] for v in UNIT_TABLE.values()], pa.string()), idx)
    factor = pc.take(pa.array([v[1] for v in UNIT_TABLE.values()], pa.float64()), idx)
    base = pc.if_else(pc.is_null(idx), units, base)
    factor = pc.fill_null(factor, 1.0)
    return pc.multiply(values, factor), base
