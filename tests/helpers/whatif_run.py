"""The hand-computed what-if run (tests/test_whatif.py, test_whatif_scenarios.py,
test_whatif_floors.py, test_hostile_whatif.py), written once.

One thread (pid 1, tid 10): cudaLaunchKernel [100,110] and [120,130], cudaStreamSynchronize
[200,900]; stream 7 of GPU 0: K1 [115,515] (400 ns), K2 [520,870] (350 ns); the step range
ProfilerStep#0 [0,1000]. Baseline 1000 ns; the critical path is host 100, launch 15, K1 400,
stream gap 5, K2 350, the sync's return 30, host 100.
"""

from __future__ import annotations

import pyarrow as pa

I64 = pa.int64()


def tiny_tables(kernels: tuple[str, str] = ("gemm_k1", "elementwise_k2"),
                ranges: tuple[tuple[str, int, int], ...] = ()) -> dict:
    """The run's tables: ``kernels`` names K1 and K2; ``ranges`` adds (name, start_ns, end_ns)
    ranges of the same thread and domain after the step range (range_id 2, 3, ...)."""
    api = {"start_ns": pa.array([100, 120, 200], I64), "end_ns": pa.array([110, 130, 900], I64),
           "duration_ns": pa.array([10, 10, 700], I64), "pid": pa.array([1, 1, 1], I64),
           "tid": pa.array([10, 10, 10], I64), "correlation_id": pa.array([1, 2, 3], I64),
           "name": ["cudaLaunchKernel", "cudaLaunchKernel", "cudaStreamSynchronize"]}
    k = {"start_ns": pa.array([115, 520], I64), "end_ns": pa.array([515, 870], I64),
         "duration_ns": pa.array([400, 350], I64), "device_id": pa.array([0, 0], pa.int32()),
         "stream_id": pa.array([7, 7], I64), "correlation_id": pa.array([1, 2], I64),
         "pid": pa.array([1, 1], I64), "name": list(kernels)}
    spans = [("ProfilerStep#0", 0, 1000), *ranges]
    n = len(spans)
    nv = {"start_ns": pa.array([s for _, s, _ in spans], I64), "end_ns": pa.array([e for _, _, e in spans], I64),
          "duration_ns": pa.array([e - s for _, s, e in spans], I64), "range_id": pa.array(list(range(1, n + 1)), I64),
          "pid": pa.array([1] * n, I64), "tid": pa.array([10] * n, I64),
          "domain": ["pytorch.user_annotation"] * n, "name": [name for name, _, _ in spans]}
    return {"cuda_api": api, "kernels": k, "nvtx_ranges": nv}


def tiny_run(factory, kernels: tuple[str, str] = ("gemm_k1", "elementwise_k2"),
             ranges: tuple[tuple[str, int, int], ...] = ()):
    """The run folder, written through conftest's ``run_factory`` (arguments of :func:`tiny_tables`)."""
    return factory(tiny_tables(kernels, ranges))
