"""Golden tests of the summary named queries on tiny hand-built run folders.

Every expected value is worked out by hand in the comments. Conventions checked here (the same
as nsys stats, which the oracle tests check on real exports):
- every row counts, including zero and negative durations (end before start);
- stddev is the sample standard deviation (n - 1), 0.0 for a single value;
- the median of an even count is the mean of the two middle values;
- time_pct is a share of the summed time of the rows of the same run;
- several run folders give separate rows, told apart by run_id.
"""

from __future__ import annotations

import math

import pytest

from tracekit.query.engine import Engine


def _query(runs, name, **params):
    with Engine(runs) as eng:
        return eng.query(name, {k: str(v) for k, v in params.items()}).to_pylist()


def _interval(starts, durations):
    return {"start_ns": starts, "end_ns": [s + d for s, d in zip(starts, durations)],
            "duration_ns": durations}


def test_kernel_summary_two_runs_and_nonpositive_durations(run_factory):
    # run a: k1 lasts 10, 20, 60; k2 lasts 10. All kernel time = 100.
    a = run_factory({"kernels": {**_interval([0, 100, 200, 300], [10, 20, 60, 10]),
                                 "name": ["k1", "k1", "k1", "k2"]}}, name="a")
    # run b: k1 lasts 5, 0 and -1 (end before start): all three count, as in nsys stats.
    b = run_factory({"kernels": {**_interval([0, 100, 200], [5, 0, -1]), "name": ["k1"] * 3}}, name="b")
    rows = _query([a, b], "kernel_summary")
    assert [(r["run_id"], r["name"]) for r in rows] == [("a", "k1"), ("a", "k2"), ("b", "k1")]
    # a/k1: total 90, mean 30, median 20; deviations -20, -10, 30 -> sqrt((400+100+900)/2) = sqrt(700)
    assert rows[0] == {"run_id": "a", "name": "k1", "instances": 3, "total_ns": 90, "avg_ns": 30.0,
                       "med_ns": 20.0, "min_ns": 10, "max_ns": 60,
                       "stddev_ns": pytest.approx(math.sqrt(700)), "time_pct": pytest.approx(90.0)}
    # a/k2: a single execution: stddev 0.0 as nsys prints, 10 of 100 ns = 10 %
    assert rows[1]["stddev_ns"] == 0.0 and rows[1]["time_pct"] == pytest.approx(10.0)
    # b/k1: total 5 + 0 - 1 = 4, mean 4/3, median 0, min -1;
    # deviations 11/3, -4/3, -7/3 -> squares (121 + 16 + 49)/9 = 186/9, / (n-1) = 93/9
    assert rows[2]["instances"] == 3 and rows[2]["total_ns"] == 4
    assert rows[2]["avg_ns"] == pytest.approx(4 / 3) and rows[2]["med_ns"] == 0.0
    assert rows[2]["min_ns"] == -1 and rows[2]["max_ns"] == 5
    assert rows[2]["stddev_ns"] == pytest.approx(math.sqrt(93 / 9))
    assert rows[2]["time_pct"] == pytest.approx(100.0)


def test_cuda_api_summary(run_factory):
    # cudaLaunchKernel lasts 4 and 6, cudaMalloc 90: all API time = 100
    run = run_factory({"cuda_api": {**_interval([0, 10, 20], [4, 6, 90]), "pid": [1, 1, 1], "tid": [1, 2, 1],
                                    "correlation_id": [1, 2, 3],
                                    "name": ["cudaLaunchKernel", "cudaLaunchKernel", "cudaMalloc"]}})
    rows = _query([run], "cuda_api_summary")
    assert [r["name"] for r in rows] == ["cudaMalloc", "cudaLaunchKernel"]
    assert rows[0]["calls"] == 1 and rows[0]["total_ns"] == 90 and rows[0]["stddev_ns"] == 0.0
    assert rows[0]["time_pct"] == pytest.approx(90.0)
    # two calls on different threads are one row: mean 5, median (4+6)/2 = 5, sd sqrt(1+1) = sqrt(2)
    assert rows[1] == {"run_id": run.name, "name": "cudaLaunchKernel", "calls": 2, "total_ns": 10,
                       "avg_ns": 5.0, "med_ns": 5.0, "min_ns": 4, "max_ns": 6,
                       "stddev_ns": pytest.approx(math.sqrt(2)), "time_pct": pytest.approx(10.0)}
    # top=1 keeps the name with the most time
    assert [r["name"] for r in _query([run], "cuda_api_summary", top=1)] == ["cudaMalloc"]


