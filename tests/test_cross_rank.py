"""Cross-rank queries (collective_skew, stragglers, rank_summary) and the union-based nccl times.

The 32-rank job is built here from the shared NCCL Kineto trace (rank 0 of a 2-rank A100 run):
each copy gets its own rank (distributedInfo), host pid and a clock shifted by a known number of
nanoseconds; expected values are recomputed from the raw JSON with the json module (timestamps as
decimals) and the shifts. A whole trace shifted is a clock difference, which the job's clock
model would estimate and remove (tests/test_clock_model.py), so these jobs are converted with
``clock_model="none"``: the shifts are then arrival skews on one clock, and the matching is what
is tested."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal

import pytest
from conftest import FIXTURES
from jobgen import make_job

from tracekit.convert import convert
from tracekit.query.engine import Engine

NCCL_TRACE = FIXTURES / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"
NCCL_NAME = re.compile(r"nccl(Dev)?Kernel_")
HOST_PID = 2910249  # the trace's host process
RANKS = 32
DELAYED = 13
DELAY_NS = 3_000_000
# rank r's clock runs r * 40 us / 31 behind rank 0 (0 to 40 us), the delayed rank 3 ms more
SHIFT_NS = [r * 40_000 // 31 + (DELAY_NS if r == DELAYED else 0) for r in range(RANKS)]
SIZES = {"Float": 4, "Long": 8}


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def write_rank(doc, rank: int, shift_ns: int, path):
    """``doc`` as rank ``rank`` of a RANKS-rank job, every timestamp ``shift_ns`` later; the host
    pid becomes HOST_PID + rank (GPU tracks keep their device pids)."""
    shift_us = Decimal(shift_ns) / 1000
    ranks = list(range(RANKS))
    out = dict(doc)
    out["distributedInfo"] = {**doc["distributedInfo"], "rank": rank, "world_size": RANKS,
                              "pg_config": [{**doc["distributedInfo"]["pg_config"][0],
                                             "pg_size": RANKS, "ranks": ranks}]}
    events = []
    for e in doc["traceEvents"]:
        e = dict(e)
        if "ts" in e:
            e["ts"] = e["ts"] + shift_us
        if e.get("pid") == HOST_PID:
            e["pid"] = HOST_PID + rank
            if e.get("tid") == HOST_PID:
                e["tid"] = HOST_PID + rank
        args = e.get("args")
        if isinstance(args, dict) and "Group size" in args and args.get("Collective name") != "wait":
            e["args"] = {**args, "Group size": RANKS, "Process Group Ranks": str(ranks)}
        events.append(e)
    out["traceEvents"] = events
    path.write_text(json.dumps(out, default=str))
    return path


def one(eng, sql):
    return next(iter(eng.sql(sql).to_pylist()[0].values()))


@pytest.fixture(scope="module")
def raw():
    return load(NCCL_TRACE)


@pytest.fixture(scope="module")
def job(raw, tmp_path_factory):
    """One run folder holding the 32 ranks."""
    d = tmp_path_factory.mktemp("job32")
    # jobgen with no lateness writes each rank's trace on a clock SHIFT_NS[r] ahead: write_rank's
    # traces (one host per rank added), five times faster (a template of the source)
    paths = make_job(d / "traces", ranks=RANKS, jitter_ns=(0, 0), offsets_ns=SHIFT_NS,
                     drifts_ppm=[0.0] * RANKS).paths
    return convert(paths, d / "run", clock_model="none")


def nccl_kernels(doc):
    """The trace's NCCL kernels in start order: (start_ns before shifting, duration ns, collective
    type, message bytes)."""
    base = int(doc["baseTimeNanoseconds"])
    out = []
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and NCCL_NAME.search(e["name"]):
            a = e["args"]
            coll = {"allreduce": "AllReduce", "broadcast": "Broadcast"}[a["Collective name"]]
            size = max(a["In msg nelems"], a["Out msg nelems"]) * SIZES[a["dtype"]]
            out.append((base + int(e["ts"] * 1000), int(e["dur"] * 1000), coll, size))
    return sorted(out)


@pytest.mark.slow
def test_collective_skew_32_ranks(raw, job):
    kernels = nccl_kernels(raw)
    assert len(kernels) == 21
    with Engine([job]) as eng:
        assert one(eng, "SELECT count(DISTINCT rank) FROM processes") == RANKS
        got = eng.query("collective_skew").to_pylist()
    assert len(got) == 21
    spread = max(SHIFT_NS) - min(SHIFT_NS)
    assert spread == 40_000 * DELAYED // 31 + DELAY_NS
    seq = {}
    for row, (start, dur, coll, size) in zip(got, kernels):
        seq[coll] = seq.get(coll, 0) + 1
        n = RANKS
        factor = 2 * (n - 1) / n if coll == "AllReduce" else 1.0
        assert row == {
            "run_id": "run", "process_group": "0", "collective": coll, "seq": seq[coll], "ranks": RANKS,
            "first_start_ns": start + min(SHIFT_NS), "last_start_ns": start + max(SHIFT_NS),
            "skew_ns": spread, "skew_bound_ns": 0, "last_rank": DELAYED, "transfer_ns": dur, "bytes": size,
            "kind": "collective", "peers": None,
            "algo_bw_bytes_per_s": pytest.approx(size / dur * 1e9, rel=1e-12),
            "bus_bw_bytes_per_s": pytest.approx(size / dur * 1e9 * factor, rel=1e-12)}
    assert seq == {"AllReduce": 15, "Broadcast": 6}


def _held_once(holds):
    """Hand recount of delay_caused_ns: holds (lo, hi) that overlap are one wait, counted as the
    longest of them."""
    total, group_hi, longest = 0, None, 0
    for lo, hi in sorted(holds):
        if group_hi is not None and lo <= group_hi:
            group_hi, longest = max(group_hi, hi), max(longest, hi - lo)
        else:
            total += longest
            group_hi, longest = hi, hi - lo
    return total + longest


def test_stragglers_32_ranks(raw, job):
    with Engine([job]) as eng:
        got = eng.query("stragglers").to_pylist()
        has_steps = one(eng, "SELECT count(*) FROM tk_steps()") > 0
    assert len(got) == RANKS
    first = got[0]
    # the delayed rank arrives last at all 21; each time it holds the others up by its start - the
    # next-latest start (rank 31, shifted 40 us): 2.98 ms, longer than some gaps between the
    # trace's collectives, so those holds overlap and count once (not 21 x 2.98 ms)
    assert (first["rank"], first["collectives"], first["last_arrivals"]) == (DELAYED, 21, 21)
    holds = [(start + SHIFT_NS[31], start + SHIFT_NS[DELAYED]) for start, *_ in nccl_kernels(raw)]
    assert first["delay_caused_ns"] == _held_once(holds) < 21 * (SHIFT_NS[DELAYED] - SHIFT_NS[31])
    assert first["mean_wait_ns"] == 0
    for row in got[1:]:
        r = row["rank"]
        assert (row["collectives"], row["last_arrivals"], row["delay_caused_ns"]) == (21, 0, 0)
        assert row["mean_wait_ns"] == SHIFT_NS[DELAYED] - SHIFT_NS[r]
    assert sorted(r["rank"] for r in got) == list(range(RANKS))
    # every rank runs the same steps (shifted clocks do not change durations)
    assert {r["step_ns_vs_median"] for r in got} == ({1.0} if has_steps else {None})


# -- nccl: unions, not sums --------------------------------------------------------------------
AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
AG = "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"


def test_nccl_times_are_unions_per_gpu(run_factory):
    # one GPU (pid 1, device 0):
    #   AllReduce on stream 20 [0,100) and [300,400), on stream 21 [50,150)  (concurrent)
    #   AllGather on stream 22 [350,500)
    #   compute on stream 7 [80,120), [380,390), [450,600)
    ks = [(0, 100, 20, AR), (300, 400, 20, AR), (50, 150, 21, AR), (350, 500, 22, AG),
          (80, 120, 7, "gemm"), (380, 390, 7, "gemm"), (450, 600, 7, "gemm")]
    run = run_factory({"kernels": {
        "start_ns": [k[0] for k in ks], "end_ns": [k[1] for k in ks], "duration_ns": [k[1] - k[0] for k in ks],
        "pid": [1] * 7, "device_id": [0] * 7, "stream_id": [k[2] for k in ks],
        "correlation_id": list(range(1, 8)), "name": [k[3] for k in ks]}})
    with Engine([run]) as eng:
        got = {r["collective"]: r for r in eng.query("nccl").to_pylist()}
    ar, ag = got["AllReduce"], got["AllGather"]
    # AllReduce union [0,150) + [300,400) = 250 (the sum of durations would be 300); overlap with
    # compute [80,120) 40 + [380,390) 10 = 50; exposed 200
    assert (ar["count"], ar["nccl_ns"], ar["overlap_ns"], ar["exposed_ns"]) == (3, 250, 50, 200)
    assert ar["overlap_fraction"] == 0.2
    # AllGather [350,500) = 150; overlap [380,390) 10 + [450,500) 50 = 60; exposed 90
    assert (ag["count"], ag["nccl_ns"], ag["overlap_ns"], ag["exposed_ns"]) == (1, 150, 60, 90)
    # the GPU over both types: NCCL union [0,150) + [300,500) = 350 (rows sum to 400); overlap
    # 40 + 10 + 50 = 100; exposed 250 = all-kernel union 450 - compute union 200
    for r in (ar, ag):
        assert (r["gpu_nccl_ns"], r["gpu_overlap_ns"], r["gpu_exposed_ns"]) == (350, 100, 250)


# -- rank_summary, and stragglers' step ratio, on two hand-written ranks -------------------------
def cols(rows, names):
    out = {c: [r[i] for r in rows] for i, c in enumerate(names)}
    if "start_ns" in out and "end_ns" in out:
        out["duration_ns"] = [b - a for a, b in zip(out["start_ns"], out["end_ns"])]
    return out


@pytest.fixture
def two_ranks(run_factory):
    # rank 0 = pid 1, step 0 [0,1000): compute [100,400) stream 7, AllReduce [300,600) stream 2,
    #   memcpy [700,800) launched by a call [650,750) (still running when the GPU went idle at
    #   600: the gap [600,700) is host overhead); gaps [0,100) and [800,1000) have no launch call
    # rank 1 = pid 2, step 0 [0,2000): compute [0,1000), AllReduce [900,1200)
    kn = ("start_ns", "end_ns", "pid", "device_id", "stream_id", "correlation_id", "name")
    return run_factory({
        "kernels": cols([(100, 400, 1, 0, 7, 1, "gemm"), (300, 600, 1, 0, 2, 2, AR),
                         (0, 1000, 2, 0, 7, 1, "gemm"), (900, 1200, 2, 0, 2, 2, AR)], kn),
        "memcpy": cols([(700, 800, 1, 0, 7, 3, 4096, "HtoD")], kn[:6] + ("bytes", "kind")),
        "cuda_api": cols([(650, 750, 1, 1, 3, "cudaMemcpyAsync")],
                         ("start_ns", "end_ns", "pid", "tid", "correlation_id", "name")),
        "nvtx_ranges": cols([(1, "step 0", 0, 1000, 1), (2, "step 0", 0, 2000, 2)],
                            ("range_id", "name", "start_ns", "end_ns", "pid")) | {
            "domain": ["tracekit"] * 2, "tid": [1, 2], "style": ["push/pop"] * 2},
        "processes": {"pid": [1, 2], "name": ["python", "python"], "rank": [0, 1]},
    }, name="two")


def test_rank_summary_against_the_median_rank(two_ranks):
    from tracekit.query.named_queries import get_query

    with Engine([two_ranks]) as eng:
        t = eng.query("rank_summary")
        got = t.to_pylist()
    assert t.column_names == [c.name for c in get_query("rank_summary").columns]
    r0, r1 = got
    # rank 0: busy [100,600) + [700,800) = 600; compute 300; NCCL 300; kernels [100,600) = 500, so
    # exposed = 500 - 300 = 200 (NCCL alone in [400,600)); idle 1000 - 600 = 400, of which the
    # gap [600,700) = 100 waited on the host
    assert (r0["rank"], r0["step"], r0["pid"], r0["step_ns"], r0["gpu_busy_ns"], r0["compute_ns"],
            r0["comm_ns"], r0["exposed_comm_ns"], r0["idle_ns"], r0["host_overhead_ns"]) == \
        (0, 0, 1, 1000, 600, 300, 300, 200, 400, 100)
    # rank 1: busy [0,1200) = 1200; compute 1000; NCCL 300; exposed [1000,1200) = 200; idle 800
    # (the trailing gap: no next activity, not the host's)
    assert (r1["rank"], r1["step_ns"], r1["gpu_busy_ns"], r1["compute_ns"], r1["comm_ns"],
            r1["exposed_comm_ns"], r1["idle_ns"], r1["host_overhead_ns"]) == \
        (1, 2000, 1200, 1000, 300, 200, 800, 0)
    # medians of two ranks are their means: step 1500, busy 900, compute 650, comm 300,
    # exposed 200, idle 600, host 50
    assert (r0["step_ns_vs_median"], r1["step_ns_vs_median"]) == (pytest.approx(2 / 3), pytest.approx(4 / 3))
    assert (r0["gpu_busy_ns_vs_median"], r1["gpu_busy_ns_vs_median"]) == (pytest.approx(2 / 3), pytest.approx(4 / 3))
    assert (r0["compute_ns_vs_median"], r1["compute_ns_vs_median"]) == (pytest.approx(300 / 650), pytest.approx(1000 / 650))
    assert r0["comm_ns_vs_median"] == r1["comm_ns_vs_median"] == 1.0
    assert r0["exposed_comm_ns_vs_median"] == r1["exposed_comm_ns_vs_median"] == 1.0
    assert (r0["idle_ns_vs_median"], r1["idle_ns_vs_median"]) == (pytest.approx(2 / 3), pytest.approx(4 / 3))
    assert (r0["host_overhead_ns_vs_median"], r1["host_overhead_ns_vs_median"]) == (2.0, 0.0)


def test_stragglers_and_skew_on_two_ranks(two_ranks):
    from tracekit.query.named_queries import get_query

    with Engine([two_ranks]) as eng:
        skew = eng.query("collective_skew")
        strag = eng.query("stragglers")
    for name, t in (("collective_skew", skew), ("stragglers", strag)):
        assert t.column_names == [c.name for c in get_query(name).columns]
    # the AllReduce starts at 300 on rank 0 and 900 on rank 1: skew 600, rank 1 last, its kernel
    # (300 ns) is the transfer; no collectives row, so no process group and no size
    [s] = skew.to_pylist()
    assert (s["process_group"], s["collective"], s["seq"], s["ranks"], s["first_start_ns"], s["last_start_ns"],
            s["skew_ns"], s["last_rank"], s["transfer_ns"], s["bytes"], s["algo_bw_bytes_per_s"]) == \
        (None, "AllReduce", 1, 2, 300, 900, 600, 1, 300, None, None)
    r1, r0 = strag.to_pylist()
    # rank 1 held the collective up 600 ns alone; rank 0 waited 600 ns; mean step times 2000 and
    # 1000 against their median 1500
    assert (r1["rank"], r1["collectives"], r1["last_arrivals"], r1["delay_caused_ns"], r1["mean_wait_ns"]) == \
        (1, 1, 1, 600, 0)
    assert (r0["rank"], r0["collectives"], r0["last_arrivals"], r0["delay_caused_ns"], r0["mean_wait_ns"]) == \
        (0, 1, 0, 0, 600)
    assert (r1["step_ns_vs_median"], r0["step_ns_vs_median"]) == (pytest.approx(4 / 3), pytest.approx(2 / 3))


# -- a real 2-process nsys export ----------------------------------------------------------------
def test_collective_skew_on_a_two_process_nsys_export(tmp_path):
    """The 2-GPU H100 export (two processes, pids 111 and 112, one GPU each) holds no NCCL
    kernel; its 30 + 30 `vectorized_gather_kernel` launches (the same program step on each
    process) are renamed to an NCCL AllGather kernel, keeping their real timestamps. The skews
    must equal the raw start differences of the i-th kernel on each process, read here with sqlite3."""
    import sqlite3

    from conftest import edited_export

    nccl = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    src = edited_export(tmp_path, "nsys2026_h100_2gpu_pytorch_slice", f"""
        INSERT INTO StringIds (id, value) SELECT max(id) + 1, '{nccl}' FROM StringIds;
        UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = (SELECT max(id) FROM StringIds),
               shortName = (SELECT max(id) FROM StringIds) WHERE demangledName = 331029;""")
    con = sqlite3.connect(src)
    raw = {}
    for gpid, start, end in con.execute(
            "SELECT globalPid, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE demangledName = "
            "(SELECT max(id) FROM StringIds) ORDER BY start"):
        raw.setdefault((gpid >> 24) & 0xFFFFFF, []).append((start, end))
    con.close()
    assert sorted(raw) == [111, 112] and len(raw[111]) == len(raw[112]) == 30
    run = convert([src], tmp_path / "run")
    with Engine([run]) as eng:
        known = dict(tuple(r.values()) for r in eng.sql("SELECT pid, rank FROM processes WHERE rank IS NOT NULL").to_pylist())
        got = eng.query("collective_skew").to_pylist()
    rank = {pid: known.get(pid, i) for i, pid in enumerate((111, 112))}  # no ranks recorded: ordinals
    assert len(got) == 30
    for i, row in enumerate(got):
        (s1, e1), (s2, e2) = raw[111][i], raw[112][i]
        last = 111 if s1 > s2 or (s1 == s2 and rank[111] < rank[112]) else 112  # ties: lowest rank
        assert (row["collective"], row["seq"], row["ranks"], row["process_group"]) == ("AllGather", i + 1, 2, None)
        assert (row["first_start_ns"], row["last_start_ns"], row["skew_ns"]) == (min(s1, s2), max(s1, s2), abs(s1 - s2))
        assert (row["last_rank"], row["transfer_ns"]) == (rank[last], (e1 - s1) if last == 111 else (e2 - s2))


# -- PyTorch's 'Seq': ranks whose traces start at different collectives still match ---------------
@pytest.mark.slow
def test_seq_argument_matches_ranks_with_different_windows(raw, tmp_path):
    """Four ranks; every record_param_comms operator of process group 0 gets a 'Seq' argument
    (its position in the group, as PyTorch >= 2.x writes it: the same on every rank), and rank 3's
    trace lacks the first collective (its profiler window started one collective later). With
    Seq, the instances still pair; matching by order would pair rank 3's second Broadcast with
    the others' first."""
    shifts = [0, 10_000, 25_000, 5_000]
    doc = json.loads(json.dumps(raw, default=str), parse_float=Decimal)
    ops = sorted((e for e in doc["traceEvents"] if e.get("name") == "record_param_comms"
                  and e["args"].get("Process Group Name") == "0"), key=lambda e: Decimal(e["ts"]))
    seq_of = {}
    for i, e in enumerate(ops):
        e["args"]["Seq"] = i + 1
        seq_of[e["args"]["External id"]] = i + 1
    for e in doc["traceEvents"]:
        if "ts" in e:
            e["ts"] = Decimal(e["ts"])
    kernels = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel" and NCCL_NAME.search(e["name"])),
                     key=lambda e: e["ts"])
    first_ext = kernels[0]["args"]["External id"]
    paths = []
    for r in range(4):
        d = dict(doc)
        if r == 3:  # drop the first collective: its kernel and its operator
            d["traceEvents"] = [e for e in doc["traceEvents"]
                                if not ((e.get("args") or {}).get("External id") == first_ext
                                        and (e.get("cat") == "kernel" or e.get("name") == "record_param_comms"))]
        paths.append(write_rank(d, r, shifts[r], tmp_path / f"rank{r}.json"))
    run = convert(paths, tmp_path / "run", clock_model="none")
    with Engine([run]) as eng:
        got = eng.query("collective_skew").to_pylist()
    base = int(raw["baseTimeNanoseconds"])
    assert len(got) == 21
    for row, k in zip(got, kernels):
        members = [0, 1, 2] if k["args"]["External id"] == first_ext else [0, 1, 2, 3]
        start = base + int(k["ts"] * 1000)
        assert (row["seq"], row["ranks"], row["first_start_ns"], row["last_start_ns"], row["last_rank"]) == \
            (seq_of[k["args"]["External id"]], len(members), start + min(shifts[m] for m in members),
             start + max(shifts[m] for m in members), 2)
        assert row["skew_ns"] == 25_000


