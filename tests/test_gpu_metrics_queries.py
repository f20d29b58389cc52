"""Golden tests of the GPU, CPU and communication metrics queries (issue 6).

One small run folder per failure class that existing tools get wrong, built here with hand-written
rows; every expected value is worked out by hand in the comments next to it. All times in ns.
"""

from __future__ import annotations

import pytest

from tracekit.query.engine import Engine


def q(run, name, params=None, where=None):
    runs = run if isinstance(run, list) else [run]
    with Engine(runs) as eng:
        rows = eng.query(name, params).to_pylist()
    if where:
        rows = [r for r in rows if all(r[k] == v for k, v in where.items())]
    return rows


def kernels(rows):
    """rows: (start, end, pid, device, stream, correlation, name) tuples -> column dict."""
    cols = ("start_ns", "end_ns", "pid", "device_id", "stream_id", "correlation_id", "name")
    out = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
    out["duration_ns"] = [r[1] - r[0] for r in rows]
    return out


def api(rows):
    """rows: (start, end, pid, tid, correlation, name) tuples -> cuda_api column dict."""
    cols = ("start_ns", "end_ns", "pid", "tid", "correlation_id", "name")
    out = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
    out["duration_ns"] = [r[1] - r[0] for r in rows]
    return out


def steps(rows, pid=1):
    """rows: (range_id, name, start, end) -> nvtx_ranges in domain tracekit."""
    return {"range_id": [r[0] for r in rows], "name": [r[1] for r in rows],
            "start_ns": [r[2] for r in rows], "end_ns": [r[3] for r in rows],
            "domain": ["tracekit"] * len(rows), "pid": [pid] * len(rows), "tid": [pid] * len(rows),
            "style": ["push/pop"] * len(rows)}


# -- failure class: overlapping streams must not push utilization above 100% -------------------

def test_overlapping_streams_never_above_100_percent(run_factory):
    # three streams each run [0,100), then stream 1 runs [150,200):
    #   naive sum of kernel time = 3*100 + 50 = 350 > wall 200 (175%)
    #   union = [0,100) + [150,200) = 150 -> utilization 150/200 = 0.75, idle 50
    run = run_factory({"kernels": kernels([
        (0, 100, 1, 0, 1, 1, "a"), (0, 100, 1, 0, 2, 2, "b"), (0, 100, 1, 0, 3, 3, "c"),
        (150, 200, 1, 0, 1, 4, "d")])})
    [row] = q(run, "gpu_utilization", where={"scope": "run"})
    assert (row["wall_ns"], row["kernel_busy_ns"], row["busy_ns"], row["idle_ns"]) == (200, 150, 150, 50)
    assert row["utilization"] == 0.75 and row["copy_busy_ns"] == 0 and row["overlap_ns"] == 0


# -- failure class: the same stream number on two GPUs (or in two processes) is two streams ------

def test_same_stream_number_on_two_gpus_is_not_merged(run_factory):
    # stream 7 on device 0: [0,10) and [90,100); stream 7 on device 1: [10,90).
    # Merged by stream number the "GPU" would look 100% busy. Per device:
    #   dev 0: wall 100, busy 10+10 = 20, idle 80 (one gap [10,90))
    #   dev 1: wall 80 ([10,90)), busy 80, idle 0
    # Process 2 also numbers its GPU 0 and uses stream 7: [40,60) -> its own row, wall 20, busy 20.
    run = run_factory({"kernels": kernels([
        (0, 10, 1, 0, 7, 1, "k"), (90, 100, 1, 0, 7, 2, "k"), (10, 90, 1, 1, 7, 3, "k"),
        (40, 60, 2, 0, 7, 1, "k")])})
    rows = {(r["pid"], r["device_id"]): r for r in q(run, "gpu_utilization", where={"scope": "run"})}
    assert set(rows) == {(1, 0), (1, 1), (2, 0)}
    assert (rows[1, 0]["wall_ns"], rows[1, 0]["busy_ns"], rows[1, 0]["idle_ns"]) == (100, 20, 80)
    assert rows[1, 0]["utilization"] == 0.2
    assert (rows[1, 1]["wall_ns"], rows[1, 1]["busy_ns"], rows[1, 1]["idle_ns"]) == (80, 80, 0)
    assert (rows[2, 0]["wall_ns"], rows[2, 0]["busy_ns"]) == (20, 20)
    idle = {(r["pid"], r["device_id"]): r for r in q(run, "gpu_idle", where={"scope": "run"})}
    assert (idle[1, 0]["gaps"], idle[1, 0]["idle_ns"]) == (1, 80)
    assert (idle[1, 1]["gaps"], idle[1, 1]["idle_ns"]) == (0, 0)


