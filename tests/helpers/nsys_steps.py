"""Per-step GPU figures of an nsys SQLite export recounted from its CUPTI tables, independently of
tracekit's code (issue 34 item 5; benchmarks/whatif_hta.py prints them beside the critical path).

The steps' windows are given (tracekit detects the steps of these exports from the kernel
sequence; the recount checks what happens inside each window, not where it is). GPU work is
every row of CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY and _MEMSET; a process is ``globalPid >> 24``
(nsys packs the pid into bits 24-47 of globalPid and globalTid).
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_left, bisect_right
from itertools import accumulate
from pathlib import Path

GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def _pid(g: int) -> int:
    return (g >> 24) & 0xFFFFFF


def _merge(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


class _Busy:
    """Disjoint busy intervals with prefix sums: busy time inside any window in O(log n)."""

    def __init__(self, intervals):
        m = _merge(intervals)
        self.s = [a for a, _ in m]
        self.e = [b for _, b in m]
        self.cum = [0, *accumulate(b - a for a, b in m)]

    def within(self, w0: int, w1: int) -> int:
        i, j = bisect_right(self.e, w0), bisect_left(self.s, w1)
        if i >= j:
            return 0
        total = self.cum[j] - self.cum[i]
        total -= max(0, w0 - self.s[i])
        total -= max(0, self.e[j - 1] - w1)
        return total


def step_figures(path: Path, windows: list[tuple[int, int, int]]) -> list[dict]:
    """For each window (start_ns, end_ns, pid): ``gpu_busy_ns`` (time at least one GPU row of the
    process ran, per device, summed over devices, clipped to the window), ``gpu_busy_any_ns``
    (time at least one GPU row of any process on any device ran in the window) and
    ``queue_delay_ns_median`` (the median of kernel start - launch call end over the kernels of
    the process that start in the window and have a launch call, same process and
    correlationId; None without). By kernel start, not launch: these exports' steps are windows
    of GPU work detected in the kernel sequence."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    work: dict = {}
    for t in GPU_TABLES:
        if t in have:
            for s, e, dev, g in con.execute(f"SELECT start, end, deviceId, globalPid FROM {t}"):
                work.setdefault((_pid(g), dev), []).append((s, e))
    busy = {k: _Busy(v) for k, v in work.items()}
    anyb = _Busy([iv for v in work.values() for iv in v])
    launches = []
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in have and "CUPTI_ACTIVITY_KIND_KERNEL" in have:
        calls = {}
        for s, e, g, c in con.execute("SELECT start, end, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
            calls[(_pid(g), c)] = (s, e)
        for ks, g, c in con.execute("SELECT start, globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL"):
            call = calls.get((_pid(g), c))
            if call:
                launches.append((ks, _pid(g), ks - call[1]))
    con.close()
    launches.sort()
    starts = [c for c, _, _ in launches]
    out = []
    for w0, w1, pid in windows:
        b = sum(v.within(w0, w1) for (p, _), v in busy.items() if p == pid)
        q = sorted(d for _, p, d in launches[bisect_left(starts, w0):bisect_left(starts, w1)] if p == pid)
        out.append({"gpu_busy_ns": b, "gpu_busy_any_ns": anyb.within(w0, w1), "queue_delay_ns_median": (q[(len(q) - 1) // 2] + q[len(q) // 2]) / 2 if q else None})
    return out
