"""``tracekit whatif``'s terminal table: one row per scenario and step on a job, naming the rank
the step waits for, within the terminal's width (issue 36, item 3)."""

from __future__ import annotations

import pyarrow as pa

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
    a step where no rank held the others up keeps the rank whose step ends last in the
    prediction (:func:`tracekit.whatif.by_step`)."""
    from tracekit.whatif import by_step

    per_step = by_step(result)
    if per_step.num_rows == result.num_rows:
        return result, []
    late = waited_for(waits) if waits is not None else {}
    keys = zip(per_step.column("run_id").to_pylist(), per_step.column("step").to_pylist())
    old = per_step.column("rank").to_pylist()
    ranks = [late.get(k, r) for k, r in zip(keys, old)]
    idx = per_step.schema.get_field_index("rank")
    per_step = per_step.set_column(idx, per_step.schema.field(idx), pa.array(ranks, pa.int32()))
    n = max(per_step.column("ranks").to_pylist())
    found = sum(1 for k in zip(per_step.column("run_id").to_pylist(), per_step.column("step").to_pylist())
                if k in late)
    line = (f"one row per scenario and step of {n} ranks; rank = the rank the step waits for (last at "
            "its collectives, holding the others up longest: query step_waits); -f csv or json gives "
            "every rank's row")
    if found < per_step.num_rows:
        line += (f"; {per_step.num_rows - found} of {per_step.num_rows} rows have no such rank and show "
                 "the one whose step ends last in the prediction")
    return per_step, [line]


def table_columns(result: pa.Table, wide: bool) -> list[str]:
    """The columns of the terminal table for ``result`` (:func:`job_rows`' or whatif's)."""
    keep = list(BASE_COLUMNS)
    if "ranks" in result.column_names:
        keep.insert(3, "ranks")
    if any(v is not None for v in result.column("note").to_pylist()):
        keep.append("note")  # n/a, or the floor that set the prediction
    if wide:  # else the speedup would be the column left out
        keep.append("measured_ns")
    if all(v is None for v in result.column("rank").to_pylist()):
        keep.append("pid")  # no rank known: the process tells the steps apart
    return keep


def short_notes(result: pa.Table) -> pa.Table:
    """``result`` with each note cut to its first word group: 'n/a: REASON' -> 'n/a' (the reason
    is a line on stderr), so the note fits beside the numbers at 80 columns."""
    notes = [None if v is None else v.split(":", 1)[0] for v in result.column("note").to_pylist()]
    idx = result.schema.get_field_index("note")
    return result.set_column(idx, result.schema.field(idx), pa.array(notes, pa.string()))
