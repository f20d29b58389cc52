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
from tracekit.whatif import floors as _floors
from tracekit.whatif import graph as _graph
from tracekit.whatif import queue as _queue
from tracekit.whatif import replay as _replay
from tracekit.whatif import scenarios as _scenarios

RESULT_SCHEMA = pa.schema([
    ("scenario", pa.string()), ("run_id", pa.string()), ("step", pa.int64()), ("rank", pa.int32()),
    ("measured_ns", pa.int64()), ("predicted_ns", pa.int64()), ("speedup", pa.float64()),
    ("baseline_err_pct", pa.float64()), ("baseline_ns", pa.int64()), ("pid", pa.int64()),
    ("saved_ns", pa.int64()), ("replay_ns", pa.int64()), ("gpu_floor_ns", pa.int64()),
    ("host_wait_ns", pa.int64()), ("bound", pa.string()), ("note", pa.string()),
    ("run_ahead_ns", pa.int64()),
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
    "saved_ns": ("ns", "baseline_ns - predicted_ns: the time the scenario saves per step."),
    "replay_ns": ("ns", "The scenario's replay before the floors (predicted_ns is it, raised to gpu_floor_ns "
                        "and, for a scenario that only removes time, capped at baseline_ns)."),
    "gpu_floor_ns": ("ns", "The scenario's GPU work launched in the step: per device the union of its "
                           "replayed intervals, the largest device's (0 for a step detected on the GPU)."),
    "host_wait_ns": ("ns", "Measured time the step's host threads spent waiting for GPU work "
                           "(sync calls and the waits of tk_wi_wait_edges)."),
    "bound": ("text", "Which side bounds the measured step's throughput: gpu (the busiest stream's work "
                      "launched in the step >= 95 % of it, the host waits > 5 %), host (GPU < 95 %, host "
                      "waits <= 5 %), balanced (both saturated: GPU >= 95 %, waits <= 5 %), serial (neither: "
                      "they take turns); empty for a step detected in the kernels (no host range)."),
    "run_ahead_ns": ("ns", "How far ahead of the GPU the host ran: the measured end of the last GPU work "
                           "launched in the step's host range minus the range's end (0: that work had ended "
                           "by then); empty where the step launched no GPU work or has no host range."),
    "note": ("text", "n/a and why, where the scenario cannot act on the run (predicted_ns is then empty); "
                     "'gpu floor' or 'no gain' where a floor set predicted_ns ('gpu floor (communication)': "
                     "the busiest stream's work is at least half collective kernels, transfer or waiting "
                     "for other ranks)."),
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
    base_s = _replay.replay(g)
    base = step_times(g, base_s)
    measured = g.steps.column("measured_ns").to_numpy()
    work = _floors.step_of_gpu_work(g)
    base_floor = _floors.gpu_floor(g, base_s, work)
    waits = _floors.host_waits(g, base_s)
    bound = _bounds(measured, base_floor, waits)
    ahead = _floors.run_ahead(g, work)
    ranged = g.cat[g.steps.column("start_node").to_numpy()] == _graph.CAT["mark"]
    bound = [b if r else None for b, r in zip(bound, ranged.tolist())]
    ahead_col = [None if a < 0 else a for a in ahead.tolist()]
    comm_line = _floors.comm_floor_line(g, base_s, work, ranged)
    cols = {f.name: [] for f in RESULT_SCHEMA}
    na_lines = []
    for spec, changes in parsed:
        pred, raw, floor, note = _predict(g, changes, base, base_floor, work)
        if isinstance(note, str) and note.startswith("n/a"):
            na_lines.append(f"{spec}: {note}")
        n = len(pred)
        cols["scenario"] += [spec] * n
        cols["run_id"] += g.steps.column("run_id").to_pylist()
        cols["step"] += g.steps.column("step").to_pylist()
        cols["rank"] += g.steps.column("rank").to_pylist()
        cols["measured_ns"] += measured.tolist()
        cols["baseline_ns"] += base.tolist()
        cols["baseline_err_pct"] += (100.0 * (base - measured) / np.maximum(measured, 1)).tolist()
        cols["predicted_ns"] += pred.tolist()
        cols["speedup"] += [None if p is None else b / max(p, 1) for b, p in zip(base.tolist(), pred.tolist())]
        cols["pid"] += g.steps.column("pid").to_pylist()
        cols["saved_ns"] += [None if p is None else b - p for b, p in zip(base.tolist(), pred.tolist())]
        cols["replay_ns"] += raw.tolist()
        cols["gpu_floor_ns"] += floor.tolist()
        cols["host_wait_ns"] += waits.tolist()
        cols["bound"] += bound
        cols["note"] += note if isinstance(note, list) else [note] * n
        cols["run_ahead_ns"] += ahead_col
    queue = _queue.describe(_queue.launch_queue(g))
    lines = (unmatched_collectives(g) + ([queue] if queue else []) + comm_line + na_lines
             + [line for _, changes in parsed for line in _scenarios.describe(g, changes)])
    lines = list(dict.fromkeys(lines))  # a note repeated by several scenarios, once
    out = pa.table(cols, schema=RESULT_SCHEMA.with_metadata({NOTES_KEY: json.dumps(lines)}))
    if not include_warmup and "warmup" in g.steps.column_names:
        keep = np.tile(~g.steps.column("warmup").to_numpy(zero_copy_only=False).astype(bool), len(parsed))
        out = out.filter(pa.array(keep))
    return out


def _predict(g, changes, base, base_floor, work):
    """(predicted, replay, gpu floor, note) per step of one scenario: the replay raised to the GPU
    work the step launched and, for a scenario that only removes time, kept at or below the
    baseline; None predictions with an 'n/a: REASON' note where it cannot act on ``g``."""
    n = len(base)
    if all(c.kind == "baseline" for c in changes):
        return base, base, base_floor, [None] * n
    reason = _scenarios.unable(g, changes)
    if reason is not None:
        return np.array([None] * n, dtype=object), base, base_floor, f"n/a: {reason}"
    s = _replay.replay(g, *_scenarios.apply(g, changes))
    raw = step_times(g, s)
    floor = _floors.gpu_floor(g, s, work)
    removes = _scenarios.removes(changes)
    lo = np.minimum(floor, base) if removes else floor
    pred = np.maximum(raw, lo)
    if removes:
        pred = np.minimum(pred, base)
    comm = _floors.floor_comm_share(g, s, work) >= _floors.COMM_SHARE
    note = [("gpu floor (communication)" if p > r and c else "gpu floor" if p > r else "no gain" if p < r else None)
            for p, r, c in zip(pred.tolist(), raw.tolist(), comm.tolist())]
    return pred, raw, floor, note


def _bounds(measured, gpu, waits) -> list[str]:
    """What bounds each measured step (see UNITS['bound'])."""
    out = []
    for m, f, w in zip(measured.tolist(), gpu.tolist(), waits.tolist()):
        gpu_sat, host_sat = f >= 0.95 * m, w <= 0.05 * m
        out.append("balanced" if gpu_sat and host_sat else "gpu" if gpu_sat else "host" if host_sat else "serial")
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
    largest predicted_ns, of an n/a scenario the largest replay_ns; ``rank`` is that rank), with
    ``ranks`` (how many) and the largest baseline error of any rank (by magnitude, signed) as
    ``baseline_err_pct``; measured_ns and baseline_ns are the largest over the ranks, speedup =
    baseline_ns / predicted_ns and saved_ns = baseline_ns - predicted_ns (empty for n/a)."""
    groups: dict[tuple, list[dict]] = {}
    for r in result.to_pylist():
        groups.setdefault((r["scenario"], r["run_id"], r["step"]), []).append(r)
    rows = []
    for rs in groups.values():
        worst = max(rs, key=lambda r: (r["predicted_ns"] is not None, r["predicted_ns"] or 0, r["replay_ns"]))
        base = max(r["baseline_ns"] for r in rs)
        pred = worst["predicted_ns"]
        rows.append({**worst, "ranks": len(rs), "measured_ns": max(r["measured_ns"] for r in rs),
                     "baseline_ns": base, "speedup": None if pred is None else base / max(pred, 1),
                     "saved_ns": None if pred is None else base - pred,
                     "baseline_err_pct": max((r["baseline_err_pct"] for r in rs), key=abs)})
    schema = RESULT_SCHEMA.append(pa.field("ranks", pa.int64()))
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()
