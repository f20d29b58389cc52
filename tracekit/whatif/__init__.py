"""Replay and what-if: the dependency graph of a run folder, its replay, scenarios, critical path.

``whatif(engine, ["baseline", "comm=0.5"])`` returns one row per scenario, run, step and rank:
the measured step time, the baseline replay's time and error, the scenario's predicted time
and its speedup over the baseline (docs/whatif.md). :mod:`tracekit.whatif.graph` builds the
graph from the SQL of ``queries/whatif/_macros.sql``, :mod:`tracekit.whatif.replay` schedules
it, :mod:`tracekit.whatif.scenarios` changes it, :mod:`tracekit.whatif.critical` walks the
critical path of every step.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from tracekit.errors import InputError
from tracekit.whatif import graph as _graph
from tracekit.whatif import replay as _replay
from tracekit.whatif import scenarios as _scenarios

RESULT_SCHEMA = pa.schema([
    ("scenario", pa.string()), ("run_id", pa.string()), ("step", pa.int64()), ("rank", pa.int32()),
    ("measured_ns", pa.int64()), ("predicted_ns", pa.int64()), ("speedup", pa.float64()),
    ("baseline_err_pct", pa.float64()), ("baseline_ns", pa.int64()), ("pid", pa.int64()),
])
"""Columns of :func:`whatif` (units: ns, percent for baseline_err_pct, ratio for speedup)."""

UNITS = {
    "scenario": ("text", "The scenario as given (-s), e.g. comm=0.5 or no-straggler+launch=0."),
    "run_id": ("id", "Run folder the step comes from."),
    "step": ("count", "Step number (as step_summary numbers it)."),
    "rank": ("id", "Rank whose step range it is."),
    "measured_ns": ("ns", "The step's wall time in the trace (step_summary's wall_ns)."),
    "baseline_ns": ("ns", "The replay of the measured graph (scenario baseline)."),
    "baseline_err_pct": ("%", "100 x (baseline_ns - measured_ns) / measured_ns: the replay's own error."),
    "predicted_ns": ("ns", "The replay with the scenario's changes."),
    "speedup": ("value", "baseline_ns / predicted_ns (> 1: the scenario is faster)."),
    "pid": ("id", "OS process ID of the step's process."),
    "ranks": ("count", "Ranks of the step (by_step: the row is the slowest one's)."),
}


NOTES_KEY = b"tracekit.whatif.notes"
"""Schema metadata key of :func:`whatif`'s result: a JSON list of lines saying what each
``kernels:REGEX=F`` scenario matched (:func:`tracekit.whatif.scenarios.describe`)."""


def notes(result: pa.Table) -> list[str]:
    """The lines :func:`whatif` recorded in ``result`` (none for another table)."""
    meta = result.schema.metadata or {}
    return json.loads(meta[NOTES_KEY]) if NOTES_KEY in meta else []


def load_graph(engine, *, jobs: int | None = 1, scheduler: str | None = None) -> _graph.Graph:
    """The dependency graph of every run of ``engine`` (:class:`tracekit.query.Engine`); a job's
    built in per-rank parts (:mod:`tracekit.whatif.parts`) in this process (``jobs`` 1), on
    ``jobs`` local processes or on a Dask ``scheduler``'s workers.
    :class:`InputError` when there is nothing to replay."""
    from tracekit.whatif.parts import load_in_parts

    try:
        return load_in_parts(engine, jobs=jobs, scheduler=scheduler)
    except ValueError as exc:
        raise InputError(f"{', '.join(str(r.path) for r in engine.runs)}: {exc}") from None


def step_times(g: _graph.Graph, s: _replay.Schedule) -> np.ndarray:
    """Replayed wall time of every step of ``g.steps``: from its start node's start to its end
    node's end (end_point 1: marks, a detected step's last kernel) or start (0)."""
    a = g.steps.column("start_node").to_numpy()
    b = g.steps.column("end_node").to_numpy()
    point = g.steps.column("end_point").to_numpy()
    return np.where(point == 1, s.end[b], s.start[b]) - s.start[a]


def whatif(engine, scenarios: list[str], include_warmup: bool = True, *, jobs: int | None = 1,
           scheduler: str | None = None) -> pa.Table:
    """Replay every run of ``engine`` under each scenario (a text, or one parsed by
    :func:`tracekit.whatif.scenarios.parse_all`); see :data:`RESULT_SCHEMA`. The graph's
    per-rank parts are built as :func:`load_graph` says (``jobs``, ``scheduler``).
    :class:`InputError` for an unknown scenario or a run without steps."""
    parsed = [(p.spec, p.changes) for p in _scenarios.parse_all(scenarios)]
    g = load_graph(engine, jobs=jobs, scheduler=scheduler)
    if g.steps.num_rows == 0:
        raise InputError(f"{', '.join(str(r.path) for r in engine.runs)}: no steps to replay "
                         "(step_summary finds none)")
    base = step_times(g, _replay.replay(g))
    measured = g.steps.column("measured_ns").to_numpy()
    cols = {f.name: [] for f in RESULT_SCHEMA}
    for spec, changes in parsed:
        pred = base if all(c.kind == "baseline" for c in changes) else \
            step_times(g, _replay.replay(g, *_scenarios.apply(g, changes)))
        n = len(pred)
        cols["scenario"] += [spec] * n
        cols["run_id"] += g.steps.column("run_id").to_pylist()
        cols["step"] += g.steps.column("step").to_pylist()
        cols["rank"] += g.steps.column("rank").to_pylist()
        cols["measured_ns"] += measured.tolist()
        cols["baseline_ns"] += base.tolist()
        cols["baseline_err_pct"] += (100.0 * (base - measured) / np.maximum(measured, 1)).tolist()
        cols["predicted_ns"] += pred.tolist()
        cols["speedup"] += (base / np.maximum(pred, 1)).tolist()
        cols["pid"] += g.steps.column("pid").to_pylist()
    lines = unmatched_collectives(g) + [line for _, changes in parsed
                                        for line in _scenarios.describe(g, changes)]
    out = pa.table(cols, schema=RESULT_SCHEMA.with_metadata({NOTES_KEY: json.dumps(lines)}))
    if not include_warmup and "warmup" in g.steps.column_names:
        keep = np.tile(~g.steps.column("warmup").to_numpy(zero_copy_only=False).astype(bool), len(parsed))
        out = out.filter(pa.array(keep))
    return out


def unmatched_collectives(g: _graph.Graph) -> list[str]:
    """A warning line when NCCL kernels of ``g`` are in no collective instance matched across
    ranks (none otherwise): their ranks' waits for each other are not in the graph."""
    coll = g.cat == _graph.CAT["collective"]
    lost = int((coll & (g.instance[: len(coll)] < 0)).sum())
    if not lost:
        return []
    ranks = len(np.unique(g.rank[coll & (g.instance < 0)]))
    return [f"warning: {lost:,} of {int(coll.sum()):,} NCCL kernels ({ranks} rank(s)) are in no collective "
            "instance matched across ranks (on a job whose clock model moves a rank's times, the "
            "matched calls' times differ from the trace's); those ranks' waits for each other are "
            "not replayed, so no-straggler, comm=F and the critical path do not see them"]


def by_step(result: pa.Table) -> pa.Table:
    """:func:`whatif`'s rows reduced to one per scenario, run and step: the slowest rank's (the
    largest predicted_ns; ``rank`` is that rank), with ``ranks`` (how many) and the largest
    baseline error of any rank (by magnitude, signed) as ``baseline_err_pct``; measured_ns and
    baseline_ns are the largest over the ranks, speedup = baseline_ns / predicted_ns."""
    groups: dict[tuple, list[dict]] = {}
    for r in result.to_pylist():
        groups.setdefault((r["scenario"], r["run_id"], r["step"]), []).append(r)
    rows = []
    for rs in groups.values():
        worst = max(rs, key=lambda r: r["predicted_ns"])
        base = max(r["baseline_ns"] for r in rs)
        rows.append({**worst, "ranks": len(rs), "measured_ns": max(r["measured_ns"] for r in rs),
                     "baseline_ns": base, "speedup": base / max(worst["predicted_ns"], 1),
                     "baseline_err_pct": max((r["baseline_err_pct"] for r in rs), key=abs)})
    schema = RESULT_SCHEMA.append(pa.field("ranks", pa.int64()))
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()