def test_osrt_summary(run_factory):
    # poll 70 and 10 (median of two = 40), ioctl 20: total 100
    run = run_factory({"osrt_api": {**_interval([0, 100, 200], [70, 20, 10]), "pid": [1, 1, 1],
                                    "tid": [1, 1, 2], "name": ["poll", "ioctl", "poll"]}})
    rows = _query([run], "osrt_summary")
    assert [(r["name"], r["calls"], r["total_ns"], r["med_ns"], r["min_ns"], r["max_ns"]) for r in rows] == [
        ("poll", 2, 80, 40.0, 10, 70), ("ioctl", 1, 20, 20.0, 20, 20)]
    # poll: deviations +-30 -> sqrt(2 * 900 / 1) = sqrt(1800); 80 %
    assert rows[0]["stddev_ns"] == pytest.approx(math.sqrt(1800))
    assert rows[0]["time_pct"] == pytest.approx(80.0) and rows[1]["time_pct"] == pytest.approx(20.0)


def test_memcpy_summary_with_and_without_memset(run_factory):
    # HtoD: 100 B in 10 ns and 300 B in 30 ns; DtoH: 50 B in 50 ns; a copy of unknown kind
    # (NULL) of 1 B in 0 ns; memset: 8 B in 10 ns. All time = 100 ns.
    run = run_factory({
        "memcpy": {**_interval([0, 100, 200, 300], [10, 30, 50, 0]), "bytes": [100, 300, 50, 1],
                   "kind": ["HtoD", "HtoD", "DtoH", None]},
        "memset": {**_interval([400], [10]), "bytes": [8]},
    })
    rows = {r["kind"]: r for r in _query([run], "memcpy_summary")}
    assert list(rows) == ["DtoH", "HtoD", "memset", "Unknown"]  # by total time, descending
    h = rows["HtoD"]
    assert h["operation"] == "[CUDA memcpy HtoD]"
    assert (h["count"], h["total_bytes"], h["total_ns"], h["min_ns"], h["max_ns"]) == (2, 400, 40, 10, 30)
    # times 10, 30: mean = median = 20, sd sqrt(2 * 10^2) ; sizes 100, 300: mean 200, sd sqrt(2 * 100^2)
    assert h["avg_ns"] == 20.0 and h["med_ns"] == 20.0 and h["stddev_ns"] == pytest.approx(math.sqrt(200))
    assert h["avg_bytes"] == 200.0 and h["med_bytes"] == 200.0
    assert (h["min_bytes"], h["max_bytes"]) == (100, 300)
    assert h["stddev_bytes"] == pytest.approx(math.sqrt(20000))
    assert h["time_pct"] == pytest.approx(40.0)
    # 400 B in 40 ns = 10 B/ns = 1e10 B/s
    assert h["throughput_bytes_per_s"] == pytest.approx(1e10)
    assert rows["DtoH"]["throughput_bytes_per_s"] == pytest.approx(1e9)  # 50 B / 50 ns
    m = rows["memset"]
    assert m["operation"] == "[CUDA memset]" and m["count"] == 1 and m["total_bytes"] == 8
    assert m["stddev_ns"] == 0.0 and m["stddev_bytes"] == 0.0 and m["time_pct"] == pytest.approx(10.0)
    assert m["throughput_bytes_per_s"] == pytest.approx(8e8)  # 8 B / 10 ns
    u = rows["Unknown"]
    assert u["operation"] == "[CUDA memcpy Unknown]" and u["total_ns"] == 0
    assert u["throughput_bytes_per_s"] is None  # no time: no rate
    # without memsets the copies share 90 ns: HtoD 40/90, DtoH 50/90
    rows = {r["kind"]: r for r in _query([run], "memcpy_summary", include_memset="false")}
    assert set(rows) == {"HtoD", "DtoH", "Unknown"}
    assert rows["HtoD"]["time_pct"] == pytest.approx(400 / 9)
    assert rows["DtoH"]["time_pct"] == pytest.approx(500 / 9)



