"""Close-match suggestions for mistyped names (queries, tables, parameters, columns, commands)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``word``, best first (case ignored): those with a
    difflib similarity of at least 0.6 and within 0.1 of the best one; failing that, choices
    that start with ``word`` (3 characters or more)."""
    choices = list(dict.fromkeys(choices))
    w = word.lower()
    scored = sorted(((difflib.SequenceMatcher(None, w, c.lower()).ratio(), c) for c in choices),
                    key=lambda t: -t[0])
    if scored and scored[0][0] >= 0.6:
        best = scored[0][0]
        return [c for r, c in scored if r >= 0.6 and r >= best - 0.1][:n]
    if len(w) >= 3:
        return [c for c in choices if c.lower().startswith(w)][:n]
    return []


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'a' or 'b'?)"`` for the close matches of ``word``, or ``""``."""
    m = [repr(x) for x in close_matches(word, choices)]
    if not m:
        return ""
    return " (did you mean " + (m[0] if len(m) == 1 else ", ".join(m[:-1]) + " or " + m[-1]) + "?)"
