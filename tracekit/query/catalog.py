"""The catalog: every name a statement may use, declared once and read by the engine (which views
and macros to create), the explanations (which tables a statement reads) and the SQL error
messages (what a misspelt name may have meant).

- the run-folder tables of :mod:`tracekit.schema` and the views ``runs`` and ``run_tables``;
- the macros of every ``_macros.sql`` that all connections load (:func:`macro_statements`);
- the roofline tables and macros (:mod:`tracekit.roofline`), created together on first use;
- named queries' parameters (``getvariable('top')``) and output units are declared in each
  query's header (:mod:`tracekit.query.named_queries`).
"""

from __future__ import annotations

import functools
import re

from tracekit import schema
from tracekit.query.named_queries import macro_topics, macros_sql

RUN_VIEWS = ("runs", "run_tables")
ROOFLINE = "<roofline>"  # marker in the set of needed names: tracekit.roofline.register must run
# the tables tracekit.roofline.register creates beside the macros of queries/roofline/_macros.sql
ROOFLINE_TABLES = frozenset({"gpu_peaks", "gpu_aliases", "tensor_factors", "tk_ncu_spec"})
# tk_critical_path, the table tracekit.whatif.critical.register computes for the named queries
# critical_path and critical_path_summary, comes from the dependency graph these macros build
# (queries/whatif/_macros.sql): a query over it reads the tables they read
CRITICAL_PATH = "tk_critical_path"
CRITICAL_PATH_SOURCES = ("tk_wi_nodes", "tk_wi_launch_edges", "tk_wi_sync_edges", "tk_wi_event_edges",
                         "tk_wi_collectives", "tk_wi_step_nodes", "tk_wi_ranks")
_IDENT = re.compile(r"[a-z_][a-z0-9_]*")
_COMMENT = re.compile(r"--[^\n]*")
_MACRO = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?MACRO\s+(\w+)",
                    re.IGNORECASE | re.MULTILINE)


def identifiers(text: str) -> set[str]:
    """Every word of ``text`` outside ``--`` comments that could name a view or macro (lower case;
    words in string literals count too, which can only create more than needed)."""
    return set(_IDENT.findall(_COMMENT.sub("", text).lower()))


@functools.cache
def macro_statements() -> dict[str, str]:
    """Every ``_macros.sql`` of :func:`~tracekit.query.named_queries.macro_topics`
    (``queries/_macros.sql``, then ``queries/ops/``, ``queries/ranks/``, ...) as {macro name
    (lower case): its CREATE statement}, in load order (a macro after those it calls)."""
    text = "\n".join(macros_sql(t) for t in macro_topics())
    starts = list(_MACRO.finditer(text))
    ends = [m.start() for m in starts[1:]] + [len(text)]
    return {m.group(1).lower(): text[m.start():end] for m, end in zip(starts, ends)}


@functools.cache
def roofline_identifiers() -> frozenset[str]:
    """The words of the roofline macros (the names they use in turn)."""
    from tracekit.roofline import macros_text

    return frozenset(identifiers(macros_text()))


@functools.cache
def roofline_names() -> frozenset[str]:
    """Names that need the roofline tables and macros: its tables and every macro its
    queries/roofline/_macros.sql creates."""
    from tracekit.roofline import macros_text

    return ROOFLINE_TABLES | {m.group(1).lower() for m in _MACRO.finditer(macros_text())}


def all_names() -> list[str]:
    """Every table, view and macro a statement may name (for "did you mean" hints)."""
    return (list(schema.TABLES) + list(RUN_VIEWS) + list(macro_statements())
            + sorted(roofline_names()))


def needed(text: str) -> set[str]:
    """The tables, run views and macros ``text`` uses, directly or through the macros it calls,
    plus :data:`ROOFLINE` when it uses the roofline tables or macros."""
    macros = macro_statements()
    want: set[str] = set()
    todo = identifiers(text)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name == CRITICAL_PATH:
            todo |= set(CRITICAL_PATH_SOURCES)
        elif name in macros:
            want.add(name)
            todo |= identifiers(macros[name])
        elif name in roofline_names():
            want.add(ROOFLINE)
            todo |= roofline_identifiers()
        elif name in schema.TABLES or name in RUN_VIEWS:
            want.add(name)
    return want


def everything() -> set[str]:
    """What :attr:`Engine.con` creates: every table, run view, macro and the roofline."""
    return set(schema.TABLES) | set(RUN_VIEWS) | {ROOFLINE} | set(macro_statements())


def tables_read(text: str) -> set[str]:
    """The run-folder tables ``text`` (SQL) reads, directly or through the macros of
    ``queries/_macros.sql`` and the roofline macros it calls."""
    return {n for n in needed(text) if n in schema.TABLES}