def test_memcpy_summary_operation_labels(run_factory):
    # the labels nsys stats prints, unified-memory copies included (kind as the export labels it)
    kinds = ["PtoP", "Unified Host-to-Device", "Unified Device-to-Host", "Unified Device-to-Device"]
    run = run_factory({"memcpy": {**_interval([0, 10, 20, 30], [1, 2, 3, 4]), "bytes": [1] * 4, "kind": kinds}})
    got = {r["kind"]: r["operation"] for r in _query([run], "memcpy_summary")}
    assert got == {"PtoP": "[CUDA memcpy PtoP]",
                   "Unified Host-to-Device": "[CUDA Unified Memory memcpy HtoD]",
                   "Unified Device-to-Host": "[CUDA Unified Memory memcpy DtoH]",
                   "Unified Device-to-Device": "[CUDA Unified Memory memcpy DtoD]"}


def _launch_run(run_factory, name=None):
    # Two launches of kernel "k" from pid 1, thread 11:
    #   call 1 [0, 10]    -> kernel [15, 45]:  api 10, queue 15 - 10 = 5, kernel 30, total 45 - 0 = 45
    #   call 2 [100, 120] -> kernel [110, 130]: api 20, queue 110 - 120 < 0 -> none, kernel 20,
    #                                            total max(120, 130) - 100 = 30
    # Not joined: a kernel with correlation 3 (no call), and one in pid 2 with correlation 1
    # (correlation IDs are per process).
    return run_factory({
        "cuda_api": {**_interval([0, 100], [10, 20]), "pid": [1, 1], "tid": [11, 11],
                     "correlation_id": [1, 2], "name": ["cudaLaunchKernel", "cudaLaunchKernel"]},
        "kernels": {**_interval([15, 110, 200, 300], [30, 20, 5, 5]), "pid": [1, 1, 1, 2],
                    "correlation_id": [1, 2, 3, 1], "device_id": [0, 0, 0, 0], "name": ["k"] * 4},
    }, name=name)


def test_launch_overhead(run_factory):
    run = _launch_run(run_factory)
    rows = _query([run], "launch_overhead")
    assert len(rows) == 1
    r = rows[0]
    assert (r["name"], r["api_name"], r["pid"], r["tid"], r["device_id"]) == ("k", "cudaLaunchKernel", None, None, None)
    assert (r["launches"], r["queued"]) == (2, 1)
    assert (r["api_total_ns"], r["queue_total_ns"], r["kernel_total_ns"]) == (30, 5, 50)
    # total 45, 30: mean 37.5, sd sqrt(2 * 7.5^2) = 10.6066
    assert (r["total_avg_ns"], r["total_med_ns"], r["total_min_ns"], r["total_max_ns"]) == (37.5, 37.5, 30, 45)
    assert r["total_stddev_ns"] == pytest.approx(math.sqrt(112.5))
    # api 10, 20: mean 15, sd sqrt(50)
    assert (r["api_avg_ns"], r["api_min_ns"], r["api_max_ns"]) == (15.0, 10, 20)
    assert r["api_stddev_ns"] == pytest.approx(math.sqrt(50))
    # queue: only the first launch (5): one value -> sd 0.0
    assert (r["queue_avg_ns"], r["queue_med_ns"], r["queue_min_ns"], r["queue_max_ns"], r["queue_stddev_ns"]) == (
        5.0, 5.0, 5, 5, 0.0)
    # kernel 30, 20: mean 25, sd sqrt(50)
    assert (r["kernel_avg_ns"], r["kernel_min_ns"], r["kernel_max_ns"]) == (25.0, 20, 30)
    assert r["kernel_stddev_ns"] == pytest.approx(math.sqrt(50))
    # split=true: the grouping of nsys stats (pid, tid, device)
    rows = _query([run], "launch_overhead", split="true")
    assert [(r["pid"], r["tid"], r["device_id"], r["launches"]) for r in rows] == [(1, 11, 0, 2)]


