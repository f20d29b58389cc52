"""Per-step figures of a Kineto trace recounted from the raw JSON, independently of tracekit's
code (issue 34 item 5): the reference that tests/test_whatif_validation.py compares
step_summary, whatif's GPU floor and critical_path_summary with, and that
benchmarks/whatif_hta.py prints beside HTA's critical path.

A step is a CPU-side ``ProfilerStep#N`` user annotation [ts, ts + dur). GPU work is every
``kernel``, ``gpu_memcpy`` and ``gpu_memset`` event. Times are integer ns: ``baseTimeNanoseconds``
+ the event's microsecond value x 1000, read as a decimal (as the Kineto collector reads them).
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from decimal import Decimal
from pathlib import Path

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
STEP = re.compile(r"ProfilerStep#(\d+)$")


def _ns(v) -> int:
    return int(Decimal(str(v)) * 1000)


def load(path: Path) -> dict:
    opener = gzip.open if Path(path).read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal)


def _union(intervals) -> int:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def step_figures(path: Path) -> list[dict]:
    """One dict per ProfilerStep#N range of the trace, by step number:

    - ``wall_ns``: the range's length;
    - ``gpu_busy_ns``: time at least one GPU event of the step's process's devices ran, clipped
      to the range (the union over streams; all GPU events of the trace, whoever launched them);
    - ``gpu_busy_no_nccl_ns``: the same without kernels whose name starts with ``nccl``;
    - ``launched``: GPU events whose launch call (same correlation ID) starts in the range;
    - ``stream_work_ns``: per (device, stream), the summed durations of the launched events;
      ``busiest_stream_ns`` its maximum; ``busiest_stream_own_pid_ns`` the same over the events
      launched by the step annotation's own process (the Triton trace records its ProfilerStep
      under another pid than the launches);
    - ``queue_delay_ns_median``: the median of start - launch call end over the launched events
      (how long after its launch returned the work started: the host's run-ahead);
    - ``api_ns``: the summed durations of the runtime and driver calls that carry a correlation
      ID (launches, copies, syncs) and start in the range.
    """
    doc = load(path)
    base = int(doc.get("baseTimeNanoseconds", 0))
    x = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((base + _ns(e["ts"]), base + _ns(e["ts"]) + _ns(e.get("dur", 0)), int(STEP.match(e["name"])[1]),
                    e["pid"])
                   for e in x if e.get("cat") == "user_annotation" and STEP.match(e.get("name", "")))
    gpu = [(base + _ns(e["ts"]), base + _ns(e["ts"]) + _ns(e.get("dur", 0)), e)
           for e in x if e.get("cat") in GPU_CATS]
    calls = {}
    for e in x:
        if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {}):
            calls[e["args"]["correlation"]] = (base + _ns(e["ts"]), base + _ns(e["ts"]) + _ns(e.get("dur", 0)),
                                               e["pid"])
    out = []
    for s0, s1, n, pid in steps:
        clip = [(max(s, s0), min(t, s1)) for s, t, _ in gpu if s < s1 and t > s0]
        clip_nn = [(max(s, s0), min(t, s1)) for s, t, e in gpu if s < s1 and t > s0
                   and not (e["cat"] == "kernel" and e["name"].startswith("nccl"))]
        launched = [(s, t, e, calls[e["args"]["correlation"]]) for s, t, e in gpu
                    if e.get("args", {}).get("correlation") in calls
                    and s0 <= calls[e["args"]["correlation"]][0] < s1]
        per: dict = {}
        own: dict = {}
        for s, t, e, c in launched:
            key = (e["args"].get("device"), e["args"].get("stream"))
            per[key] = per.get(key, 0) + (t - s)
            if c[2] == pid:
                own[key] = own.get(key, 0) + (t - s)
        api = sum(c[1] - c[0] for c in calls.values() if s0 <= c[0] < s1)
        out.append({
            "step": n, "start_ns": s0, "wall_ns": s1 - s0, "gpu_busy_ns": _union(clip),
            "gpu_busy_no_nccl_ns": _union(clip_nn), "launched": len(launched),
            "stream_work_ns": per, "busiest_stream_ns": max(per.values(), default=0),
            "busiest_stream_own_pid_ns": max(own.values(), default=0),
            "queue_delay_ns_median": (statistics.median(s - c[1] for s, _, _, c in launched)
                                      if launched else None),
            "api_ns": api,
        })
    return out