def test_two_runs_with_the_same_ids_stay_apart(run_factory):
    # the same pid/device/stream in two run folders: one row each, never merged
    a = run_factory({"kernels": kernels([(0, 10, 1, 0, 7, 1, "k")])}, name="a")
    b = run_factory({"kernels": kernels([(100, 150, 1, 0, 7, 1, "k")])}, name="b")
    rows = {r["run_id"]: r for r in q([a, b], "gpu_utilization", where={"scope": "run"})}
    assert (rows["a"]["wall_ns"], rows["a"]["busy_ns"]) == (10, 10)
    assert (rows["b"]["wall_ns"], rows["b"]["busy_ns"]) == (50, 50)


# -- failure class: idle is per device, not per stream -------------------------------------------

def test_idle_is_per_device_not_per_stream(run_factory):
    # stream 1: [0,100), [200,300); stream 2: [100,200), [350,400).
    # Each stream alone has gaps (stream 1: [100,200) = 100; stream 2: [0,100)+[200,350) = 250),
    # but the device only idles in [300,350): wall 400, busy 350, idle 50, one gap.
    run = run_factory({"kernels": kernels([
        (0, 100, 1, 0, 1, 1, "k"), (200, 300, 1, 0, 1, 2, "k"),
        (100, 200, 1, 0, 2, 3, "k"), (350, 400, 1, 0, 2, 4, "k")])})
    [u] = q(run, "gpu_utilization", where={"scope": "run"})
    assert (u["wall_ns"], u["busy_ns"], u["idle_ns"]) == (400, 350, 50)
    [i] = q(run, "gpu_idle", where={"scope": "run"})
    assert (i["gaps"], i["idle_ns"]) == (1, 50)
    # no API rows: the gap cannot be blamed on the host -> other
    assert (i["idle_host_ns"], i["idle_sync_ns"], i["idle_copy_ns"], i["idle_other_ns"]) == (0, 0, 0, 50)


# -- failure class: copies are busy time, not idle -----------------------------------------------

def test_copies_are_not_idle(run_factory):
    # kernels [0,100), [200,300), [350,400); memcpy [100,180) and [250,260); memset [180,200)
    #   kernel_busy = 100 + 100 + 50 = 250
    #   copy_busy   = 80 + 10 + 20 = 110
    #   busy (union of all) = [0,300) + [350,400) = 350; overlap = 250 + 110 - 350 = 10
    #   wall 400 -> idle 50, utilization 250/400 = 0.625, busy_fraction 350/400 = 0.875
    # The gap [300,350) ends with kernel corr 5, launched by a call [320,330) that had not started
    # when the GPU went idle at 300 -> host.
    run = run_factory({
        "kernels": kernels([(0, 100, 1, 0, 1, 1, "k"), (200, 300, 1, 0, 1, 2, "k"),
                            (350, 400, 1, 0, 1, 5, "k")]),
        "memcpy": {"start_ns": [100, 250], "end_ns": [180, 260], "pid": [1, 1], "device_id": [0, 0],
                   "stream_id": [2, 2], "correlation_id": [3, 6], "bytes": [800, 100],
                   "kind": ["HtoD", "DtoH"], "src_kind": ["Pinned", "Device"],
                   "dst_kind": ["Device", "Pinned"]},
        "memset": {"start_ns": [180], "end_ns": [200], "pid": [1], "device_id": [0], "stream_id": [2],
                   "correlation_id": [4], "bytes": [64]},
        "cuda_api": api([(320, 330, 1, 1, 5, "cudaLaunchKernel")]),
    })
    [u] = q(run, "gpu_utilization", where={"scope": "run"})
    assert (u["wall_ns"], u["kernel_busy_ns"], u["copy_busy_ns"], u["busy_ns"], u["overlap_ns"],
            u["idle_ns"]) == (400, 250, 110, 350, 10, 50)
    assert u["utilization"] == 0.625 and u["busy_fraction"] == 0.875
    [i] = q(run, "gpu_idle", where={"scope": "run"})
    assert (i["gaps"], i["idle_ns"], i["idle_host_ns"]) == (1, 50, 50)
    assert i["host_fraction"] == 50 / 400