def test_launch_overhead_no_queue_time(run_factory):
    # a single launch whose kernel starts before the call returns: no queue statistics (NULL)
    run = run_factory({
        "cuda_api": {**_interval([0], [10]), "pid": [1], "tid": [1], "correlation_id": [7], "name": ["cuLaunchKernel"]},
        "kernels": {**_interval([5], [10]), "pid": [1], "correlation_id": [7], "name": ["k"]},
    })
    (r,) = _query([run], "launch_overhead")
    assert r["queued"] == 0 and r["queue_total_ns"] is None
    assert (r["queue_avg_ns"], r["queue_min_ns"], r["queue_stddev_ns"]) == (None, None, None)
    assert r["total_avg_ns"] == 15.0  # max(10, 15) - 0


def _nvtx_run(run_factory, name=None):
    # ranges (pid 1, thread 1 unless said):
    #   step  ''  push/pop   [0, 100] and [200, 500]   -> 100, 300
    #   step  'D' push/pop   [600, 650]                -> 50 (another domain: another row)
    #   io    ''  start/end  [700, 740]                -> 40
    #   tail  ''  push/pop   [900, never closed]       -> ends at the last NVTX timestamp, the
    #                                                     mark at 1000: 100
    ranges = {
        "start_ns": [0, 200, 600, 700, 900], "end_ns": [100, 500, 650, 740, None],
        "duration_ns": [100, 300, 50, 40, None], "is_open": [False, False, False, False, True],
        "range_id": [1, 2, 3, 4, 5], "pid": [1] * 5, "tid": [1] * 5,
        "style": ["push/pop", "push/pop", "push/pop", "start/end", "push/pop"],
        "domain": ["", "", "D", "", ""], "name": ["step", "step", "step", "io", "tail"],
    }
    marks = {"timestamp_ns": [1000], "pid": [1], "tid": [1], "domain": [""], "name": ["m"]}
    return run_factory({"nvtx_ranges": ranges, "nvtx_marks": marks}, name=name)


def test_nvtx_summary(run_factory):
    run = _nvtx_run(run_factory)
    rows = _query([run], "nvtx_summary")
    got = [(r["domain"], r["name"], r["style"], r["instances"], r["total_ns"], r["min_ns"], r["max_ns"]) for r in rows]
    # all range time: 400 + 100 + 50 + 40 = 590
    assert got == [("", "step", "push/pop", 2, 400, 100, 300), ("", "tail", "push/pop", 1, 100, 100, 100),
                   ("D", "step", "push/pop", 1, 50, 50, 50), ("", "io", "start/end", 1, 40, 40, 40)]
    step = rows[0]
    # 100 and 300: mean = median = 200, sd sqrt(2 * 100^2) = 141.42
    assert step["avg_ns"] == 200.0 and step["med_ns"] == 200.0
    assert step["stddev_ns"] == pytest.approx(math.sqrt(20000))
    assert step["time_pct"] == pytest.approx(100 * 400 / 590)
    assert rows[3]["stddev_ns"] == 0.0 and rows[3]["time_pct"] == pytest.approx(100 * 40 / 590)


