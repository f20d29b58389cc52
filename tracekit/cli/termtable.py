"""Plain-text tables that fit the terminal (the ``table`` format of every command).

Nothing here interprets markup or writes a terminal escape: cells are plain text, and control
characters from a trace (ESC, BEL, newlines, bidi overrides ...) are shown as ``\\x1b``-style
escapes (:func:`visible`). Widths are counted in terminal cells (wide CJK characters count 2).

Layout (:func:`layout`) within the width of the terminal (:func:`terminal_width`):

1. every column gets its natural width (the longest cell or header);
2. columns that are empty in every row are left out, and a ``run_id`` column with a single value
   moves into the title (``kernel_summary (run r1)``);
3. if the table is still too wide, long text columns (kernel names, NVTX ranges) are shortened
   with an ellipsis (two thirds of the width kept from the start, one third from the end), down to
   :data:`MIN_TEXT` cells each (:data:`MIN_NAME` for the column naming the rows); never folded over several lines;
4. if that is not enough, whole columns are dropped, lowest :attr:`Col.priority` first and from
   the right among equals (:func:`tracekit.cli.display.priority`: identifiers and the column
   naming the rows go last);
5. the caller prints one note naming what was left out (:func:`render_lines` returns it).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from rich.cells import cell_len, get_character_cell_size

from tracekit.labels import visible

GAP = 2  # spaces between columns
MIN_TEXT = 16  # text columns are not shortened below this many cells ...
MIN_NAME = 28  # ... and the column naming the rows (kernel name, NVTX range) not below this
ELLIPSIS = "…"


def terminal_width(stream=None, default: int = 80) -> int:
    """Columns available: ``$COLUMNS`` when set to a positive integer, else the width of the
    terminal of ``stream`` (stdout), else of stderr, else ``default``."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    for s in (stream or sys.stdout, sys.stderr):
        try:
            return max(os.get_terminal_size(s.fileno()).columns, 1)
        except (AttributeError, OSError, ValueError):
            continue
    return default


def width_of(text: str) -> int:
    """Terminal cells of ``text`` (ASCII: its length, the common case, fast)."""
    return len(text) if text.isascii() else cell_len(text)


def _take(text: str, cells: int) -> str:
    """The longest prefix of ``text`` that fits in ``cells``."""
    n = 0
    for i, ch in enumerate(text):
        n += get_character_cell_size(ch)
        if n > cells:
            return text[:i]
    return text


def _take_end(text: str, cells: int) -> str:
    return _take(text[::-1], cells)[::-1]


def shorten(text: str, width: int, where: str = "middle") -> str:
    """``text`` cut to ``width`` cells with one ``…``: in the middle (two thirds of the room kept
    from the start) or at the end. Returned unchanged when it fits."""
    if width_of(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:max(width, 0)]
    room = width - 1
    if where == "end":
        return _take(text, room) + ELLIPSIS
    front = (room * 2 + 2) // 3
    head = _take(text, front)
    return head + ELLIPSIS + _take_end(text, room - cell_len(head))


def shorten_distinct(values: list[str], width: int, where: str = "middle") -> list[str]:
    """Each of ``values`` shortened to ``width`` cells (:func:`shorten`) so that different values
    stay different: values that would become the same text (kernel names that differ only in
    the middle) show the part where they differ between two ellipses, and if that is not enough
    end in ``~1``, ``~2``, ... in the order of their first row."""
    out = [shorten(v, width, where) for v in values]
    groups: dict[str, list[str]] = {}
    for v, o in zip(values, out):
        g = groups.setdefault(o, [])
        if v not in g:
            g.append(v)
    fix: dict[str, str] = {}
    for vs in groups.values():
        if len(vs) > 1:
            fix.update(_distinct(vs, width))
    return [fix.get(v, o) for v, o in zip(values, out)] if fix else out


