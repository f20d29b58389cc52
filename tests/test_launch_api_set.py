"""The launch-API set (tk_launch_kind in queries/_macros.sql) used by cpu_overhead, launch_latency
and launch_latency_by_name: CUDA runtime and driver launches, their Ex/ExC/cooperative and
per-thread-stream variants, graph launches, and the HIP launches of ROCm traces."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import FIXTURES

from tracekit.query.engine import Engine

ROCM = FIXTURES / "kineto" / "kineto_mi250_rocm.json.gz"


def q(run, name):
    with Engine([run]) as eng:
        return eng.query(name).to_pylist()


@pytest.mark.parametrize("name, kind", [
    ("cudaLaunchKernel_v7000", "kernel"), ("cudaLaunchKernel_ptsz_v7000", "kernel"),
    ("cudaLaunchKernelExC_v11060", "kernel"), ("cuLaunchKernelEx", "kernel"),
    ("cudaLaunchCooperativeKernel", "kernel"), ("cuLaunchGridAsync", "kernel"),
    ("hipLaunchKernel", "kernel"), ("hipExtLaunchKernel", "kernel"), ("hipModuleLaunchKernel", "kernel"),
    ("hipExtModuleLaunchKernel", "kernel"), ("hipLaunchKernel_spt", "kernel"),
    ("cudaGraphLaunch_v10000", "graph"), ("cuGraphLaunch", "graph"), ("hipGraphLaunch", "graph"),
    ("cudaLaunchHostFunc", None), ("cuLaunchHostFunc", None), ("hipLaunchHostFunc", None),
    ("cudaMemcpyAsync", None), ("hipMemcpyWithStream", None), ("hipDeviceSynchronize", None),
    ("cudaGraphInstantiate", None), ("hipGetDevicePropertiesR0600", None),
])
def test_launch_kind_macro(run_factory, name, kind):
    run = run_factory({"cuda_api": {"start_ns": [0], "end_ns": [1], "name": [name]}})
    with Engine([run]) as eng:
        [row] = eng.sql("SELECT tk_launch_kind(name) AS k FROM cuda_api").to_pylist()
    assert row["k"] == kind


def test_hip_launches_golden(run_factory):
    # one process, one thread: hipLaunchKernel [0,10) -> kernel a [12,20); hipExtModuleLaunchKernel
    # [30,35) -> kernel b [40,50); hipGraphLaunch [60,70) -> graph nodes c [72,80), d [80,90);
    # hipLaunchHostFunc [95,97) (a host callback, not a launch); hipMemcpyWithStream [100,110).
    run = run_factory({
        "kernels": {"start_ns": [12, 40, 72, 80], "end_ns": [20, 50, 80, 90], "pid": [1] * 4,
                    "device_id": [0] * 4, "stream_id": [0] * 4, "correlation_id": [1, 2, 3, 3],
                    "name": ["a", "b", "c", "d"]},
        "cuda_api": {"start_ns": [0, 30, 60, 95, 100], "end_ns": [10, 35, 70, 97, 110], "pid": [1] * 5,
                     "tid": [1] * 5, "correlation_id": [1, 2, 3, 4, 5],
                     "name": ["hipLaunchKernel", "hipExtModuleLaunchKernel", "hipGraphLaunch",
                              "hipLaunchHostFunc", "hipMemcpyWithStream"]},
    })
    # (the trace has no step ranges and no repeating kernel sequence: one detected step beside
    # the whole run; the run's row is checked)
    [o] = [r for r in q(run, "cpu_overhead") if r["scope"] == "run"]
    # 3 launch calls (the graph launch counts once); launch time 10 + 5 + 10 = 25;
    # API time 25 + 2 + 10 = 37; per launch (37 - 0 sync) / 3
    assert (o["launches"], o["launch_api_ns"], o["api_ns"]) == (3, 25, 37)
    assert o["host_ns_per_launch"] == pytest.approx(37 / 3)
    kinds = {r["name"]: (r["launch_kind"], r["launch_latency_ns"]) for r in q(run, "launch_latency")}
    assert kinds == {"a": ("kernel", 12), "b": ("kernel", 10), "c": ("graph", 12), "d": ("graph", 20)}
    by = {r["name"]: r["launch_kind"] for r in q(run, "launch_latency_by_name")}
    assert by == {"a": "kernel", "b": "kernel", "c": "graph", "d": "graph"}


@pytest.fixture(scope="module")
def rocm_run(kineto_run):
    return kineto_run(ROCM.name.removesuffix(".json.gz"))


def test_rocm_fixture_launches_counted(rocm_run):
    # independent count from the raw JSON: kernels whose correlation ID has a runtime event whose
    # name is a launch (contains "Launch", not a host-function launch)
    with gzip.open(ROCM, "rt") as f:
        events = json.load(f)["traceEvents"]
    launch_corr = {e["args"]["correlation"] for e in events
                   if e.get("cat") in ("cuda_runtime", "cuda_driver") and "Launch" in e["name"]
                   and "HostFunc" not in e["name"]}
    launch_names = {e["name"] for e in events if e.get("cat") == "cuda_runtime" and "Launch" in e["name"]}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    expected = sum(1 for k in kernels if k["args"]["correlation"] in launch_corr)
    assert launch_names == {"hipLaunchKernel", "hipExtModuleLaunchKernel"}
    assert expected == len(kernels) == 14

    [run_row] = [r for r in q(rocm_run, "cpu_overhead") if r["scope"] == "run"]
    assert run_row["launches"] == expected
    # launch time: the launch calls do not overlap, so it is their summed duration (us -> ns)
    launch_ns = sum(round(e["dur"] * 1000) for e in events
                    if e.get("cat") == "cuda_runtime" and e["name"] in launch_names)
    assert run_row["launch_api_ns"] == pytest.approx(launch_ns, abs=len(launch_corr))
    ll = q(rocm_run, "launch_latency")
    assert len(ll) == 14 and all(r["has_api"] and r["launch_kind"] == "kernel" for r in ll)
    assert sum(r["count"] for r in q(rocm_run, "launch_latency_by_name") if r["launch_kind"] == "kernel") == 14