def _projection_run(run_factory, name=None):
    # NVTX ranges; pid 1 everywhere:
    #   R1 push/pop  thread 11 [0, 1000]   depth 0
    #   R2 push/pop  thread 11 [100, 400]  depth 1, inside R1
    #   R3 start/end thread 11 [500, 900]
    #   R4 start/end thread 11 [0, 1000], ended on thread 12: not projected (as nsys)
    #   R5 push/pop  thread 12 [0, 1000]
    #   R6 push/pop  thread 11 [970, 990]: no call of its thread starts after it (the next call in
    #                (thread, time) order is on thread 12): not projected
    #   R7 push/pop  thread 10 [0, 1000]: a thread without calls: not projected
    #   R8 push/pop  thread 12 [150, 160] depth 1, inside R5: exactly the interval of call 5
    #   R9 push/pop  thread 11 [880, 900] depth 1, inside R1: its only call starts at its end
    ranges = {
        "start_ns": [0, 100, 500, 0, 0, 970, 0, 150, 880],
        "end_ns": [1000, 400, 900, 1000, 1000, 990, 1000, 160, 900],
        "range_id": [1, 2, 3, 4, 5, 6, 7, 8, 9], "pid": [1] * 9, "tid": [11, 11, 11, 11, 12, 11, 10, 12, 11],
        "end_tid": [None, None, None, 12, None, None, None, None, None],
        "style": ["push/pop", "push/pop", "start/end", "start/end", "push/pop", "push/pop", "push/pop",
                  "push/pop", "push/pop"],
        "depth": [0, 1, None, None, 0, 1, 0, 1, 1],
        "parent_range_id": [None, 1, None, None, None, 1, None, 5, 1],
        "domain": ["", "", "", "", "D", "", "", "D", ""],
        "name": ["R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9"],
    }
    # CUDA API calls (correlation id: thread, [start, end] -> GPU work):
    #   1: 11 [150, 160] -> kernel [200, 260] (60)
    #   2: 11 [300, 310] -> memcpy [320, 330]
    #   3: 11 [600, 610] -> graph launch: kernels [620, 640] (20) and [630, 700] (70)
    #   4: 11 [390, 410] -> kernel [420, 430] (10); the call straddles R2's end: R1 only
    #   5: 12 [150, 160] -> kernel [170, 180] (10)
    #   6: 11 [950, 960] -> no GPU work
    #   7: 11 [900, 900] -> kernel [905, 915] (10); zero length, at the end of R3 and R9: inside
    #      R3, R9 and R1
    api = {"start_ns": [150, 300, 600, 390, 150, 950, 900], "end_ns": [160, 310, 610, 410, 160, 960, 900],
           "pid": [1] * 7, "tid": [11, 11, 11, 11, 12, 11, 11], "correlation_id": [1, 2, 3, 4, 5, 6, 7],
           "name": ["cudaLaunchKernel", "cudaMemcpyAsync", "cudaGraphLaunch", "cudaLaunchKernel",
                    "cudaLaunchKernel", "cudaStreamSynchronize", "cudaLaunchKernel"]}
    kernels = {"start_ns": [200, 620, 630, 420, 170, 905], "end_ns": [260, 640, 700, 430, 180, 915],
               "duration_ns": [60, 20, 70, 10, 10, 10], "pid": [1] * 6, "correlation_id": [1, 3, 3, 4, 5, 7],
               "name": ["a", "b", "c", "a", "a", "a"]}
    memcpy = {"start_ns": [320], "end_ns": [330], "duration_ns": [10], "pid": [1], "correlation_id": [2],
              "bytes": [4], "kind": ["HtoD"]}
    return run_factory({"nvtx_ranges": ranges, "cuda_api": api, "kernels": kernels, "memcpy": memcpy},
                       name=name)


