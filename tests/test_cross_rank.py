"""Cross-rank queries (collective_skew, stragglers, rank_summary) and the union-based nccl times.

The 32-rank job is built here from the shared NCCL Kineto trace (rank 0 of a 2-rank A100 run):
each copy gets its own rank (distributedInfo), host pid and a clock shifted by a known number of
nanoseconds; expected values are recomputed from the raw JSON with the json module (timestamps as
decimals) and the shifts."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal

import pytest

from conftest import FIXTURES
from tracekit.convert import convert
from tracekit.engine import Engine

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
    paths = [write_rank(raw, r, SHIFT_NS[r], d / f"trace_rank{r}.json") for r in range(RANKS)]
    return convert(paths, d / "run")


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
            "skew_ns": spread, "last_rank": DELAYED, "transfer_ns": dur, "bytes": size,
            "algo_bw_bytes_per_s": pytest.approx(size / dur * 1e9, rel=1e-12),
            "bus_bw_bytes_per_s": pytest.approx(size / dur * 1e9 * factor, rel=1e-12)}
    assert seq == {"AllReduce": 15, "Broadcast": 6}


def test_stragglers_32_ranks(job):
    with Engine([job]) as eng:
        got = eng.query("stragglers").to_pylist()
        has_steps = one(eng, "SELECT count(*) FROM tk_steps()") > 0
    assert len(got) == RANKS
    first = got[0]
    # the delayed rank arrives last at all 21; each time it holds the others up by its start - the
    # next-latest start (rank 31, shifted 40 us)
    assert (first["rank"], first["collectives"], first["last_arrivals"]) == (DELAYED, 21, 21)
    assert first["delay_caused_ns"] == 21 * (SHIFT_NS[DELAYED] - SHIFT_NS[31])
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
