"""The terminal-table view of a query result: which columns a reader sees, in what order.

Rules, on top of :mod:`tracekit.cli.termtable`'s layout:

- the query's main measures (its ``@key`` columns, :mod:`tracekit.query.named_queries`) are dropped
  last, after everything but the column naming the rows; one empty in every row is named in the
  note under the table (``gpu_busy_ns (empty in every row)``), not shown as a column of dashes;
- trace timestamps (``start_ns``: ns since the epoch) are left out and named in the note, unless
  they are main measures;
- a column with the same value in every row (two rows or more) is not a column: it moves into a
  line under the title, ``same in every row: pid 111, coverage 93.6 %`` (a ``run_id`` with one
  value goes into the title itself, ``kernel_summary (run r1)``). Main measures stay in the table;
- columns asked for with ``--columns`` are all shown: what does not fit beside the others is
  printed as a further block of the same rows, with the identifying columns repeated at its left
  (``explicit``). Otherwise a note names the columns that had no room.
"""

from __future__ import annotations

import pyarrow as pa

from tracekit.cli.display import columns_of, is_timestamp
from tracekit.cli.termtable import (
    Col,
    cell_len,
    render_lines,
    shorten,
    terminal_width,
    visible,
    wrap,
)

KEY_PRIORITY = 7  # above every other column (termtable.layout drops the lowest first)
CONSTANT_PREFIX = "same in every row: "


def wrap_items(prefix: str, items: list[str], width: int) -> list[str]:
    """``prefix`` and ``items`` joined by ", " into lines of at most ``width`` cells, breaking
    between items (a column's name stays beside its value); an item wider than a line is
    wrapped at its spaces."""
    *lines, cur = wrap(prefix.rstrip(), width) or [""]
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        cand = f"{cur} {piece}" if cur else piece
        if cell_len(cand) <= width:
            cur = cand
            continue
        if cur:
            lines.append(cur)
        if cell_len(piece) <= width:
            cur = piece
        else:
            *full, cur = wrap(piece, width)
            lines += full
    if cur:
        lines.append(cur)
    return lines


def constant_text(c: Col) -> str:
    """``coverage 93.6 %`` for a column ``coverage %`` whose every cell is ``93.6``."""
    value = c.cells[0]
    base, _, label = c.header.rpartition(" ")
    if base and c.header != c.name:  # a header with a display unit: "time ms" -> "time 29.3 ms"
        return f"{base} {value} {label}"
    return f"{c.header} {value}"


def constant_columns(table: pa.Table) -> set[str]:
    """Names of the columns of ``table`` (two rows or more) with one non-null value in every row."""
    if table.num_rows < 2:
        return set()
    out = set()
    for name, col in zip(table.column_names, table.columns):
        if col.null_count:
            continue
        t = col.type
        if pa.types.is_nested(t) or pa.types.is_dictionary(t):  # lists of shapes: no unique kernel
            first = col[0].as_py()
            same = all(v == first for v in col.to_pylist())
        else:
            same = len(col.unique()) == 1
        if same:
            out.add(name)
    return out


def split_constants(cols: list[Col], keys: set[str], constant: set[str] | None = None
                    ) -> tuple[list[Col], list[str]]:
    """(columns that vary or are main measures, texts of the others' one value). ``constant``:
    the columns constant in the whole result (when the table shows only its first rows)."""
    if not cols or len(cols[0].cells) < 2:
        return cols, []
    kept, const = [], []
    for c in cols:
        first = c.cells[0]
        same = c.name in constant if constant is not None else all(v == first for v in c.cells)
        if c.name not in keys and first != "" and same:
            const.append(constant_text(c))
        else:
            kept.append(c)
    if not kept:  # every column constant (identical rows): keep them as a table
        return cols, []
    return kept, const


