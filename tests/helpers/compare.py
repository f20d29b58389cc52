"""One comparison computed once for a test that runs `tracekit compare` on the same two runs
several times (formats, gate limits): the command's formatting, gate and exit status run every
time, the comparison itself (tracekit.study.compare_runs, seconds on real runs) once."""

from __future__ import annotations

import copy


def compare_once(monkeypatch) -> dict:
    """Replace ``tracekit.study.compare_runs`` for this test with a memo keyed on its arguments
    (each caller gets its own deep copy; a call that raises is not remembered). Returns
    ``{"calls": n}``: how many comparisons ran for real and returned."""
    import tracekit.study as study

    real, memo, seen = study.compare_runs, {}, {"calls": 0}

    def compare_runs(run_a, run_b, **kw):
        key = (str(run_a), str(run_b), tuple(sorted(kw.items())))
        if key not in memo:
            memo[key] = real(run_a, run_b, **kw)
            seen["calls"] += 1
        return copy.deepcopy(memo[key])

    monkeypatch.setattr(study, "compare_runs", compare_runs)
    return seen
