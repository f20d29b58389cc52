"""Cost of detected steps: step-based queries on a run whose steps are detected from the kernel
sequence, against the same run with tracekit `step N` ranges (the baseline, same kernels).

    python benchmarks/steps_detection.py [ITERATIONS ...]      # default 500 2500 (x 200 kernels)

A synthetic training loop: ITERATIONS iterations of 200 distinct kernels (1 us apart, 50 us idle
between iterations) on one GPU. Prints, per size, the seconds of `tk_steps()`, `gpu_utilization`
and `step_summary` with detection and with ranges, and their ratio (docs/benchmarks.md).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import make_run  # noqa: E402

from tracekit.query.engine import Engine  # noqa: E402

PER = 200


def build(root: Path, iterations: int) -> tuple[Path, Path]:
    n = iterations * PER
    idx = np.arange(n)
    start = idx * 1000 + (idx // PER) * 50_000
    k = pa.table({"pid": np.ones(n, np.int64), "device_id": np.zeros(n, np.int32),
                  "stream_id": np.full(n, 7, np.int32), "correlation_id": idx.astype(np.int64),
                  "name": np.array([f"kernel_{i}" for i in range(PER)])[idx % PER],
                  "start_ns": start.astype(np.int64), "end_ns": (start + 800).astype(np.int64),
                  "duration_ns": np.full(n, 800, np.int64)})
    s0 = np.arange(iterations) * (PER * 1000 + 50_000)
    s1 = s0 + PER * 1000
    nv = pa.table({"range_id": np.arange(iterations, dtype=np.int64), "pid": np.ones(iterations, np.int64),
                   "tid": np.ones(iterations, np.int64), "style": ["push/pop"] * iterations,
                   "domain": ["tracekit"] * iterations, "name": [f"step {i}" for i in range(iterations)],
                   "start_ns": s0.astype(np.int64), "end_ns": s1.astype(np.int64),
                   "duration_ns": (s1 - s0).astype(np.int64)})
    return (make_run(root / f"detected{iterations}", {"kernels": k}),
            make_run(root / f"ranges{iterations}", {"kernels": k, "nvtx_ranges": nv}))


def timed(run: Path) -> dict[str, float]:
    out = {}
    for what, call in (("tk_steps", lambda e: e.sql("SELECT count(*) FROM tk_steps()")),
                       ("gpu_utilization", lambda e: e.query("gpu_utilization")),
                       ("step_summary", lambda e: e.query("step_summary"))):
        with Engine([run]) as eng:
            t0 = time.perf_counter()
            call(eng)
            out[what] = time.perf_counter() - t0
    return out


def main(sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as d:
        for it in sizes:
            det, ranged = build(Path(d), it)
            a, b = timed(det), timed(ranged)
            for q in a:
                print(f"{it * PER:>9,} kernels  {q:<16} detected {a[q]:6.2f} s  ranges {b[q]:6.2f} s  "
                      f"ratio {a[q] / b[q]:4.1f}x")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [500, 2500])