def _blocks(cols: list[Col], width: int) -> list[list[str]]:
    """Every column of ``cols`` in as many blocks of rows as it takes, the identifying columns of
    the first block repeated in each further one."""
    out = []
    lines, lay = render_lines(cols, width)
    out.append(lines)
    ids = [c for c in lay.cols if c.kind == "key"]
    rest = [c for c in cols if c.name in set(lay.dropped)]
    while rest:
        block = ids + rest
        lines, lay = render_lines(block, width)
        placed = {c.name for c in lay.cols} - {c.name for c in ids}
        if not placed:  # the identifiers alone fill the width: the rest without them
            block = rest
            lines, lay = render_lines(block, width)
            placed = {c.name for c in lay.cols}
        out.append(lines)
        rest = [c for c in rest if c.name not in placed]
    return out


def _full_texts(cols: list[Col], keys: set[str], width: int, most: int = 3) -> list[str]:
    """For a main measure that is text and had to be shortened (roofline's ``missing``: why a
    number is NULL), its distinct values in full under the table (at most ``most``)."""
    out = []
    for c in cols:
        if c.name in keys and c.kind != "num" and c.natural() > c.width:
            values = list(dict.fromkeys(v for v in c.cells if v))
            for v in values[:most]:
                out += wrap(f"{c.name}: {v}", width)
            if len(values) > most:
                out.append(f"{c.name}: {len(values) - most} more (-f csv shows them all)")
    return out


def table_lines(result: pa.Table, title: str | None = None, units: dict | None = None,
                width: int | None = None, hint: str = "", keys=(), explicit: bool = False,
                full: pa.Table | None = None, optional=()) -> list[str]:
    """Lines of at most ``width`` cells (the terminal's by default): title, the line of constant
    columns, the table (or its blocks, ``explicit``), then a note naming the columns left out.
    ``keys``: the main measures; ``explicit``: the columns were chosen with ``--columns``;
    ``full``: the whole result when ``result`` is its first rows (a column is constant only if it
    is in every row of it); ``optional``: columns left out silently when empty (``@optional``)."""
    width = width or terminal_width()
    keys = set(keys)
    cols = columns_of(result, units)
    if result.num_rows and "run_id" in result.column_names:
        ids = result.column("run_id").unique().to_pylist()
        if len(ids) == 1 and ids[0] is not None:
            cols = [c for c in cols if c.name != "run_id"]
            title = f"{title} (run {ids[0]})" if title else f"run {ids[0]}"
    for c in cols:
        if c.name in keys:
            c.priority = max(c.priority, KEY_PRIORITY)
    constant = constant_columns(full) if full is not None and full.num_rows > result.num_rows else None
    cols, const = split_constants(cols, keys, constant)
    head: list[str] = []
    if title:
        head.append(shorten(visible(title), width, "end"))
    if const:
        head += wrap_items(CONSTANT_PREFIX, [visible(x) for x in const], width)
    if explicit:
        blocks = _blocks(cols, width)
        lines = list(head)
        for i, b in enumerate(blocks):
            lines += ([""] if i else []) + b
        return lines
    quiet = set(optional)
    cols = [c for c in cols if not (c.name in quiet and all(v == "" for v in c.cells))]
    # a trace timestamp (19 digits of ns since the epoch) tells a reader nothing a row's other
    # columns do not: left out unless it is a main measure (`-f csv` and --columns show it)
    stamps = [c.name for c in cols if c.name not in keys and is_timestamp(c.name)
              and (units or {}).get(c.name, ("ns",))[0] == "ns" and len(cols) > 2]
    cols = [c for c in cols if c.name not in stamps]
    lines, lay = render_lines(cols, width)
    notes = []
    if lay.dropped:
        notes.append(f"{', '.join(lay.dropped)} (no room in {width} columns)")
    if lay.empty:
        notes.append(f"{', '.join(lay.empty)} (empty in every row)")
    if stamps:
        notes.append(f"{', '.join(stamps)} (trace timestamps)")
    lines = head + lines
    lines += _full_texts(lay.cols, keys, width)
    if notes:
        text = f"not shown: {'; '.join(notes)}. {hint}".rstrip()
        lines += wrap(visible(text), width)
    return lines
