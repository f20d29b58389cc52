"""Cost of the query filters (--step, --window, --nvtx): a named query on a filtered engine
against the same query unfiltered on the same run (the baseline), as ratios.

    python benchmarks/filters.py [ITERATIONS ...]      # default 500 2500 (x 200 kernels)

A synthetic training loop as benchmarks/steps_detection.py builds it: ITERATIONS `step N` ranges
of 200 kernels each, every kernel launched by a cudaLaunchKernel inside an operator range
(`aten::op_K`, one per kernel) on the step's thread. Prints seconds and ratios for
kernel_summary and nvtx_summary with --step 3-5, --window 10ms:50ms and --nvtx 'op_1[0-9]$'
(docs/benchmarks.md, "Filters").
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
from tracekit.query.filters import Filters  # noqa: E402

PER = 200


def build(root: Path, iterations: int) -> Path:
    n = iterations * PER
    idx = np.arange(n)
    start = idx * 1000 + (idx // PER) * 50_000
    ones = np.ones(n, np.int64)
    k = pa.table({"pid": ones, "device_id": np.zeros(n, np.int32), "stream_id": np.full(n, 7, np.int32),
                  "correlation_id": idx.astype(np.int64),
                  "name": np.array([f"kernel_{i}" for i in range(PER)])[idx % PER],
                  "start_ns": (start + 500).astype(np.int64), "end_ns": (start + 1300).astype(np.int64),
                  "duration_ns": np.full(n, 800, np.int64)})
    api = pa.table({"pid": ones, "tid": ones, "correlation_id": idx.astype(np.int64),
                    "name": ["cudaLaunchKernel"] * n, "start_ns": (start + 100).astype(np.int64),
                    "end_ns": (start + 300).astype(np.int64), "duration_ns": np.full(n, 200, np.int64)})
    s0 = np.arange(iterations) * (PER * 1000 + 50_000)
    s1 = s0 + PER * 1000
    names = [f"step {i}" for i in range(iterations)] + [f"aten::op_{i % PER}" for i in range(n)]
    st = np.concatenate([s0, start]).astype(np.int64)
    en = np.concatenate([s1, start + 400]).astype(np.int64)
    m = iterations + n
    nv = pa.table({"range_id": np.arange(m, dtype=np.int64), "pid": np.ones(m, np.int64),
                   "tid": np.ones(m, np.int64), "style": ["push/pop"] * m,
                   "domain": ["tracekit"] * iterations + ["pytorch.cpu_op"] * n, "name": names,
                   "start_ns": st, "end_ns": en, "duration_ns": en - st})
    return make_run(root / f"loop{iterations}", {"kernels": k, "cuda_api": api, "nvtx_ranges": nv})


def timed(run: Path, query: str, filters: Filters | None) -> float:
    t0 = time.perf_counter()
    with Engine([run], filters=filters) as eng:
        eng.query(query)
    return time.perf_counter() - t0


def main(sizes: list[int]) -> None:
    cases = {"step 3-5": Filters.parse(step="3-5"), "window 10ms:50ms": Filters.parse(window="10ms:50ms"),
             "nvtx op_1x": Filters.parse(nvtx="op_1[0-9]$")}
    with tempfile.TemporaryDirectory() as tmp:
        for it in sizes:
            run = build(Path(tmp), it)
            for query in ("kernel_summary", "nvtx_summary"):
                base = min(timed(run, query, None) for _ in range(2))
                parts = [f"{it * PER:>8} kernels  {query:<15} unfiltered {base:6.2f} s"]
                for name, f in cases.items():
                    t = min(timed(run, query, f) for _ in range(2))
                    parts.append(f"{name} {t:6.2f} s ({t / base:4.1f}x)")
                print("; ".join(parts), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [500, 2500])
