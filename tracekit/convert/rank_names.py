"""Ranks read from file names and traces, checked: linear-time patterns, plain numbers, a range.

``--rank-pattern`` is matched with RE2 (DuckDB's ``regexp_extract``), whose time is linear in the
name's length: Python's ``re`` backtracks, and ``(a+)+$`` on a long file name did not finish in
120 s. A rank is a whole number from 0 to :data:`MAX_RANK`: ``-1``, ``true``, 2^63-1, a 23-digit
number or a superscript digit (``'²'.isdigit()`` is true, ``int('²')`` fails) is no rank.
"""

from __future__ import annotations

import functools
import re

from tracekit.errors import InputError, one_line

MAX_RANK = 2**31 - 1  # ranks are int32 in the tables (processes.rank)


def valid_rank(value) -> int | None:
    """``value`` when it is a rank (an int, not a bool, 0..MAX_RANK), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RANK:
        return None
    return value


def number_rank(text: str | None) -> int | None:
    """The rank ``text`` spells in ASCII digits (at most 10), else None."""
    if not text or not text.isascii() or not text.isdigit() or len(text) > 10:
        return None
    return valid_rank(int(text))


@functools.cache
def _con():
    import duckdb

    return duckdb.connect(":memory:")


@functools.cache
def _groups(pattern: str) -> int:
    try:
        return re.compile(pattern).groups
    except re.error as exc:
        raise InputError(f"--rank-pattern {pattern!r} is not a regular expression: {exc}") from None


def search_rank(pattern: str, name: str) -> int | None:
    """The rank in ``name`` by ``pattern``: its first group, or the whole match; None when it does
    not match or the text is no rank. :class:`InputError` for a pattern RE2 cannot run."""
    group = 1 if _groups(pattern) else 0
    import duckdb

    try:
        row = _con().execute("SELECT regexp_matches(?, ?), regexp_extract(?, ?, ?)",
                             [name, pattern, name, pattern, group]).fetchone()
    except duckdb.Error as exc:
        raise InputError(f"--rank-pattern {pattern!r} cannot be used (RE2 syntax, which runs in "
                         f"linear time: no backreferences or lookaround): {one_line(exc)[:200]}") from None
    return number_rank(row[1]) if row[0] else None