def _lcp(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _distinct(vs: list[str], width: int) -> dict[str, str]:
    """Shortened texts of ``vs`` (different values with the same plain shortening) that keep the
    place where each differs from all the others: one ``…`` moved so that the kept start (or end)
    reaches past that place, or else the start, ``…``, a window around it, ``…``, the end."""
    room = width - 1
    context = 3
    out = {}
    for v in vs:
        others = [u for u in vs if u != v]
        at = max(_lcp(v, u) for u in others)  # v differs from every other value by position at
        back_at = max(_lcp(v[::-1], u[::-1]) for u in others)
        default = (room * 2 + 2) // 3
        if at + 1 + context <= room - 4:
            front = min(max(default, at + 1 + context), room - 4)
            out[v] = _take(v, front) + ELLIPSIS + _take_end(v, room - front)
        elif back_at + 1 + context <= room - 4:
            back = min(max(room - default, back_at + 1 + context), room - 4)
            out[v] = _take(v, room - back) + ELLIPSIS + _take_end(v, back)
        else:
            head = room // 4
            mid = room - 1 - head
            start = max(head, at - context)
            out[v] = _take(v, head) + ELLIPSIS + _take(v[start:], mid) + ELLIPSIS
        if width_of(out[v]) > width:
            out[v] = shorten(v, width)
    texts = [out[v] for v in vs]
    for i, v in enumerate(vs, 1):  # still equal to another: numbered
        if texts.count(out[v]) > 1 or any(out[v] == t for t in texts[:i - 1]):
            mark = f"~{i}"
            out[v] = _take(out[v], width - len(mark) - 1) + ELLIPSIS + mark
    return out


@dataclass
class Col:
    """One displayed column. ``cells`` are final texts (already :func:`visible`).

    ``kind``: "key" (identifier), "text" or "num".
    ``priority``: drop order when the table is too wide, lowest first.
    """

    name: str  # the column's real name (what --columns and the notes use)
    header: str
    cells: list[str]
    align: str = "left"  # or "right"
    kind: str = "num"
    priority: int = 3
    shortenable: bool = False
    where: str = "middle"
    min_width: int = MIN_TEXT
    width: int = field(default=0, init=False)
    _natural: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.header = visible(self.header)  # a column name from `tracekit sql` is trace text too

    def natural(self) -> int:
        if self._natural is None:
            self._natural = max([width_of(self.header)] + [width_of(c) for c in self.cells])
        return self._natural

    def minimum(self) -> int:
        return min(self.natural(), self.min_width) if self.shortenable else self.natural()


@dataclass
class Layout:
    cols: list[Col]
    dropped: list[str]  # names of the columns that did not fit
    empty: list[str]  # names of the columns left out because every row is empty


def _total(cols: list[Col], widths: list[int]) -> int:
    return sum(widths) + GAP * max(len(cols) - 1, 0)


def _fill(cols: list[Col], room: int) -> None:
    """Set widths: non-shortenable columns at natural width; the shortenable ones start at their
    minimum and share what is left of ``room``, one cell at a time to the narrowest that still
    wants more (so a short column gets its whole text before a long one grows)."""
    for c in cols:
        c.width = c.minimum()
    flex = [c for c in cols if c.shortenable and c.width < c.natural()]
    avail = room - _total(cols, [c.width for c in cols])
    while avail > 0 and flex:
        c = min(flex, key=lambda c: c.width)
        step = min(avail, c.natural() - c.width, max(1, avail // len(flex)))
        c.width += step
        avail -= step
        if c.width >= c.natural():
            flex.remove(c)


def layout(cols: list[Col], width: int) -> Layout:
    """Choose the columns and widths so that every line fits in ``width`` cells."""
    empty = [c.name for c in cols if all(v == "" for v in c.cells)] if cols and cols[0].cells else []
    kept = [c for c in cols if c.name not in empty] or list(cols[:1])
    dropped: list[str] = []
    while True:
        if _total(kept, [c.minimum() for c in kept]) <= width or len(kept) == 1:
            break
        order = sorted(range(len(kept)), key=lambda i: (kept[i].priority, -i))
        dropped.append(kept.pop(order[0]).name)
    _fill(kept, width)
    if len(kept) == 1 and kept[0].width > width:
        kept[0].width = width
    order = {c.name: i for i, c in enumerate(cols)}
    dropped.sort(key=order.get)  # in the table's order
    return Layout(kept, dropped, empty)


def _pad(text: str, width: int, align: str) -> str:
    pad = width - width_of(text)
    return (" " * pad + text) if align == "right" else (text + " " * pad)


def render_lines(cols: list[Col], width: int, title: str | None = None) -> tuple[list[str], Layout]:
    """Lines of the table (title, header, rule, rows), each at most ``width`` cells, and the
    layout (what was dropped, for the caller's note)."""
    lay = layout(cols, width)
    lines = []
    if title:
        lines.append(shorten(visible(title), width, "end"))
    if not lay.cols:
        return lines, lay
    columns = []
    for c in lay.cols:  # one padded list per column; ASCII columns take str's C paths
        texts = [shorten(c.header, c.width, "end")] + c.cells
        if c.natural() > c.width:
            texts = texts[:1] + shorten_distinct(texts[1:], c.width, c.where)
        if all(v.isascii() for v in texts):
            just = str.rjust if c.align == "right" else str.ljust
            columns.append([just(v, c.width) for v in texts])
        else:
            columns.append([_pad(v, c.width, c.align) for v in texts])
    sep = " " * GAP
    rows = [sep.join(parts).rstrip() for parts in zip(*columns)]
    lines.append(rows[0])
    lines.append(sep.join("─" * c.width for c in lay.cols))
    lines.extend(rows[1:])
    return lines, lay


def wrap(text: str, width: int) -> list[str]:
    """``text`` wrapped at spaces into lines of at most ``width`` cells (long words are cut)."""
    lines, cur = [], ""
    for word in text.split(" "):
        while cell_len(word) > width:
            if cur:
                lines.append(cur)
                cur = ""
            lines.append(_take(word, width))
            word = word[len(lines[-1]):]
        cand = f"{cur} {word}" if cur else word
        if cell_len(cand) <= width:
            cur = cand
        else:
            lines.append(cur)
            cur = word
    if cur:
        lines.append(cur)
    return lines
