"""Reading one MLPerf training result file: its log lines as columns of ``mlperf_events``.

Two line formats, found anywhere in a line (after a rank prefix or other output, as MLPerf's
own parser does: the last token of the line starts the entry):

- rounds 0.5 and 0.6 (``mlperf_compliance``): ``:::MLL <unix time, s> <key>: <json>``, the JSON
  holding ``value`` and ``metadata``;
- rounds 0.7 onward (``mlperf_logging.mllog``): ``:::MLLOG <json>``, the JSON holding
  ``time_ms`` (Unix time, ms), ``key``, ``value``, ``metadata``, ``event_type``, ``namespace``.

``:::SYSJSON <json>`` lines (a system description printed into the log, 2.0 onward) are kept
apart (:func:`read_log` returns the last one). Every other line is the program's own output:
counted, not read. A line with the token that does not parse (cut short, bad JSON, no time or
key) is counted per reason and skipped.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

TOKENS = (":::MLLOG ", ":::MLL ")
SYSJSON = ":::SYSJSON "
_MLL = re.compile(r"([0-9]+)(?:\.([0-9]*))? ([A-Za-z0-9_]+) ?:\s+(.+)$")
_NS_DIGITS = 9
# a time this far from the Unix epoch (year 2286) is a broken line, not a log's clock
_MAX_S = 10_000_000_000
EVENT_TYPES = ("POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END")

COLUMNS = ("line", "time_ns", "key", "value", "value_num", "metadata", "event_type", "epoch_num",
           "samples_count", "format")


def _seconds_to_ns(whole: str, frac: str | None) -> int:
    """The decimal seconds ``whole.frac`` as integer ns, exactly (no float rounding)."""
    frac = (frac or "")[:_NS_DIGITS]
    return int(whole) * 1_000_000_000 + int(frac.ljust(_NS_DIGITS, "0"))


def _ms_to_ns(ms) -> int | None:
    if type(ms) is int:
        return ms * 1_000_000 if abs(ms) < _MAX_S * 1000 else None
    if type(ms) is float and math.isfinite(ms) and abs(ms) < _MAX_S * 1000:
        whole = int(ms)  # the whole ms exactly; ms * 1e6 as a double would round past 2**53
        return whole * 1_000_000 + round((ms - whole) * 1_000_000)
    return None


def _number(v):
    if type(v) is float and math.isfinite(v):
        return v
    if type(v) is int and abs(v) < 2**63:
        return float(v)
    return None


def _event_type(key: str) -> str:
    """0.5/0.6 lines carry no event type: a ``*_start`` key opens an interval, ``*_stop`` closes
    it (the naming mlperf_logging's event types formalized), anything else is a point in time."""
    if key.endswith("_start"):
        return "INTERVAL_START"
    if key.endswith("_stop"):
        return "INTERVAL_END"
    return "POINT_IN_TIME"


def _parse_mll(text: str):
    """A 0.5/0.6 entry (after the token) as (time_ns, key, value, metadata, event_type) or a
    reason string."""
    m = _MLL.match(text)
    if m is None:
        return "not '<time> <key>: <json>'"
    whole, frac, key, js = m.groups()
    if len(whole) > 10:
        return "time out of range"
    try:
        obj = json.loads(js)
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return "bad JSON"
    if not isinstance(obj, dict):
        return "JSON not an object"
    return _seconds_to_ns(whole, frac), key, obj.get("value"), obj.get("metadata"), _event_type(key)


def _parse_mllog(text: str):
    """A 0.7+ entry (after the token) as (time_ns, key, value, metadata, event_type) or a reason."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return "bad JSON"
    if not isinstance(obj, dict):
        return "JSON not an object"
    key = obj.get("key")
    t = _ms_to_ns(obj.get("time_ms"))
    if not isinstance(key, str) or not key:
        return "no key"
    if t is None:
        return "no time_ms"
    et = obj.get("event_type")
    return t, key, obj.get("value"), obj.get("metadata"), et if et in EVENT_TYPES else None


def _dump(v) -> str | None:
    """``v`` as compact JSON; a NaN or infinity (which Python's parser accepts and JSON has not)
    anywhere in it makes the whole value its text, as a JSON string."""
    if v is None:
        return None
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(repr(v), ensure_ascii=False)


def read_log(path: Path) -> tuple[dict, dict, dict | None, int]:
    """Read ``path``: (columns of its entries, {reason: lines skipped}, the last ``:::SYSJSON``
    object or None, lines of other output)."""
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    bad: dict[str, int] = {}
    sysjson, other = None, 0
    with open(path, encoding="utf-8", errors="replace", newline=None) as f:
        for lineno, line in enumerate(f, 1):
            if ":::" not in line:
                other += 1
                continue
            line = line.rstrip("\r\n")
            at, fmt = line.rfind(":::MLLOG "), "MLLOG"
            if at < 0:
                at, fmt = line.rfind(":::MLL "), "MLL"
            if at < 0:
                at = line.rfind(SYSJSON)
                if at < 0:
                    other += 1
                    continue
                try:
                    obj = json.loads(line[at + len(SYSJSON):])
                except (ValueError, RecursionError):
                    obj = None
                if isinstance(obj, dict):
                    sysjson = obj
                else:
                    bad[":::SYSJSON not a JSON object"] = bad.get(":::SYSJSON not a JSON object", 0) + 1
                continue
            text = line[at + len(fmt) + 4:]
            got = _parse_mllog(text) if fmt == "MLLOG" else _parse_mll(text)
            if isinstance(got, str):
                reason = f":::{fmt} {got}"
                bad[reason] = bad.get(reason, 0) + 1
                continue
            t, key, value, meta, etype = got
            meta = meta if isinstance(meta, dict) else {}
            cols["line"].append(lineno)
            cols["time_ns"].append(t)
            cols["key"].append(key[:200])
            cols["value"].append(_dump(value))
            cols["value_num"].append(_number(value))
            cols["metadata"].append(_dump(meta) if meta else None)
            cols["event_type"].append(etype)
            cols["epoch_num"].append(_number(meta.get("epoch_num")))
            cols["samples_count"].append(_number(meta.get("samples_count")))
            cols["format"].append(fmt)
    return cols, bad, sysjson, other
