"""The catalog: every name a statement may use, declared once and read by the engine (which views
and macros to create), the explanations (which tables a statement reads) and the SQL error
messages (what a misspelt name may have meant).

- the run-folder tables of :mod:`tracekit.schema` and the views ``runs`` and ``run_tables``;
- the macros of every ``_macros.sql`` that all connections load (:func:`macro_statements`);
- the names extensions provide (:mod:`tracekit.query.hooks`: the roofline tables and macros, the
  critical path), each created with what it reads, on first use;
- named queries' parameters (``getvariable('top')``) and output units are declared in each
  query's header (:mod:`tracekit.query.named_queries`).
"""

from __future__ import annotations

import functools
import re

from tracekit import schema
from tracekit.query import hooks
from tracekit.query.named_queries import macro_topics, macros_sql

RUN_VIEWS = ("runs", "run_tables")
_IDENT = re.compile(r"[a-z_][a-z0-9_]*")
# a string literal (kept: its words count) or a -- comment (dropped): a "--" inside a literal,
# e.g. a notice's "--step-pattern REGEX", starts no comment
_COMMENT = re.compile(r"('(?:[^']|'')*')|--[^\n]*")
_MACRO = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?MACRO\s+(\w+)",
                    re.IGNORECASE | re.MULTILINE)


def identifiers(text: str) -> set[str]:
    """Every word of ``text`` outside ``--`` comments that could name a view or macro (lower case;
    words in string literals count too, which can only create more than needed)."""
    return set(_IDENT.findall(_COMMENT.sub(lambda m: m.group(1) or "", text).lower()))


@functools.cache
def macro_statements() -> dict[str, str]:
    """Every ``_macros.sql`` of :func:`~tracekit.query.named_queries.macro_topics`
    (``queries/_macros.sql``, then ``queries/ops/``, ``queries/ranks/``, ...) as {macro name
    (lower case): its CREATE statement}, in load order (a macro after those it calls)."""
    text = "\n".join(macros_sql(t) for t in macro_topics())
    starts = list(_MACRO.finditer(text))
    ends = [m.start() for m in starts[1:]] + [len(text)]
    return {m.group(1).lower(): text[m.start():end] for m, end in zip(starts, ends)}


def all_names() -> list[str]:
    """Every table, view and macro a statement may name (for "did you mean" hints)."""
    provided = {n for e in hooks.extensions() for n in e.provides}
    return list(schema.TABLES) + list(RUN_VIEWS) + list(macro_statements()) + sorted(provided)


def needed(text: str) -> set[str]:
    """The tables, run views and macros ``text`` uses, directly or through the macros and
    extensions it calls, plus the :attr:`~tracekit.query.hooks.Extension.marker` of every
    extension whose names it uses."""
    macros = macro_statements()
    want: set[str] = set()
    todo = identifiers(text)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in macros:
            want.add(name)
            todo |= identifiers(macros[name])
        elif (ext := hooks.provider(name)) is not None:
            want.add(ext.marker)
            todo |= ext.reads
        elif name in schema.TABLES or name in RUN_VIEWS:
            want.add(name)
    return want


def everything() -> set[str]:
    """What :attr:`Engine.con` creates: every table, run view, macro and ``in_full`` extension."""
    return (set(schema.TABLES) | set(RUN_VIEWS) | set(macro_statements())
            | {e.marker for e in hooks.extensions() if e.in_full})


def tables_read(text: str) -> set[str]:
    """The run-folder tables ``text`` (SQL) reads, directly or through the macros of
    ``queries/_macros.sql`` and the extensions it uses."""
    return {n for n in needed(text) if n in schema.TABLES}
