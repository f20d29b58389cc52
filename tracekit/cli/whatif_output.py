"""``tracekit whatif``'s terminal table: one row per scenario and step on a job, naming the rank
the step waits for, within the terminal's width (issue 36, item 3)."""

from __future__ import annotations

import pyarrow as pa

SHORT = {"gpu floor (communication)": "gpu floor (comm)"}
"""Notes shortened in the terminal table (:func:`short_notes`)."""

BASE_COLUMNS = ["run_id", "scenario", "step", "rank", "predicted_ns", "speedup", "saved_ns", "baseline_err_pct"]


def waited_for(waits: pa.Table) -> dict[tuple[str, int], int]:
    """{(run_id, step): rank} from ``step_waits`` rows: the rank that held the others up longest
    in the step (largest held_ns; ties: the lowest rank). Steps where no rank held anyone up
    are absent."""
    best: dict[tuple[str, int], tuple[int, int]] = {}
    for r in waits.to_pylist():
        key = (r["run_id"], r["step"])
        if r["held_ns"] > 0 and r["rank"] is not None and (key not in best or r["held_ns"] > best[key][0]):
            best[key] = (r["held_ns"], r["rank"])
    return {k: rank for k, (_, rank) in best.items()}


def job_rows(result: pa.Table, waits: pa.Table | None) -> tuple[pa.Table, list[str]]:
    """(one row per scenario, run and step, stderr lines) of a job's :func:`tracekit.whatif.whatif`
    ``result`` (``result`` itself and no lines when every step has one rank). ``rank`` is the rank
    the measured step waits for (:func:`waited_for` of ``waits``, the run's ``step_waits``);
    a step where no rank held the others up keeps by_step's rank, the one whose predicted step
    is longest (:func:`tracekit.whatif.by_step`). ``bound`` and ``run_ahead_ns`` are those of
    the rank shown."""
    from tracekit.whatif import by_step

    per_step = by_step(result)
    if per_step.num_rows == result.num_rows:
        return result, []
    late = waited_for(waits) if waits is not None else {}
    keys = list(zip(per_step.column("run_id").to_pylist(), per_step.column("step").to_pylist()))
    ranks = [late.get(k, r) for k, r in zip(keys, per_step.column("rank").to_pylist())]
    # bound and run-ahead are the measured step's, the same in every scenario: the shown rank's
    rank_rows = {(r["run_id"], r["step"], r["rank"]): r for r in result.to_pylist()}
    for name, typ in (("rank", pa.int32()), ("bound", pa.string()), ("run_ahead_ns", pa.int64())):
        old = per_step.column(name).to_pylist()
        new = [rank_rows.get((*k, r), {name: v})[name] for k, r, v in zip(keys, ranks, old)]
        idx = per_step.schema.get_field_index(name)
        per_step = per_step.set_column(idx, per_step.schema.field(idx), pa.array(new, typ))
    found = sum(1 for k in keys if k in late)
    n = max(per_step.column("ranks").to_pylist())
    line = (f"one row per scenario and step of {n} ranks; rank = the rank the step waits for (last at "
            "its collectives, holding the others up longest: query step_waits); -f csv or json gives "
            "every rank's row")
    if found < per_step.num_rows:
        line += (f"; {per_step.num_rows - found} of {per_step.num_rows} rows have no such rank and show "
                 "the rank whose predicted step is longest")
    return per_step, [line]


def table_columns(result: pa.Table, wide: bool) -> list[str]:
    """The columns of the terminal table for ``result`` (:func:`job_rows`' or whatif's)."""
    keep = list(BASE_COLUMNS)
    if "ranks" in result.column_names:
        keep.insert(3, "ranks")
    if any(v is not None for v in result.column("note").to_pylist()):
        keep.append("note")  # n/a, or the floor that set the prediction
    ranged = any(v is not None for v in result.column("bound").to_pylist())  # else no host range
    if ranged:
        keep.append("bound")  # which side bounds the measured step (run-ahead: run_ahead_lines)
    if wide:  # else the speedup would be the column left out
        keep += ["measured_ns", "run_ahead_ns"] if ranged else ["measured_ns"]
    if all(v is None for v in result.column("rank").to_pylist()):
        keep.append("pid")  # no rank known: the process tells the steps apart
    return keep


def short_notes(result: pa.Table) -> pa.Table:
    """``result`` with each note cut to its first word group: 'n/a: REASON' -> 'n/a' (the reason
    is a line on stderr), 'gpu floor (communication)' -> 'gpu floor (comm)', so the note fits
    beside the numbers at 80 columns."""
    notes = [None if v is None else SHORT.get(v, v.split(":", 1)[0]) for v in result.column("note").to_pylist()]
    idx = result.schema.get_field_index("note")
    return result.set_column(idx, result.schema.field(idx), pa.array(notes, pa.string()))


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.1f}" if ns >= 100_000 else f"{ns / 1e6:.3f}"


def run_ahead_lines(result: pa.Table) -> list[str]:
    """One stderr line per run of :func:`tracekit.whatif.whatif`'s ``result``: the range of
    ``run_ahead_ns`` over its steps (and ranks), how far ahead of the GPU the host ran at a
    step's end; none for a run without it (steps detected in the kernels)."""
    spans: dict[str, list[int]] = {}
    for run, ahead in zip(result.column("run_id").to_pylist(), result.column("run_ahead_ns").to_pylist()):
        if ahead is not None:
            spans.setdefault(run, []).append(ahead)
    out = []
    for run, vals in spans.items():
        lo, hi = min(vals), max(vals)
        prefix = f"{run}: " if len(spans) > 1 else ""
        if hi == 0:
            out.append(f"{prefix}the host does not run ahead of the GPU: each step's GPU work has "
                       "ended by the step's end (run_ahead_ns 0)")
            continue
        span = _ms(lo) if lo == hi else f"{_ms(lo)}-{_ms(hi)}"
        out.append(f"{prefix}the host runs {span} ms ahead of the GPU at a step's end (run_ahead_ns: "
                   "the step's GPU work ends that much later)")
    return out