def test_rank_summary_32_ranks(job):
    # every rank is the same trace on a shifted clock: each step's numbers are equal on all ranks,
    # so every ratio to the median rank is exactly 1. Steps: the trace's ProfilerStep#4-6
    with Engine([job]) as eng:
        steps = one(eng, "SELECT count(*) FROM tk_steps() WHERE NOT is_warmup")
        got = eng.query("rank_summary").to_pylist()
        util = {(r["pid"], r["step_number"]): r["busy_ns"] for r in eng.query("gpu_utilization").to_pylist()
                if r["scope"] == "step"}
    assert steps == len(got) == 3 * RANKS
    assert {(r["step"], r["step_source"]) for r in got} == {(4, "profiler"), (5, "profiler"), (6, "profiler")}
    assert all(r["gpu_busy_ns"] == util[(r["pid"], r["step"])] for r in got)  # one GPU per rank
    ratios = [k for k in (got[0] if got else {}) if k.endswith("_vs_median")]
    for r in got:
        assert r["gpu_busy_ns"] > 0 and r["comm_ns"] > 0
        assert all(r[k] in (1.0, None) for k in ratios), r
    assert sorted({r["rank"] for r in got}) == (list(range(RANKS)) if got else [])


def test_a_tie_for_last_is_no_last_arrival(run_factory):
    # ranks 0 and 1 start their AllReduce at the same time: skew 0; collective_skew names the lowest
    # rank as last (and its duration, 50, as the transfer), but neither rank counts a last arrival
    kn = ("start_ns", "end_ns", "pid", "device_id", "stream_id", "correlation_id", "name")
    run = run_factory({"kernels": cols([(100, 150, 1, 0, 2, 1, AR), (100, 180, 2, 0, 2, 1, AR)], kn),
                       "processes": {"pid": [1, 2], "rank": [0, 1]}})
    with Engine([run]) as eng:
        [s] = eng.query("collective_skew").to_pylist()
        strag = eng.query("stragglers").to_pylist()
    assert (s["ranks"], s["skew_ns"], s["last_rank"], s["transfer_ns"]) == (2, 0, 0, 50)
    assert [(r["rank"], r["collectives"], r["last_arrivals"], r["delay_caused_ns"], r["mean_wait_ns"])
            for r in strag] == [(0, 1, 0, 0, 0), (1, 1, 0, 0, 0)]