# -- gpu_idle causes, per step, and cpu_overhead -------------------------------------------------

@pytest.fixture
def four_causes(run_factory):
    # one GPU, kernels k1..k5 (correlation 1..5) at [0,100), [200,300), [400,500), [600,700), [800,900):
    # four gaps of 100 ns, one per cause (the GPU goes idle at the gap's start):
    #   [100,200) host : k2's launch call [150,160) had not been issued at 100
    #   [300,400) sync : host in cudaStreamSynchronize [250,310), covering 300; k3 launched [350,360)
    #   [500,600) copy : host in cudaMemcpy [450,520), covering 500; k4 launched [550,560)
    #   [700,800) other: k5 was launched long before, by the call [10,20)
    # steps: step 0 = [0,450), step 1 = [450,900) on the same process
    return run_factory({
        "kernels": kernels([(s, s + 100, 1, 0, 1, c, "k") for c, s in
                            ((1, 0), (2, 200), (3, 400), (4, 600), (5, 800))]),
        "cuda_api": api([(0, 5, 1, 1, 1, "cudaLaunchKernel"), (10, 20, 1, 1, 5, "cudaLaunchKernel"),
                         (150, 160, 1, 1, 2, "cudaLaunchKernel"),
                         (250, 310, 1, 1, 90, "cudaStreamSynchronize"),
                         (350, 360, 1, 1, 3, "cudaLaunchKernel"), (450, 520, 1, 1, 91, "cudaMemcpy"),
                         (550, 560, 1, 1, 4, "cudaLaunchKernel")]),
        "nvtx_ranges": steps([(11, "step 0", 0, 450), (12, "step 1", 450, 900)]),
    })


def test_gpu_idle_causes_and_step_totals(four_causes):
    rows = {(r["scope"], r["step"]): r for r in q(four_causes, "gpu_idle")}
    run = rows["run", None]
    # wall 900, busy 500 -> idle 400 = 100 per cause
    assert (run["wall_ns"], run["gaps"], run["idle_ns"]) == (900, 4, 400)
    assert (run["idle_host_ns"], run["idle_sync_ns"], run["idle_copy_ns"], run["idle_other_ns"]) == (100,) * 4
    # step 0 [0,450): busy [0,100)+[200,300)+[400,450) = 250, idle 200 = host 100 + sync 100
    s0 = rows["step", "step 0"]
    assert (s0["wall_ns"], s0["idle_ns"], s0["gaps"], s0["step_number"]) == (450, 200, 2, 0)
    assert (s0["idle_host_ns"], s0["idle_sync_ns"], s0["idle_copy_ns"], s0["idle_other_ns"]) == (100, 100, 0, 0)
    # step 1 [450,900): busy [450,500)+[600,700)+[800,900) = 250, idle 200 = copy 100 + other 100
    s1 = rows["step", "step 1"]
    assert (s1["wall_ns"], s1["idle_ns"], s1["gaps"]) == (450, 200, 2)
    assert (s1["idle_host_ns"], s1["idle_sync_ns"], s1["idle_copy_ns"], s1["idle_other_ns"]) == (0, 0, 100, 100)
    util = {(r["scope"], r["step"]): r for r in q(four_causes, "gpu_utilization")}
    assert util["step", "step 0"]["kernel_busy_ns"] == 250 and util["step", "step 0"]["utilization"] == 250 / 450
    assert util["run", None]["utilization"] == 500 / 900


def test_step_cut_inside_a_gap_and_a_kernel(run_factory):
    # kernels [0,100), [300,400); a step [50,350) cuts both kernels and holds the whole gap:
    # busy = [50,100) + [300,350) = 100, wall 300, idle 200 (gap [100,300) counted once)
    run = run_factory({"kernels": kernels([(0, 100, 1, 0, 1, 1, "k"), (300, 400, 1, 0, 1, 2, "k")]),
                       "nvtx_ranges": steps([(5, "step 3 (warmup)", 50, 350)])})
    [u] = q(run, "gpu_utilization", where={"scope": "step"})
    assert (u["wall_ns"], u["busy_ns"], u["idle_ns"], u["step_number"]) == (300, 100, 200, 3)
    [i] = q(run, "gpu_idle", where={"scope": "step"})
    assert (i["idle_ns"], i["gaps"]) == (200, 1)


