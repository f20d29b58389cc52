"""Bounds on what a what-if scenario may ask (``tracekit whatif -s``), checked before any work:

- ``kernels:REGEX=F`` matches kernel names with RE2, through DuckDB's ``regexp_matches`` (as
  ``--nvtx``, ``--step-pattern`` and ``--rank-pattern`` do): time linear in the names' length.
  Python's ``re`` backtracked for minutes on ``(.*a){20}x``; a pattern RE2 refuses (lookaround,
  backreferences) is a one-line error before the graph is built.
- ``+`` joins the changes of a scenario, so a ``+`` of the regular expression is written ``\\+``
  (a backslash before it): :func:`split` does not split there, and RE2 reads ``\\+`` as a literal
  plus (``kernels:a\\+b=0.5`` matches ``a+b``). The quantifier "one or more" is ``{1,}``.
- A factor scales int64 nanoseconds: every scaled duration or lag, and the graph's times summed
  (every duration and lag, plus the latest anchor), must stay under :data:`TIME_LIMIT_NS`
  (2^61 ns, 73 years), where the replay's int64 arithmetic (its "no time" is -2^62) is exact.
  ``kernels:.=1e308`` predicted a step of -9.2e18 ns, ``host=1e308`` one of 0 ns, with NumPy's
  ``RuntimeWarning`` lines; now each is one line, exit 2, and no NumPy warning is shown.
"""

from __future__ import annotations

import re

import numpy as np

from tracekit.duck import re2_error
from tracekit.errors import InputError

TIME_LIMIT_NS = 2**61
__all__ = ["TIME_LIMIT_NS", "check_pattern", "check_times", "label", "name_hits", "scaled", "split"]

_UNESCAPED_PLUS = re.compile(r"(?<!\\)\+")


def split(spec: str) -> list[str]:
    """The changes of scenario text ``spec``: split at every ``+`` without a backslash before it
    (``kernels:a\\+b=0.5+comm=0`` -> ``kernels:a\\+b=0.5``, ``comm=0``)."""
    return _UNESCAPED_PLUS.split(spec)


def check_pattern(spec: str, pattern: str) -> None:
    """:class:`InputError` (one line) when RE2 refuses ``pattern`` of scenario ``spec``."""
    why = re2_error(pattern)
    if why is not None:
        raise InputError(f"scenario {spec!r}: {pattern!r} is not a valid regular expression (RE2 "
                         f"syntax, which runs in linear time: no backreferences or lookaround; "
                         f"write a + as \\+): {why}")


def name_hits(names, pattern: str) -> np.ndarray:
    """For each of ``names``, whether RE2 finds ``pattern`` in it (``re.search`` semantics)."""
    import duckdb
    import pyarrow as pa

    if len(names) == 0:
        return np.zeros(0, dtype=bool)
    table = pa.table({"i": np.arange(len(names), dtype=np.int64), "n": pa.array(list(names), pa.string())})
    con = duckdb.connect(":memory:")
    try:
        con.register("names", table)
        hit = con.execute("SELECT regexp_matches(n, ?) FROM names ORDER BY i", [pattern]).fetchnumpy()
    except duckdb.Error as exc:
        raise InputError(f"{pattern!r} is not a valid regular expression (RE2 syntax): {exc}") from None
    finally:
        con.close()
    return np.asarray(next(iter(hit.values())), dtype=bool)


def label(change) -> str:
    """A change of a scenario (``kind``, ``factor``, ``pattern``) as its text, quoted."""
    if change.kind in ("kernels", "ops"):
        return f"'{change.kind}:{change.pattern}={change.factor:g}'"
    return f"'{change.kind}={change.factor:g}'"


def _over(what: str) -> InputError:
    return InputError(f"scenario {what} takes the graph's times past 2^61 ns (73 years), where the "
                      "replay's int64 nanoseconds stop being exact; use a smaller factor")


def scaled(values: np.ndarray, factor: float, change) -> np.ndarray:
    """``values`` (int64 ns) x ``factor``, rounded, as int64; :class:`InputError` naming
    ``change`` when a product reaches :data:`TIME_LIMIT_NS`. No NumPy warning."""
    with np.errstate(all="ignore"):
        out = np.rint(np.asarray(values, dtype=np.float64) * factor)
        if out.size and not np.abs(out).max() < TIME_LIMIT_NS:
            raise _over(label(change))
        return out.astype(np.int64)


def check_times(changes, lead, d1, d2, anchor) -> None:
    """:class:`InputError` when the latest anchor plus every lead, d1 and d2 summed (a bound on
    any replayed time) reaches :data:`TIME_LIMIT_NS` after ``changes``."""
    from tracekit.whatif.store import chunks

    total, latest = 0.0, 0.0
    with np.errstate(all="ignore"):
        for a, b in chunks(len(d1)):
            total += sum(float(np.abs(np.asarray(x[a:b]), dtype=np.float64).sum()) for x in (lead, d1, d2))
            anc = np.asarray(anchor[a:b])
            latest = max(latest, float(anc.max())) if anc.size else latest
    if not total + latest < TIME_LIMIT_NS:
        raise _over("'" + "+".join(label(c).strip("'") for c in changes) + "'")
