"""Text of ``tracekit queries`` (the list by topic) and ``tracekit queries NAME`` (one query in
full), wrapped to the terminal's width."""

from __future__ import annotations

import re

from rich.cells import cell_len

from tracekit.cli.termtable import terminal_width, wrap
from tracekit.query.named_queries import NamedQuery


def _hanging(left: str, text: str, indent: int, width: int) -> list[str]:
    """``left`` padded to ``indent`` cells, then ``text`` wrapped beside it."""
    body = wrap(text, max(width - indent, 20)) or [""]
    if cell_len(left) >= indent:  # a long name: its text starts on the next line
        return [left] + [" " * indent + line for line in body]
    first = left + " " * (indent - cell_len(left))
    return [first + body[0]] + [" " * indent + line for line in body[1:]]


def _params_and_columns(q: NamedQuery, width: int, pad: str = "") -> list[str]:
    out = []
    if q.params:
        out.append(f"{pad}parameters (--param KEY=VALUE):")
        w = max(len(p.name) for p in q.params) + len(pad) + 4
        for p in q.params:
            out += _hanging(f"{pad}  {p.name}", f"{p.type}, default {p.default}: {p.description}", w, width)
    out.append(f"{pad}columns:")
    w = max(len(c.name) + len(c.unit) for c in q.columns) + len(pad) + 6
    for c in q.columns:
        out += _hanging(f"{pad}  {c.name} [{c.unit}]", c.description, w, width)
    return out


_ITEM = re.compile(r"^(- |\* |\w[\w ,/()]*?\s+= |\w+: |@)")


def reflow(details: str, width: int) -> list[str]:
    """A query header's free text wrapped to ``width``: lines of one paragraph are joined; a line
    starting a list item (``- ``, ``name = ...``) starts a new one."""
    out, cur = [], ""
    for line in details.split("\n") + [""]:
        if not line.strip() or _ITEM.match(line):
            if cur:
                out += wrap(cur, width)
            cur = line.strip()
            if not line.strip():
                out.append("")
            continue
        cur = f"{cur} {line.strip()}" if cur else line.strip()
    return out


def describe(q: NamedQuery, width: int | None = None) -> str:
    """``tracekit queries NAME``: name, topic, description, definition, parameters, columns."""
    width = width or terminal_width()
    out = wrap(f"{q.name} ({q.topic}): {q.description}", width) + [""]
    out += reflow(q.details, width)
    out += [""] + _params_and_columns(q, width)
    if q.empty:
        out += [""] + wrap(f"an empty result means: {q.empty}", width)
    return "\n".join(out).replace("\n\n\n", "\n\n") + "\n"


def listing(queries: list[NamedQuery], verbose: bool = False, width: int | None = None) -> str:
    """``tracekit queries``: the queries by topic, each with its one-line description."""
    width = width or terminal_width()
    indent = max(len(q.name) for q in queries) + 4
    out, topic = [], None
    for q in queries:
        if q.topic != topic:
            out += ([""] if topic is not None else []) + [q.topic]
            topic = q.topic
        out += _hanging(f"  {q.name}", q.description, indent, width)
        if verbose:
            out += _params_and_columns(q, width, pad="    ")
    out += [""] + wrap("`tracekit queries NAME` shows one in full; `tracekit query NAME RUN_DIR` "
                       "runs it.", width)
    return "\n".join(out) + "\n"