def test_cpu_overhead_per_step(four_causes):
    rows = {(r["scope"], r["step"]): r for r in q(four_causes, "cpu_overhead")}
    s0 = rows["step", "step 0"]
    # calls starting in [0,450): launches [0,5) [10,20) [150,160) [350,360) and the sync [250,310)
    #   api_ns = 5 + 10 + 10 + 60 + 10 = 95; sync 60; launch 35; 4 launches
    #   host_ns_per_launch = (95 - 60) / 4 = 8.75; GPU idle on host 100 of 450
    assert (s0["wall_ns"], s0["api_ns"], s0["sync_api_ns"], s0["launch_api_ns"], s0["launches"]) == \
        (450, 95, 60, 35, 4)
    assert s0["host_ns_per_launch"] == 8.75 and s0["launch_call_avg_ns"] == 8.75
    assert (s0["gpus"], s0["gpu_wall_ns"], s0["gpu_idle_host_ns"]) == (1, 450, 100)
    assert s0["host_bound_fraction"] == 100 / 450
    s1 = rows["step", "step 1"]
    # [450,900): cudaMemcpy [450,520) = 70 and the launch [550,560) = 10 -> api 80, 1 launch
    assert (s1["api_ns"], s1["sync_api_ns"], s1["launch_api_ns"], s1["launches"]) == (80, 0, 10, 1)
    assert s1["host_ns_per_launch"] == 80 and s1["gpu_idle_host_ns"] == 0
    run = rows["run", None]
    # process span [0,900): every call: 95 + 80 = 175 ns, 5 launches
    assert (run["wall_ns"], run["api_ns"], run["launches"]) == (900, 175, 5)


def test_cpu_overhead_counts_nested_calls_once(run_factory):
    # a runtime launch [0,10) with a driver launch nested in it [2,8) on the same thread, and a
    # launches [12,15) and [15,17): API time is the union 10 + 3 + 2 = 15 ns; 3 launches, not 4
    run = run_factory({"cuda_api": api([(0, 10, 1, 1, 1, "cudaLaunchKernel"),
                                        (2, 8, 1, 1, 2, "cuLaunchKernel"),
                                        (12, 15, 1, 1, 3, "cudaLaunchKernel"),
                                        (15, 17, 1, 1, 4, "cudaLaunchKernel")]),  # touches the previous one
                       "nvtx_ranges": steps([(1, "step 0", 0, 20)])})
    [s] = q(run, "cpu_overhead", where={"scope": "step"})
    assert (s["api_ns"], s["launch_api_ns"], s["launches"], s["gpus"]) == (15, 15, 3, 0)
    assert s["host_bound_fraction"] is None


# -- failure class: graph-launched kernels, driver/Ex launches, missing API rows, clock skew ------

