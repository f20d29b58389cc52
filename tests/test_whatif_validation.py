"""The exact part of issue 34 item 5 (docs/whatif.md "Validation"): on every shared Kineto GPU
trace with ProfilerStep ranges, each step's wall time, GPU busy time and busiest stream's work as
step_summary, whatif and critical_path_summary give them, against the same figures recounted from
the raw JSON (tests/helpers/kineto_steps.py, independent of tracekit's code); the floors of item 2
for every scenario of the registry. HTA's critical path and the other comparisons that need
peers are benchmarks/whatif_hta.py."""

from __future__ import annotations

import pytest
from conftest import SHARED
from helpers import nsys_steps
from helpers.kineto_steps import step_figures

from tracekit.query import Engine
from tracekit.whatif import whatif

TRACES = ["kineto_h100_timesformer_infer", "kineto_mi300_resnet_actckpt_train",
          "kineto_a100_nccl_2ranks_rank0", "kineto_a100_triton"]
# every scenario of the registry (tracekit/whatif/scenarios.py); host=2 for a factor above 1
SCENARIOS = ["baseline", "no-straggler", "comm=0.5", "launch=0", "kernels:.=0.5", "kernels:gemm=0.5",
             "host=0.5", "host=2"]
REMOVES = {"no-straggler", "comm=0.5", "launch=0", "kernels:.=0.5", "kernels:gemm=0.5", "host=0.5"}
GPU = {"kernel", "memcpy", "memset", "collective transfer"}


@pytest.fixture(scope="module", params=TRACES)
def measured(request, kineto_run):
    stem = request.param
    raw = {r["step"]: r for r in step_figures(SHARED / "fixtures" / "kineto" / f"{stem}.json.gz")}
    with Engine([kineto_run(stem)]) as e:
        steps = e.query("step_summary").to_pylist()
        path = e.query("critical_path_summary").to_pylist()
        rows = whatif(e, SCENARIOS).to_pylist()
    return stem, raw, steps, path, rows


def test_steps_match_the_raw_trace(measured):
    """Wall time and GPU busy time (union of the streams' kernels, copies and memsets, clipped to
    the step's host range) of every step: step_summary, whatif's measured and baseline, and the
    critical path's wall time equal the raw JSON's to the nanosecond."""
    stem, raw, steps, path, rows = measured
    assert sorted(raw) == sorted(r["step"] for r in steps), stem
    for s in steps:
        assert s["wall_ns"] == raw[s["step"]]["wall_ns"], (stem, s)
        assert s["gpu_busy_ns"] == raw[s["step"]]["gpu_busy_ns"], (stem, s)
    for r in path:
        assert r["wall_ns"] == raw[r["step"]]["wall_ns"], (stem, r)
    for r in rows:
        if r["scenario"] == "baseline":
            assert r["measured_ns"] == r["baseline_ns"] == raw[r["step"]]["wall_ns"], (stem, r)


def test_gpu_floor_is_the_busiest_streams_work(measured):
    """gpu_floor_ns of every scenario that leaves GPU durations alone is the raw sum of the work
    the step's process launched in the step on its busiest stream (launch call start inside the
    range). The Triton trace records ProfilerStep#1 under another pid than its one launch and
    kernel: the floor is 0 there while step_summary counts the kernel's 1.76 us as the step's
    GPU busy time (docs/whatif.md, "Against HTA")."""
    stem, raw, _, _, rows = measured
    for r in rows:
        if r["scenario"] in ("baseline", "launch=0", "host=0.5", "host=2") and r["predicted_ns"] is not None:
            assert r["gpu_floor_ns"] == raw[r["step"]]["busiest_stream_own_pid_ns"], (stem, r)
    if stem == "kineto_a100_triton":
        assert raw[1]["busiest_stream_own_pid_ns"] == 0 and raw[1]["busiest_stream_ns"] == 1760


def test_path_on_gpu_work_is_bounded_by_gpu_busy(measured):
    """The path's GPU-work segments lie inside the step's range and never overlap one another, so
    their sum cannot exceed the raw GPU busy time of the range; the segments add up to the wall."""
    stem, raw, _, path, _ = measured
    for n in {r["step"] for r in path}:
        mine = [r for r in path if r["step"] == n]
        assert sum(r["time_ns"] for r in mine) == raw[n]["wall_ns"], (stem, n)
        assert sum(r["time_ns"] for r in mine if r["category"] in GPU) <= raw[n]["gpu_busy_ns"], (stem, n)


def test_every_scenario_keeps_its_floors(measured):
    """Item 2's floors for every scenario of the registry: no prediction below the busiest
    stream's work of the scenario (or the baseline, where that is lower), no scenario that only
    removes time slower than the baseline, n/a only with its reason."""
    stem, _, _, _, rows = measured
    assert {r["scenario"] for r in rows} == set(SCENARIOS)
    for r in rows:
        if r["predicted_ns"] is None:
            assert r["note"].startswith("n/a: ") and r["speedup"] is None, (stem, r)
            continue
        assert r["predicted_ns"] >= min(r["gpu_floor_ns"], r["baseline_ns"]), (stem, r)
        if r["scenario"] in REMOVES:
            assert r["predicted_ns"] <= r["baseline_ns"], (stem, r)
        if r["scenario"] == "baseline":
            assert r["predicted_ns"] == r["measured_ns"], (stem, r)


def test_nsys_steps_match_the_raw_export(nsys_run):
    """The 2-GPU H100 nsys slice: its 48 detected steps' GPU busy time (per process and device,
    summed over devices) equals the CUPTI tables' recount; the critical path's GPU time stays
    within the time any GPU was busy in the step (the path of a step of process 111 runs on
    process 112's GPU in most steps: 69 of the 76 rows of critical_path_summary are rank 1); and the host runs 429 ms ahead of the GPU (kernels that start in the last steps'
    windows were launched a median 428.5-429.2 ms before; the first steps' were launched before
    the 1 s slice began)."""
    stem = "nsys2026_h100_2gpu_pytorch_slice"
    with Engine([nsys_run(stem)]) as e:
        steps = e.query("step_summary").to_pylist()
        path = e.query("critical_path_summary").to_pylist()
    raw = nsys_steps.step_figures(SHARED / "fixtures" / "nsys" / f"{stem}.sqlite",
                                  [(r["start_ns"], r["start_ns"] + r["wall_ns"], r["pid"]) for r in steps])
    assert len(steps) == 48
    assert [a["gpu_busy_ns"] for a in raw] == [r["gpu_busy_ns"] for r in steps]
    by_step = {r["step"]: a["gpu_busy_any_ns"] for r, a in zip(steps, raw)}
    for n, busy in by_step.items():
        mine = [r for r in path if r["step"] == n]
        assert sum(r["time_ns"] for r in mine if r["category"] in GPU) <= busy
    q = [a["queue_delay_ns_median"] for a in raw if a["queue_delay_ns_median"] is not None]
    assert len(q) == 20 and all(428_000_000 < v < 430_000_000 for v in q)