# (range_id, launches, gpu_ops, kernels, kernel_ns, proj_start_ns, proj_end_ns, proj_duration_ns)
PROJECTION = [
    # R5: call 5
    (5, 1, 1, 1, 10, 170, 180, 10),
    # R8: call 5 too (range and call start and end at the same times); after R5 on the tie
    (8, 1, 1, 1, 10, 170, 180, 10),
    # R1: calls 1, 2, 3, 4, 7 -> 1 + 1 + 2 + 1 + 1 ops, kernels 60 + 20 + 70 + 10 + 10; span 200 .. 915
    (1, 5, 6, 5, 170, 200, 915, 715),
    # R2: calls 1 and 2 (not 4, which ends after R2); span 200 .. 330
    (2, 2, 2, 1, 60, 200, 330, 130),
    # R3: calls 3 and 7, kernels 20 + 70 + 10, span 620 .. 915
    (3, 2, 3, 3, 100, 620, 915, 295),
    # R9: call 7
    (9, 1, 1, 1, 10, 905, 915, 10),
]


def test_nvtx_gpu_projection(run_factory):
    run = _projection_run(run_factory)
    rows = _query([run], "nvtx_gpu_projection")
    got = [(r["range_id"], r["launches"], r["gpu_ops"], r["kernels"], r["kernel_ns"], r["proj_start_ns"],
            r["proj_end_ns"], r["proj_duration_ns"]) for r in rows]
    # sorted by projected start, longest first on a tie (R1 before R2); R4 is not projected
    assert got == PROJECTION
    by_id = {r["range_id"]: r for r in rows}
    r1 = by_id[1]
    assert (r1["name"], r1["style"], r1["pid"], r1["tid"], r1["depth"], r1["start_ns"], r1["duration_ns"]) == (
        "R1", "push/pop", 1, 11, 0, 0, 1000)
    assert by_id[5]["domain"] == "D" and by_id[2]["parent_range_id"] == 1 and by_id[8]["parent_range_id"] == 5


def test_nvtx_gpu_projection_runs_do_not_mix(run_factory):
    # the same data in two run folders: each run's rows are the single-run rows (nothing counted twice)
    a = _projection_run(run_factory, name="a")
    b = _projection_run(run_factory, name="b")
    rows = _query([a, b], "nvtx_gpu_projection")
    for run_id in ("a", "b"):
        got = [(r["range_id"], r["launches"], r["gpu_ops"], r["kernels"], r["kernel_ns"], r["proj_start_ns"],
                r["proj_end_ns"], r["proj_duration_ns"]) for r in rows if r["run_id"] == run_id]
        assert got == PROJECTION


def test_summaries_are_empty_without_data(run_factory):
    # a run that captured nothing: every summary answers with no rows (not zeros)
    run = run_factory({})
    for q in ("kernel_summary", "cuda_api_summary", "osrt_summary", "memcpy_summary", "nvtx_summary",
              "nvtx_gpu_projection", "launch_overhead"):
        assert _query([run], q) == [], q


def test_multi_run_rows_by_run_id(run_factory):
    a = _launch_run(run_factory, name="a")
    b = _nvtx_run(run_factory, name="b")
    # launch data only in a, NVTX only in b
    assert {r["run_id"] for r in _query([a, b], "launch_overhead")} == {"a"}
    assert {r["run_id"] for r in _query([a, b], "cuda_api_summary")} == {"a"}
    assert {r["run_id"] for r in _query([a, b], "nvtx_summary")} == {"b"}


SUMMARY_QUERIES = ("kernel_summary", "cuda_api_summary", "osrt_summary", "memcpy_summary", "nvtx_summary",
                   "nvtx_gpu_projection", "launch_overhead")


def test_output_columns_are_documented(run_factory):
    # every output column, in order, has its @column header line (with a unit); run_id first
    from tracekit.query.named_queries import get_query

    run = _projection_run(run_factory)
    with Engine([run]) as eng:
        for name in SUMMARY_QUERIES:
            q = get_query(name)
            out = eng.query(q).column_names
            assert out == [c.name for c in q.columns], name
            assert out[0] == "run_id", name
            assert q.topic in ("summary", "nvtx"), name


