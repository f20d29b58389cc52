"""Clock model of a multi-host job, estimated from its collectives (the ``clock_model`` table).

Ranks on different hosts record timestamps on different clocks: NTP keeps hosts within about
0.1-10 ms, and their rates differ by tens of ppm, more than the arrival skews that
``collective_skew`` and ``stragglers`` measure. :func:`estimate` finds, for each clock (a host;
a rank where the host is unknown), the correction that maps it onto the clock of rank 0::

    local = true + offset_ns + drift_ppm * 1e-6 * (true - t0_ns)
    true  ~ local - offset_ns - drift_ppm * 1e-6 * (local - t0_ns)

from the NCCL kernels themselves, using two facts about a collective instance (the same
(process group, type, seq) on every member):

1. **Ends together.** A ring or tree collective's kernel ends on all ranks within a small window
   (the last chunk's hops: about a microsecond to a few), whatever the ranks' arrival times: the
   kernel of an early rank waits inside for the last one. So on each clock, the instance's end
   minus its end on the reference clock is ``offset + drift * (t - t0)`` plus that small window.
   A straight line is fitted to those differences per clock (least squares, then again without
   the points beyond 5 robust standard deviations: misaligned instances), over every instance the
   clock shares with an already solved clock (rank 0's first, then the clocks solved from it).
2. **Causality.** A collective cannot end on any rank before the last rank has started it. With
   the fitted drift, every instance gives ``offset >= start_here - end_there`` and ``offset <=
   end_here - start_there``: an interval [lower, upper] the truth lies in whatever the end
   window is. The fitted offset must lie in it; when it does not (the ends are not aligned:
   e.g. only one-sided collectives), the interval's midpoint is used, with half its width as
   the bound (``method = 'causality'``).

``bound_ns`` is the half-width of the interval around ``offset_ns`` that holds the truth: for a
fit, the largest residual of the kept points plus three standard errors of the fitted line
(at least :data:`MIN_BOUND_NS`, the timestamp resolution of CUPTI's GPU-to-CPU clock
conversion), never more than the causality interval allows; a clock solved through another adds
that clock's bound. Ranks on one clock share one row's values (offset 0 between them by
construction).

Where it breaks: a clock with no collective shared with a solved clock (no NCCL kernels, a
process group without rank 0's host in any chain) is not estimated (``method = 'unestimated'``,
offset 0, bound null: its cross-rank results carry no bound); a single instance gives an offset
without drift; collectives whose ends are not aligned (a one-sided Broadcast tree with a large
message) widen the bound; a drift that is not constant over the trace (an NTP step) shows as
large residuals and a wide bound.

Cost: one pass over the matched calls (numpy), linear in the number of NCCL kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tracekit import schema

MIN_BOUND_NS = 1000
"""Smallest bound reported for an estimated clock: 1 us, the resolution to which CUPTI's GPU
timestamps are put on the host clock, and the end window of small collectives."""

OUTLIER_SIGMAS = 5.0

METHODS = ("reference", "collective_ends", "causality", "offset_only", "none", "unestimated")
"""Values of clock_model.method: 'reference' (rank 0's clock), 'collective_ends' (line fitted to
the instances' end times, inside the causality interval), 'offset_only' (fewer than two
instances, or less than 1 ms between them: no drift), 'causality' (the fit fell outside the
interval: its midpoint), 'none' (the user said the clocks are synchronized:
``--clock-model none``), 'unestimated' (no collective shared with a solved clock)."""


@dataclass
class Calls:
    """Matched communication calls: one entry per (rank, instance); arrays of equal length.
    ``instance``: an integer key of the collective instance (the same on every member)."""

    rank: np.ndarray
    instance: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray


@dataclass
class _Fit:
    offset: float
    drift: float  # ns per ns
    bound: float | None
    method: str
    constraints: int


def clock_ids(ranks: list[int], hosts: dict[int, str | None]) -> dict[int, str]:
    """Clock of each rank: its host name where known, else ``rank N`` (its own clock)."""
    return {r: (f"host {hosts[r]}" if hosts.get(r) else f"rank {r}") for r in ranks}


def estimate(calls: Calls, ranks: list[int], hosts: dict[int, str | None], *,
             t0_ns: int) -> pa.Table:
    """The clock_model rows for ``ranks`` (see the module docstring). ``hosts``: rank -> host
    name or None; ``t0_ns``: the reference time of the drift term (the job's first timestamp)."""
    clock = clock_ids(ranks, hosts)
    ref_rank = min(ranks)
    ref = clock[ref_rank]
    groups = sorted(set(clock.values()))
    cidx = {c: i for i, c in enumerate(groups)}
    gid = np.array([cidx[clock.get(int(r), f"rank {int(r)}")] for r in calls.rank], dtype=np.int64)
    # per (clock, instance): median end, earliest end, latest start (ranks of one clock agree)
    inst_keys, inst = np.unique(calls.instance, return_inverse=True)
    per: dict[int, dict[int, tuple[float, float, float, float]]] = {}
    order = np.lexsort((inst, gid))
    g_sorted, i_sorted = gid[order], inst[order]
    bounds = np.flatnonzero(np.diff(g_sorted * len(inst_keys) + i_sorted)) + 1
    for chunk in np.split(order, bounds) if len(order) else []:
        g, k = int(gid[chunk[0]]), int(inst[chunk[0]])
        # relative to t0: epoch ns as doubles would round to 256 ns
        e = (calls.end_ns[chunk] - t0_ns).astype(np.float64)
        s = (calls.start_ns[chunk] - t0_ns).astype(np.float64)
        per.setdefault(g, {})[k] = (float(np.median(e)), float(e.min()), float(s.max()), float(s.min()))
    fits: dict[int, _Fit] = {cidx[ref]: _Fit(0.0, 0.0, 0.0, "reference", len(per.get(cidx[ref], {})))}
    while True:  # in layers: against rank 0's clock first, then against the clocks solved from it
        ref = _reference(per, fits, 0)
        layer = {}
        for g in range(len(groups)):
            if g not in fits and g in per:
                fit = _solve(per[g], ref, 0)
                if fit is not None:
                    layer[g] = fit
        if not layer:
            break
        fits.update(layer)
    rows = {k: [] for k in ("rank", "host", "clock_id", "offset_ns", "drift_ppm", "t0_ns", "bound_ns",
                            "method", "constraints")}
    for r in sorted(ranks):
        f = fits.get(cidx[clock[r]], _Fit(0.0, 0.0, None, "unestimated", 0))
        rows["rank"].append(r)
        rows["host"].append(hosts.get(r))
        rows["clock_id"].append(clock[r])
        rows["offset_ns"].append(round(f.offset))
        rows["drift_ppm"].append(f.drift * 1e6)
        rows["t0_ns"].append(int(t0_ns))
        rows["bound_ns"].append(None if f.bound is None else int(np.ceil(f.bound)))
        rows["method"].append(f.method)
        rows["constraints"].append(f.constraints)
    return rows_table(rows)


def _reference(per, fits: dict[int, _Fit], t0: int) -> dict[int, tuple[float, float, float, float]]:
    """Per instance, over the solved clocks (corrected): median end, earliest end, latest start,
    largest bound. One pass over the solved clocks' instances."""
    acc: dict[int, list] = {}
    for h, f in fits.items():
        for k, (end_med, end_min, start_max, _) in per.get(h, {}).items():
            a = acc.setdefault(k, [[], [], [], []])
            a[0].append(_correct(end_med, f, t0))
            a[1].append(_correct(end_min, f, t0))
            a[2].append(_correct(start_max, f, t0))
            a[3].append(f.bound or 0.0)
    return {k: (float(np.median(a[0])), min(a[1]), max(a[2]), max(a[3])) for k, a in acc.items()}


def _solve(mine, ref, t0: int) -> _Fit | None:
    """Fit one clock (its instances ``mine``) against the solved clocks' ``ref`` values on the
    instances they share."""
    xs, ys, s_here, e_here, e_there, s_there, ref_bound = [], [], [], [], [], [], []
    for k, (end_med, end_min, start_max, _start_min) in mine.items():
        r = ref.get(k)
        if r is None:
            continue
        ref_end = r[0]
        xs.append(ref_end - t0)
        ys.append(end_med - ref_end)
        s_here.append(start_max)
        e_here.append(end_min)
        e_there.append(r[1])
        s_there.append(r[2])
        ref_bound.append(r[3])
    n = len(xs)
    if n == 0:
        return None
    x, y = np.array(xs), np.array(ys)
    keep = np.ones(n, dtype=bool)
    use_drift = n >= 2 and np.ptp(x) >= 1e6
    for _ in range(3):
        a, b, resid, se = _line(x[keep], y[keep], use_drift)
        full = y - (a + b * x)
        scale = 1.4826 * np.median(np.abs(full[keep] - np.median(full[keep]))) if keep.sum() > 2 else 0.0
        new = np.abs(full) <= max(OUTLIER_SIGMAS * scale, MIN_BOUND_NS)
        if new.sum() < max(1, n // 2) or (new == keep).all():
            break
        keep = new
    a, b, resid, se = _line(x[keep], y[keep], use_drift)
    base_bound = float(max(ref_bound)) if ref_bound else 0.0
    fit_bound = max(float(np.max(np.abs(resid))) + 3 * se, MIN_BOUND_NS) + base_bound
    # causality interval of the offset at t0, with the fitted drift
    xh = np.array(s_here) - t0
    lower = float(np.max(np.array(s_here) - b * xh - np.array(e_there)))
    upper = float(np.min(np.array(e_here) - b * (np.array(e_here) - t0) - np.array(s_there)))
    method = "collective_ends" if use_drift else "offset_only"
    if lower - base_bound <= a <= upper + base_bound:
        bound = min(fit_bound, max(a - lower, upper - a) + base_bound)
        return _Fit(a, b, max(bound, MIN_BOUND_NS), method, int(keep.sum()))
    if lower <= upper:
        mid = (lower + upper) / 2
        return _Fit(mid, b, (upper - lower) / 2 + base_bound + MIN_BOUND_NS, "causality", n)
    return _Fit(a, b, fit_bound + (lower - upper), method, int(keep.sum()))  # inconsistent pairing


def _line(x: np.ndarray, y: np.ndarray, drift: bool) -> tuple[float, float, np.ndarray, float]:
    """Least-squares y = a + b x (b = 0 without drift): a, b, residuals, standard error of the
    fitted line at its farthest point."""
    if not drift or len(x) < 2:
        a = float(np.mean(y))
        r = y - a
        se = float(np.std(r) / np.sqrt(len(y))) if len(y) > 1 else 0.0
        return a, 0.0, r, se
    xm = float(np.mean(x))
    dx = x - xm
    sxx = float(np.dot(dx, dx))
    b = float(np.dot(dx, y - np.mean(y)) / sxx)
    a = float(np.mean(y) - b * xm)
    r = y - (a + b * x)
    dof = max(len(x) - 2, 1)
    s2 = float(np.dot(r, r)) / dof
    se = float(np.sqrt(s2 * (1 / len(x) + np.max(dx * dx) / sxx)))
    return a, b, r, se


def _correct(local: float, f: _Fit, t0: int) -> float:
    return local - f.offset - f.drift * (local - t0)


def identity(ranks: list[int], hosts: dict[int, str | None], *, t0_ns: int) -> pa.Table:
    """clock_model rows for ``--clock-model none``: every clock taken as exact (bound 0)."""
    clock = clock_ids(ranks, hosts)
    rs = sorted(ranks)
    return rows_table({"rank": rs, "host": [hosts.get(r) for r in rs], "clock_id": [clock[r] for r in rs],
                       "offset_ns": [0] * len(rs), "drift_ppm": [0.0] * len(rs), "t0_ns": [int(t0_ns)] * len(rs),
                       "bound_ns": [0] * len(rs), "method": ["none"] * len(rs), "constraints": [0] * len(rs)})


def rows_table(rows: dict[str, list]) -> pa.Table:
    """``rows`` (column -> values) as a clock_model table of the schema's types."""
    return schema.table("clock_model").conform(pa.table(rows))


CALLS_SQL = """
SELECT rank, dense_rank() OVER (ORDER BY process_group NULLS FIRST, collective, seq) AS instance,
       start_ns, end_ns
FROM tk_comm_calls_raw() WHERE backend = 'nccl' AND kind = 'collective' AND rank IS NOT NULL
"""


def model_for_job(run_path, manifest: dict, mode: str = "estimate") -> pa.Table:
    """The clock_model table of a job being written at ``run_path`` (its tables in place and
    ``manifest`` with ``ranks``): estimated from its NCCL kernels (``mode`` 'estimate') or the
    identity ('none'). Reads the tables through the query engine (the instances of
    ``tk_comm_calls_raw``, queries/ranks/_macros.sql); ``run_path`` must hold ``manifest.json``."""
    from tracekit.query import Session

    ranks = [e["rank"] for e in manifest.get("ranks") or []]
    hosts = {e["rank"]: e.get("host") for e in manifest.get("ranks") or []}
    with Session([run_path], threads=2) as eng:
        t = eng.sql(CALLS_SQL)
    rank = t.column("rank").to_numpy(zero_copy_only=False).astype(np.int64)
    start = t.column("start_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    ref = rank == min(ranks) if ranks else rank == 0
    t0 = int(start[ref].min()) if ref.any() else (int(start.min()) if len(start) else 0)
    if mode == "none":
        return identity(ranks, hosts, t0_ns=t0)
    calls = Calls(rank, t.column("instance").to_numpy(zero_copy_only=False).astype(np.int64), start,
                  t.column("end_ns").to_numpy(zero_copy_only=False).astype(np.int64))
    return estimate(calls, ranks, hosts, t0_ns=t0)


__all__ = ["METHODS", "MIN_BOUND_NS", "Calls", "clock_ids", "estimate", "identity", "model_for_job"]