def test_launch_latency_graphs_ex_variants_missing_api_and_skew(run_factory):
    run = run_factory({
        "kernels": kernels([
            (40, 60, 1, 0, 1, 10, "g"), (60, 90, 1, 0, 1, 10, "g"),   # two nodes of one graph launch
            (100, 110, 1, 0, 1, 99, "orphan"),                         # no API row
            (120, 130, 1, 0, 1, 11, "ex"),                             # driver Ex launch
            (195, 205, 1, 0, 1, 12, "skewed")]),                       # starts before its call
        "cuda_api": api([(0, 50, 1, 1, 10, "cudaGraphLaunch_v10000"), (95, 98, 1, 1, 11, "cuLaunchKernelEx"),
                         (200, 210, 1, 1, 12, "cudaLaunchKernelExC_v11060")]),
    })
    rows = {(r["name"], r["kernel_start_ns"]): r for r in q(run, "launch_latency")}
    assert len(rows) == 5  # nothing dropped
    g1, g2 = rows["g", 40], rows["g", 60]
    # graph call [0,50): node 1 starts at 40 -> latency 40, queue 40-50 = -10, total max(50,60)-0 = 60
    assert (g1["api_name"], g1["launch_kind"], g1["launch_latency_ns"], g1["api_duration_ns"],
            g1["queue_delay_ns"], g1["has_queue"], g1["total_ns"]) == \
        ("cudaGraphLaunch", "graph", 40, 50, -10, False, 60)
    # node 2 starts at 60: latency 60, queue 10, total 90
    assert (g2["launch_latency_ns"], g2["queue_delay_ns"], g2["has_queue"], g2["total_ns"]) == (60, 10, True, 90)
    orphan = rows["orphan", 100]
    assert orphan["has_api"] is False and orphan["launch_latency_ns"] is None and orphan["api_name"] is None
    ex = rows["ex", 120]
    # [95,98) -> kernel 120: latency 25, api 3, queue 22
    assert (ex["api_name"], ex["launch_kind"], ex["launch_latency_ns"], ex["api_duration_ns"],
            ex["queue_delay_ns"]) == ("cuLaunchKernelEx", "kernel", 25, 3, 22)
    sk = rows["skewed", 195]
    # call [200,210), kernel at 195: -5 reported as is, flagged; queue 195-210 = -15
    assert (sk["api_name"], sk["launch_latency_ns"], sk["queue_delay_ns"], sk["clock_skew"]) == \
        ("cudaLaunchKernelExC", -5, -15, True)
    assert not any(r["clock_skew"] for r in rows.values() if r["name"] != "skewed" and r["has_api"])

    by = {(r["name"], r["launch_kind"]): r for r in q(run, "launch_latency_by_name")}
    g = by["g", "graph"]
    # latencies 40 and 60: p50 = 50, p90 = 40 + 0.9*20 = 58, p99 = 59.8 (linear interpolation)
    assert (g["count"], g["latency_avg_ns"], g["latency_p50_ns"]) == (2, 50, 50)
    assert g["latency_p90_ns"] == pytest.approx(58) and g["latency_p99_ns"] == pytest.approx(59.8)
    assert g["queue_p50_ns"] == 0  # (-10 + 10) / 2
    assert by["orphan", None]["count"] == 1 and by["orphan", None]["latency_p50_ns"] is None
    assert by["skewed", "kernel"]["clock_skew_count"] == 1

    # the graph's kernels are busy time: [40,90) + [100,110) + [120,130) + [195,205) over [40,205)
    [u] = q(run, "gpu_utilization", where={"scope": "run"})
    assert (u["wall_ns"], u["kernel_busy_ns"]) == (165, 80)


def test_graph_gap_blamed_on_graph_launch(run_factory):
    # kernel [0,10); graph node kernel [100,120) from cudaGraphLaunch [50,60): at 10 the launch had
    # not been issued -> the gap [10,100) is waiting on the host
    run = run_factory({"kernels": kernels([(0, 10, 1, 0, 1, 1, "a"), (100, 120, 1, 0, 2, 2, "g")]),
                       "cuda_api": api([(50, 60, 1, 1, 2, "cudaGraphLaunch")])})
    [i] = q(run, "gpu_idle", where={"scope": "run"})
    assert (i["idle_ns"], i["idle_host_ns"]) == (90, 90)


# -- failure class: NCCL kernels after the ncclKernel_ -> ncclDevKernel_ rename -------------------

