"""Small run folders written by hand (through conftest's run_factory)."""

from __future__ import annotations


def steps_run(factory, kernel_name="elementwise_kernel"):
    """Two ranks (pid 100 + r on GPU r), steps 0 (warm-up) to 3 of 1 ms each, with data, forward,
    backward, optimizer and a comm range per step, and one 400 us kernel per step."""
    nv = {k: [] for k in ("range_id", "pid", "tid", "style", "domain", "name", "start_ns", "end_ns", "duration_ns")}
    kern = {k: [] for k in ("pid", "device_id", "stream_id", "start_ns", "end_ns", "duration_ns", "name",
                            "correlation_id")}
    rid = 0
    for r in range(2):
        pid = 100 + r
        for s in range(4):
            t0 = s * 1_000_000
            for name, a, b in ((f"step {s}" + (" (warmup)" if s == 0 else ""), 0, 1_000_000), ("data", 0, 100_000),
                               ("forward", 100_000, 400_000), ("backward", 400_000, 900_000),
                               ("optimizer", 900_000, 1_000_000), ("comm allreduce", 600_000, 950_000)):
                rid += 1
                for k, v in zip(nv, (rid, pid, pid, "push/pop", "tracekit", name, t0 + a, t0 + b, b - a)):
                    nv[k].append(v)
            for k, v in zip(kern, (pid, r, 7, t0 + 200_000, t0 + 600_000, 400_000, kernel_name, s)):
                kern[k].append(v)
    manifest = {"workload": {"name": "toy", "world_size": 2, "samples_per_step": 64,
                             "ranks": [{"rank": r, "pid": 100 + r} for r in range(2)]}}
    return factory({"nvtx_ranges": nv, "kernels": kern}, manifest, name="steps")