def test_nvtx_gpu_projection_plans_an_ie_join(run_factory):
    # the range join must be DuckDB's IE join (sort-based, memory linear in its inputs), not a
    # piecewise merge or nested loop join (time quadratic in ranges x launches per run)
    import re

    from tracekit.query.named_queries import get_query

    # DuckDB picks the join by (estimated) input size: 20000 ranges and 20000 launches (small
    # inputs get a nested loop or merge join, which is fine for them); range i is
    # [10 i, 10 i + 5], call i inside it
    n = 20000
    starts = [10 * i for i in range(n)]
    run = run_factory({
        "nvtx_ranges": {"start_ns": starts, "end_ns": [s + 5 for s in starts], "range_id": list(range(n)),
                        "pid": [1] * n, "tid": [1] * n, "style": ["push/pop"] * n, "name": ["r"] * n},
        "cuda_api": {"start_ns": [s + 1 for s in starts], "end_ns": [s + 2 for s in starts], "pid": [1] * n,
                     "tid": [1] * n, "correlation_id": list(range(n)), "name": ["cudaLaunchKernel"] * n},
        "kernels": {"start_ns": [s + 3 for s in starts], "end_ns": [s + 4 for s in starts], "pid": [1] * n,
                    "correlation_id": list(range(n)), "name": ["k"] * n},
    })
    q = get_query("nvtx_gpu_projection")
    with Engine([run]) as eng:
        rows = eng.query(q).to_pylist()
        assert len(rows) == n and all(r["launches"] == 1 and r["kernel_ns"] == 1 for r in rows)
        plan = eng.con.sql("EXPLAIN " + q.sql).fetchall()[0][1]
    joins = re.findall(r"(IE Join|Piecewise Merge Join|Nested Loop Join|Blockwise NL Join|Hash Join|ASOF Join)", plan)
    assert "IE Join" in joins and not {"Piecewise Merge Join", "Nested Loop Join", "Blockwise NL Join"} & set(joins), joins


def test_nvtx_summary_groups_pytorch_operators(run_factory):
    # emit_nvtx texts of two aten::mm calls and one aten::add (seq, op_id, sizes suffixes), and a
    # user range: grouped, aten::mm is 2 instances of 10 + 30 = 40 ns from 2 distinct texts
    names = ["aten::mm, seq = 4, op_id = 11, sizes = [[2, 3], [3, 4]]", "aten::mm, op_id = 12",
             "aten::add, seq = 5, op_id = 13, sizes = [[2], []], input_op_ids = [11, 12]",
             "FSDP::pre_forward (block.0), op_id = 14", "my range"]
    n = len(names)
    run = run_factory({"nvtx_ranges": {
        "range_id": list(range(n)), "pid": [1] * n, "tid": [1] * n, "style": ["push/pop"] * n,
        "domain": [""] * n, "name": names, "start_ns": [0, 100, 200, 300, 400],
        "end_ns": [10, 130, 205, 307, 401], "duration_ns": [10, 30, 5, 7, 1]}})
    rows = _query([run], "nvtx_summary")
    assert [(r["name"], r["instances"], r["total_ns"], r["raw_names"]) for r in rows] == [
        ("aten::mm", 2, 40, 2), ("FSDP::pre_forward (block.0)", 1, 7, 1), ("aten::add", 1, 5, 1),
        ("my range", 1, 1, 1)]
    raw = _query([run], "nvtx_summary", raw="true")
    assert sorted(r["name"] for r in raw) == sorted(names)
    assert {r["raw_names"] for r in raw} == {1}


def test_nvtx_summary_h100_operators(nsys_run):
    # the 2-GPU H100 PyTorch export: 16,582 distinct texts, 176 operators and ranges once grouped
    run = nsys_run("nsys2026_h100_2gpu_pytorch_slice")
    grouped = _query([run], "nvtx_summary")
    raw = _query([run], "nvtx_summary", raw="true")
    assert (len(raw), len(grouped)) == (16582, 176)
    assert sum(r["instances"] for r in grouped) == sum(r["instances"] for r in raw) == 16782
    assert not any("op_id = " in r["name"] for r in grouped)
