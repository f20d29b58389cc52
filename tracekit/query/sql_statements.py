"""What a piece of SQL will run, as DuckDB's own parser sees it (for :mod:`tracekit.query.sql_guard`).

:func:`classify` splits the text with ``duckdb.extract_statements`` and names each statement's
kind (``SELECT``, ``COPY``, ``CREATE SECRET``, ...). A statement that runs another one is
unwrapped and the inner statement is what counts: ``EXPLAIN ANALYZE COPY ...`` (DuckDB runs the
COPY to time it) is a ``COPY``, ``PREPARE p AS COPY ...`` is a ``COPY``; ``EXPLAIN`` without
ANALYZE counts the same way, since the sandbox cannot tell a plan from a run by its words alone.
``EXECUTE p`` is the kind ``p`` was prepared as in the same text, else ``EXECUTE``.

The words after the first keyword are read with ``duckdb.tokenize`` (comments, strings and quoted
names are tokens of their own, so ``/* EXPLAIN */`` or ``'AS'`` cannot mislead it).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from tracekit.errors import QueryError, one_line

# objects a CREATE or DROP may make in the in-memory database; others (SECRET, which can be
# PERSISTENT, i.e. a file; EXTENSION REPOSITORY) are kinds of their own
_OBJECTS = frozenset({"TABLE", "VIEW", "MACRO", "FUNCTION", "SEQUENCE", "TYPE", "INDEX", "SCHEMA"})
_CREATE_WORDS = frozenset({"OR", "REPLACE", "TEMP", "TEMPORARY", "UNIQUE", "IF", "NOT", "EXISTS"})
_MAX_DEPTH = 8  # EXPLAIN EXPLAIN ... nested deeper is refused (DuckDB itself refuses at 2)


@dataclass(frozen=True)
class Statement:
    """One statement: ``kind`` (what will run, after unwrapping) and ``text`` (as written)."""

    kind: str
    text: str

    def words(self, n: int = 60) -> str:
        """The statement on one line, at most ``n`` characters."""
        return " ".join(self.text.split())[:n]


def _parse(text: str) -> list:
    try:
        return duckdb.extract_statements(text)
    except duckdb.Error as exc:
        raise QueryError(f"SQL failed: {one_line(exc)}") from None
    except ValueError:  # a statement type this duckdb module has no name for
        raise QueryError(f"SQL holds a statement of a kind tracekit cannot name "
                         f"({' '.join(text.split())[:60]!r})") from None


def _tokens(text: str) -> list[tuple[int, int, str]]:
    """(start, end, upper-case word) of every token of ``text`` but comments."""
    toks = [(pos, str(kind).rsplit(".", 1)[-1]) for pos, kind in duckdb.tokenize(text)]
    out = []
    for i, (pos, kind) in enumerate(toks):
        end = toks[i + 1][0] if i + 1 < len(toks) else len(text)
        if kind != "comment":
            word = text[pos:end].strip()
            out.append((pos, end, word.upper() if kind in ("keyword", "identifier") else word))
    return out


def _after_explain(text: str) -> str | None:
    """The statement an EXPLAIN statement explains: after ``EXPLAIN``, ``ANALYZE``/``VERBOSE``
    and a parenthesized option list (``EXPLAIN (FORMAT json, ANALYZE)``)."""
    toks = _tokens(text)
    if not toks or toks[0][2] != "EXPLAIN":
        return None
    i, depth = 1, 0
    while i < len(toks):
        word = toks[i][2]
        if word == "(":
            depth += 1
        elif word == ")" and depth:
            depth -= 1
        elif depth == 0 and word not in ("ANALYZE", "ANALYSE", "VERBOSE"):
            return text[toks[i][0]:]
        i += 1
    return None


def _prepared(text: str) -> tuple[str, str] | None:
    """(name, statement) of ``PREPARE name [(types)] AS statement``."""
    toks = _tokens(text)
    if len(toks) < 3 or toks[0][2] != "PREPARE":
        return None
    depth = 0
    for _pos, end, word in toks[2:]:
        if word == "(":
            depth += 1
        elif word == ")":
            depth -= 1
        elif depth == 0 and word == "AS":
            return toks[1][2].strip('"').upper(), text[end:]
    return None


def _object_kind(kind: str, text: str) -> str:
    """``CREATE``/``DROP`` followed by the object they make when it is not a table, view, macro
    ...: ``CREATE SECRET``, ``CREATE EXTENSION``; ``DEALLOCATE`` for DROP of a prepared one."""
    toks = _tokens(text)
    if kind == "DROP" and toks and toks[0][2] == "DEALLOCATE":
        return "DEALLOCATE"
    for _, _, word in toks[1:]:
        if word not in _CREATE_WORDS and word != "PERSISTENT":
            return kind if word in _OBJECTS else f"{kind} {word}"
    return f"{kind} ?"


def _lead(text: str) -> str:
    toks = _tokens(text)
    return toks[0][2] if toks else ""


def _kind(st, prepared: dict[str, str], depth: int) -> str:
    try:
        kind = str(st.type).rsplit(".", 1)[-1]
    except ValueError:  # a statement type this duckdb module has no name for
        return f"unnamed ({_lead(st.query)})"
    text = st.query
    if depth > _MAX_DEPTH:
        return "EXPLAIN"
    if kind == "EXPLAIN":
        inner = _after_explain(text)
        subs = _parse(inner) if inner else []
        return _kind(subs[0], prepared, depth + 1) if len(subs) == 1 else "EXPLAIN"
    if kind == "PREPARE":
        found = _prepared(text)
        subs = _parse(found[1]) if found else []
        if len(subs) != 1:
            return "PREPARE"
        inner = _kind(subs[0], prepared, depth + 1)
        prepared[found[0]] = inner
        return inner
    if kind == "EXECUTE":
        toks = _tokens(text)
        name = toks[1][2].strip('"').upper() if len(toks) > 1 else ""
        return prepared.get(name, "EXECUTE")
    if kind in ("CREATE", "DROP"):
        return _object_kind(kind, text)
    if kind == "MULTI" and _lead(text) in ("PIVOT", "UNPIVOT"):
        return "SELECT"  # PIVOT makes its enum types, then selects
    return kind


def classify(text: str) -> list[Statement]:
    """Every statement of ``text`` with the kind of what it runs. :class:`QueryError` when DuckDB
    cannot parse it."""
    prepared: dict[str, str] = {}
    return [Statement(_kind(st, prepared, 0), st.query) for st in _parse(text)]
