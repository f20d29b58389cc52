"""Reading Nsight Compute CSV exports (``ncu --csv --page raw`` and ``--page details``).

Both pages start with the launch columns ("ID", "Process ID", "Process Name", "Host Name",
"Kernel Name", sometimes "Kernel Time", "Context", "Stream", and in newer versions "Block Size",
"Grid Size", "Device", "CC"); ncu's own log lines (``==PROF==``, ``==WARNING==``, ``==ERROR==``)
may come before the header. The raw page is wide (one column per metric, a units row after the
header, one row per launch); the details page is long ("Section Name", "Metric Name",
"Metric Unit", "Metric Value", plus rule rows without a metric). Cells are read as text by
Python's csv module (quoted names with commas stay whole; exports hold one row per launch or
per launch and metric, so this is small); numbers are parsed by
:func:`tracekit.collectors.ncu.units.parse_values`.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit.errors import InputError

LAUNCH_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time",
                  "Context", "Stream", "Block Size", "Grid Size", "Device", "CC")
DETAILS_COLUMNS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")
RULE_COLUMNS = ("Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
                "Estimated Speedup")
_LOG_PREFIXES = ("==PROF==", "==WARNING==", "==ERROR==", "==WARN==", "==INFO==")
_HEADER_START = '"ID","Process ID"'


def looks_like_ncu_csv(head: bytes) -> bool:
    """True when the first bytes of a file are an ncu CSV export or ncu log lines."""
    text = head.lstrip(b"\xef\xbb\xbf").decode("utf-8", "replace")
    for line in text.splitlines()[:200]:
        if line.startswith(_LOG_PREFIXES):
            return True
        if line.strip():
            return line.startswith(_HEADER_START) or ('"Kernel Name"' in line and '"ID"' in line)
    return False


def read_csv(path: Path) -> tuple[str, list[str], pa.Table, list[str]]:
    """Read an ncu CSV export.

    Returns ``(page, header, table, log_lines)``: page is 'raw' or 'details'; ``table`` holds the
    rows after the header (the raw page's units row included) as strings, columns named
    ``c0, c1, ...`` in header order. Raises :class:`InputError` for a file with no header (the
    message says when ncu profiled no kernel at all) or a row ncu's CSV writer would not make.
    """
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    text = data.decode("utf-8", "replace")
    lines = text.splitlines(keepends=True)
    logs, start = [], None
    for i, line in enumerate(lines):
        if line.startswith(_LOG_PREFIXES):
            logs.append(line.rstrip("\r\n"))
            continue
        if line.startswith(_HEADER_START) or ('"Kernel Name"' in line and line.startswith('"ID"')):
            start = i
            break
    if start is None:
        if logs:
            raise InputError(f"ncu profiled no kernel: the file holds only {len(logs)} ncu log line(s) "
                             "and no result table (check --kernel-name/--nvtx-include/--launch-skip filters)",
                             path=path)
        raise InputError("not an Nsight Compute CSV export (no \"ID\",\"Process ID\",... header)", path=path)
    body = [ln for ln in lines[start:] if not ln.startswith(_LOG_PREFIXES) and ln.strip()]
    try:
        rows = list(csv.reader(body, strict=True))
    except csv.Error as exc:
        raise InputError(f"malformed ncu CSV: {exc}", path=path) from None
    header = rows[0]
    width = len(header)
    if any(len(r) > width for r in rows[1:]):
        raise InputError(f"malformed ncu CSV: a row has more cells than the {width}-column header", path=path)
    # only the details page's trailing rule cells may be missing; a shorter row was cut off
    least = header.index("Metric Value") + 1 if "Metric Value" in header else width
    if any(len(r) < least for r in rows[1:]):
        raise InputError(f"malformed ncu CSV: a row has fewer cells than the {width}-column header "
                         "(is the file cut short?)", path=path)
    # the details page omits the trailing rule cells on metric rows: pad them
    columns = list(zip(*[r + [""] * (width - len(r)) for r in rows[1:]])) or [()] * width
    table = pa.table({f"c{i}": pa.array(list(c), pa.string()) for i, c in enumerate(columns)})
    page = "details" if all(c in header for c in ("Metric Name", "Metric Value")) else "raw"
    return page, header, table, logs


def col(table: pa.Table, header: list[str], name: str) -> pa.ChunkedArray | None:
    """The column called ``name`` (first occurrence) or None."""
    try:
        return table.column(f"c{header.index(name)}")
    except ValueError:
        return None


def dims(arr: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """x, y, z int32 arrays from text like '(128, 1, 1)'; nulls where it does not parse."""
    parts = pc.extract_regex(pc.fill_null(arr.cast(pa.string()), ""),
                             r"^\(\s*(?P<x>\d+)\s*,\s*(?P<y>\d+)\s*,\s*(?P<z>\d+)\s*\)$")
    return tuple(pc.struct_field(parts, k).cast(pa.int32()) for k in ("x", "y", "z"))