def test_nccl_both_names_overlap_and_bandwidth(run_factory):
    run = run_factory({
        "kernels": kernels([
            (0, 100, 1, 0, 20, 1, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"),
            (200, 300, 1, 0, 20, 2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            (50, 250, 1, 0, 7, 3, "gemm"),                 # compute on another stream
            (0, 300, 2, 0, 7, 1, "gemm_other_process"),   # another process' GPU 0: must not count
            (400, 450, 1, 0, 20, 4, "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"),
        ]),
        "collectives": {"start_ns": [0, 200, 400], "pid": [1, 1, 1], "device_id": [0, 0, 0],
                        "correlation_id": [1, 2, 4], "collective": ["allreduce", "allreduce", "allgather"],
                        "in_bytes": [1_000_000, 1_000_000, 100], "out_bytes": [1_000_000, 1_000_000, 800],
                        "group_size": [8, 8, 8]},
    })
    rows = {(r["pid"], r["collective"]): r for r in q(run, "nccl")}
    assert set(rows) == {(1, "AllReduce"), (1, "AllGather")}
    ar = rows[1, "AllReduce"]
    # both spellings counted: 2 kernels, 200 ns; overlap with gemm [50,250): [50,100) + [200,250) = 100
    assert (ar["count"], ar["nccl_ns"], ar["overlap_ns"], ar["exposed_ns"], ar["overlap_fraction"]) == \
        (2, 200, 100, 100, 0.5)
    # 2 MB in 200 ns -> algbw 1e13 B/s; n = 8: bus factor 2*7/8 = 1.75 -> busbw 1.75e13 B/s
    assert (ar["sized_count"], ar["message_bytes"], ar["avg_message_bytes"], ar["ranks"]) == \
        (2, 2_000_000, 1_000_000, 8)
    assert ar["bus_factor"] == 1.75
    assert ar["algbw_bytes_per_s"] == pytest.approx(1e13) and ar["busbw_bytes_per_s"] == pytest.approx(1.75e13)
    ag = rows[1, "AllGather"]
    # Generic kernel named by its collectives row; size = max(in, out) = 800 in 50 ns = 1.6e10 B/s;
    # factor (8-1)/8 = 0.875; no compute kernel runs in [400,450)
    assert (ag["count"], ag["overlap_ns"], ag["message_bytes"], ag["bus_factor"]) == (1, 0, 800, 0.875)
    assert ag["algbw_bytes_per_s"] == pytest.approx(1.6e10)
    assert ag["busbw_bytes_per_s"] == pytest.approx(1.4e10)
    # ranks parameter overrides: n = 2 -> allreduce factor 2*1/2 = 1
    over = {r["collective"]: r for r in q(run, "nccl", {"ranks": "2"})}
    assert over["AllReduce"]["bus_factor"] == 1.0 and over["AllReduce"]["ranks"] == 2


def test_nccl_without_sizes_infers_ranks_from_gpus(run_factory):
    # two processes, one NCCL broadcast kernel each, no collectives rows: n = 2 GPUs, factor 1,
    # bandwidth unknown (null), the kernels still counted
    run = run_factory({"kernels": kernels([
        (0, 10, 1, 0, 5, 1, "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"),
        (0, 12, 2, 0, 5, 1, "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)")])})
    rows = {r["pid"]: r for r in q(run, "nccl")}
    assert (rows[1]["collective"], rows[1]["nccl_ns"], rows[2]["nccl_ns"]) == ("Broadcast", 10, 12)
    assert rows[1]["ranks"] == 2 and rows[1]["bus_factor"] == 1.0
    assert rows[1]["message_bytes"] is None and rows[1]["algbw_bytes_per_s"] is None


# -- memcpy_throughput and interconnect ----------------------------------------------------------

def test_memcpy_throughput_pinned_vs_pageable_and_peer(run_factory):
    run = run_factory({"memcpy": {
        "start_ns": [0, 200, 400, 600], "end_ns": [100, 300, 1400, 650],
        "pid": [1] * 4, "device_id": [0, 0, 0, 0], "stream_id": [1] * 4, "correlation_id": [1, 2, 3, 4],
        "bytes": [1000, 3000, 1000, 500], "kind": ["HtoD", "HtoD", "HtoD", "PtoP"],
        "src_kind": ["Pinned", "Pinned", "Pageable", "Device"],
        "dst_kind": ["Device", "Device", "Device", "Device"],
        "src_device_id": [None, None, None, 0], "dst_device_id": [None, None, None, 1]}})
    rows = {(r["kind"], r["host_memory"]): r for r in q(run, "memcpy_throughput")}
    pinned = rows["HtoD", "Pinned"]
    # 1000 B / 100 ns = 1e10 B/s and 3000 B / 100 ns = 3e10 B/s; together 4000 B / 200 ns = 2e10 B/s
    assert (pinned["count"], pinned["total_bytes"], pinned["total_ns"]) == (2, 4000, 200)
    assert pinned["bytes_per_s"] == pytest.approx(2e10) and pinned["p50_bytes_per_s"] == pytest.approx(2e10)
    assert pinned["p10_bytes_per_s"] == pytest.approx(1.2e10)   # 1e10 + 0.1 * 2e10
    assert pinned["max_bytes_per_s"] == pytest.approx(3e10)
    pageable = rows["HtoD", "Pageable"]
    assert pageable["bytes_per_s"] == pytest.approx(1e9)        # 1000 B / 1000 ns
    peer = rows["PtoP", None]
    assert (peer["src_device_id"], peer["dst_device_id"]) == (0, 1)
    assert peer["bytes_per_s"] == pytest.approx(1e10)           # 500 B / 50 ns


def test_interconnect_from_gpu_metrics(run_factory):
    run = run_factory({
        "gpu_metrics": {
            "timestamp_ns": [0, 10, 20, 5, 5, 0],
            "device_id": [0, 0, 0, 0, 0, 1],
            "metric_name": ["PCIe RX Throughput [Throughput %]"] * 3
                           + ["NVLink TX Responses User Data [Throughput %]", "SMs Active [Throughput %]",
                              "PCIe RX Throughput [Throughput %]"],
            "value": [10.0, 20.0, 30.0, 50.0, 99.0, 7.0]},
        "nvtx_ranges": steps([(1, "step 0", 0, 15)]),
    })
    rows = {(r["scope"], r["device_id"], r["link"], r["direction"]): r for r in q(run, "interconnect")}
    # SMs Active is not an interconnect metric
    assert set(rows) == {("run", 0, "PCIe", "rx"), ("run", 0, "NVLink", "tx"), ("run", 1, "PCIe", "rx"),
                         ("step", 0, "PCIe", "rx"), ("step", 0, "NVLink", "tx"), ("step", 1, "PCIe", "rx")}
    rx = rows["run", 0, "PCIe", "rx"]
    # samples 10, 20, 30: mean 20, median 20, p90 = 20 + 0.8*10 = 28, max 30
    assert (rx["samples"], rx["avg_value"], rx["p50_value"], rx["max_value"], rx["unit"]) == \
        (3, 20.0, 20.0, 30.0, "Throughput %")
    assert rx["p90_value"] == pytest.approx(28.0)
    # step 0 = [0,15) holds the samples at 0 and 10 -> mean 15
    assert rows["step", 0, "PCIe", "rx"]["samples"] == 2 and rows["step", 0, "PCIe", "rx"]["avg_value"] == 15.0


# -- host_cpu_utilization ------------------------------------------------------------------------

def test_host_cpu_utilization(run_factory):
    # process 1: thread 1 runs [0,40) and [50,100) on cores 0/1; thread 2 runs [0,100) on core 1
    # process 2: thread 3 runs [10,20) on core 2. Cores seen: 0, 1, 2 -> cpus = 3.
    # thread 1 spends [5,15) in poll(). Steps: step 0 [0,50), step 1 [50,100) (process 1).
    run = run_factory({
        "cpu_thread_state": {"start_ns": [0, 50, 0, 10], "end_ns": [40, 100, 100, 20], "cpu": [0, 1, 1, 2],
                             "pid": [1, 1, 1, 2], "tid": [1, 1, 2, 3]},
        "osrt_api": {"start_ns": [5], "end_ns": [15], "name": ["poll"], "pid": [1], "tid": [1]},
        "threads": {"pid": [1, 1], "tid": [1, 2], "name": ["main", "worker"]},
        "nvtx_ranges": steps([(7, "step 0", 0, 50), (8, "step 1", 50, 100)]),
    })
    rows = {(r["scope"], r["step"], r["level"], r["pid"], r["tid"]): r for r in q(run, "host_cpu_utilization")}
    whole = rows["run", None, "all", None, None]
    # run window [0,100): busy 40 + 50 + 100 + 10 = 200 -> 2 cores busy on average, 200/(100*3)
    assert (whole["wall_ns"], whole["busy_ns"], whole["cores_busy"], whole["cpus"]) == (100, 200, 2.0, 3)
    assert whole["cpu_utilization"] == pytest.approx(2 / 3)
    main = rows["run", None, "thread", 1, 1]
    assert (main["thread_name"], main["busy_ns"], main["osrt_ns"], main["cores_busy"]) == ("main", 90, 10, 0.9)
    assert rows["run", None, "process", 1, None]["busy_ns"] == 190
    # step 0 [0,50): thread 1 40, thread 2 50, thread 3 10 -> 100 busy, 2 cores; step 1: 50 + 50 = 100
    assert rows["step", "step 0", "all", None, None]["busy_ns"] == 100
    assert rows["step", "step 0", "thread", 1, 1]["osrt_ns"] == 10
    assert rows["step", "step 1", "process", 2, None]["busy_ns"] == 0
    assert rows["step", "step 1", "thread", 1, 1]["cores_busy"] == 1.0


def test_host_cpu_utilization_without_scheduling_data(run_factory):
    # only OS runtime calls captured: busy time is unknown (null), not 0
    run = run_factory({"osrt_api": {"start_ns": [0, 30], "end_ns": [20, 100], "name": ["read", "poll"],
                                    "pid": [1, 1], "tid": [1, 1]}})
    [row] = q(run, "host_cpu_utilization", where={"level": "thread"})
    assert row["busy_ns"] is None and row["cores_busy"] is None and row["osrt_ns"] == 90


# -- identity: pid and rank kept; every output column documented ---------------------------------

def test_rank_is_kept_per_process(run_factory):
    # two ranks, each its own process driving its own "device 0"
    run = run_factory({"kernels": kernels([(0, 10, 100, 0, 7, 1, "k"), (0, 30, 200, 0, 7, 1, "k")]),
                       "processes": {"pid": [100, 200], "rank": [1, 0]}})
    rows = {r["rank"]: r for r in q(run, "gpu_utilization", where={"scope": "run"})}
    assert (rows[1]["pid"], rows[1]["busy_ns"]) == (100, 10)
    assert (rows[0]["pid"], rows[0]["busy_ns"]) == (200, 30)
    assert {r["rank"] for r in q(run, "launch_latency")} == {0, 1}


METRIC_QUERIES = ("gpu_utilization", "gpu_idle", "launch_latency", "launch_latency_by_name", "cpu_overhead",
                  "host_cpu_utilization", "nccl", "memcpy_throughput", "interconnect")


def test_output_columns_are_the_documented_ones(four_causes):
    from tracekit.query.named_queries import get_query

    with Engine([four_causes]) as eng:
        for name in METRIC_QUERIES:
            cols = eng.query(name).column_names
            assert cols == [c.name for c in get_query(name).columns], name
            assert cols[0] == "run_id"


def test_gap_after_the_last_activity_is_other(run_factory):
    # kernel [0,100) is the GPU's last activity; step 0 runs to 200 with the host in a sync
    # [50,150): the step's tail [100,200) has no next activity -> other (100 ns), not sync
    run = run_factory({"kernels": kernels([(0, 100, 1, 0, 1, 1, "k")]),
                       "cuda_api": api([(50, 150, 1, 1, 9, "cudaDeviceSynchronize")]),
                       "nvtx_ranges": steps([(1, "step 0", 0, 200)])})
    [i] = q(run, "gpu_idle", where={"scope": "step"})
    assert (i["wall_ns"], i["idle_ns"], i["idle_other_ns"], i["idle_sync_ns"]) == (200, 100, 100, 0)


def test_unknown_pid_and_device_are_still_one_gpu(run_factory):
    # an input that records neither process nor device for its kernels (nulls): one GPU row,
    # busy [0,10) + [20,30) = 20 of wall 30
    run = run_factory({"kernels": {"start_ns": [0, 20], "end_ns": [10, 30], "name": ["k", "k"],
                                   "stream_id": [1, 2]}})
    [u] = q(run, "gpu_utilization", where={"scope": "run"})
    assert (u["pid"], u["device_id"], u["wall_ns"], u["busy_ns"], u["idle_ns"]) == (None, None, 30, 20, 10)
    [i] = q(run, "gpu_idle", where={"scope": "run"})
    assert (i["idle_ns"], i["gaps"]) == (10, 1)


def test_interconnect_steps_of_two_processes(run_factory):
    # ranks in processes 1 and 2 both have a step covering the sample at t=10: one row per step
    steps2 = steps([(1, "step 0", 0, 20)], pid=1)
    other = steps([(2, "step 0", 5, 25)], pid=2)
    both = {k: steps2[k] + other[k] for k in steps2}
    run = run_factory({"gpu_metrics": {"timestamp_ns": [10], "device_id": [0],
                                       "metric_name": ["NVLink RX Bandwidth [Throughput %]"], "value": [40.0]},
                       "nvtx_ranges": both})
    rows = q(run, "interconnect", where={"scope": "step"})
    assert sorted(r["step_id"] for r in rows) == [1, 2] and all(r["avg_value"] == 40.0 for r in rows)
