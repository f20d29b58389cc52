"""`tracekit timeline`: Chrome trace-event JSON for Perfetto, checked against the run's own tables.

The checker here reads the written file with the json module (ts/dur parsed as Decimal, so the
microsecond values convert back to integer ns exactly) and verifies, independently of the
writer: every kernel of the run is one complete event of cat `kernel` with its exact duration;
complete events nest on every (pid, tid) track; every process and track is named; flows pair up.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import FIXTURES
from helpers.jobs import rank8_run  # noqa: F401  (module fixture: the 8-rank Kineto job)

from tracekit.cli import run as main
from tracekit.errors import InputError
from tracekit.query.engine import Engine
from tracekit.timeline import Lanes, us, write_timeline

H100 = "nsys2026_h100_2gpu_pytorch_slice"
V100 = "nsys2020.5_2xv100_p2p_nvlink"
NCCL_TRACE = FIXTURES / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"


def load(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal)


def ns(v) -> int:
    """A Chrome trace microsecond value as integer ns; it must be exact to the ns."""
    x = Decimal(v) * 1000
    assert x == x.to_integral_value(), v
    return int(x)


def check_nesting(doc: dict) -> int:
    """Assert complete events nest on every (pid, tid) track; returns the number of tracks."""
    tracks = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] in ("X", "B"):
            end = ns(e["ts"]) + ns(e["dur"]) if e["ph"] == "X" else None
            tracks[(e["pid"], e["tid"])].append((ns(e["ts"]), end))
    for key, evs in tracks.items():
        evs.sort(key=lambda se: (se[0], -(se[1] if se[1] is not None else 1 << 62)))
        stack = []
        for s, e in evs:
            e = 1 << 62 if e is None else e
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1], f"track {key}: event [{s}, {e}) overlaps one ending at {stack[-1]}"
            stack.append(e)
    return len(tracks)


def check_named(doc: dict) -> None:
    meta = {(e["name"], e["pid"], e.get("tid")) for e in doc["traceEvents"] if e["ph"] == "M"}
    named_p = {p for n, p, _ in meta if n == "process_name"}
    named_t = {(p, t) for n, p, t in meta if n == "thread_name"}
    for e in doc["traceEvents"]:
        if e["ph"] == "M":
            continue
        assert e["pid"] in named_p, e
        if e["ph"] != "C":
            assert (e["pid"], e["tid"]) in named_t, e
    names = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert all(n.strip() for n in names) and len(names) == len(set(names))


def check_kernels(doc: dict, run: Path) -> tuple[int, int]:
    """Every kernel row is exactly one `kernel` complete event with its name and duration;
    returns (kernel count, summed ns)."""
    origin = doc["otherData"]["time_origin_ns"]
    got = Counter((e["name"], origin + ns(e["ts"]), ns(e["dur"])) for e in doc["traceEvents"]
                  if e.get("cat") == "kernel")
    assert all(e["ph"] == "X" for e in doc["traceEvents"] if e.get("cat") == "kernel")
    with Engine([run]) as eng:
        rows = eng.sql("SELECT name, start_ns, end_ns - start_ns AS d FROM kernels").to_pylist()
        total = int(eng.sql("SELECT sum(end_ns - start_ns) AS t FROM kernels").to_pylist()[0]["t"])
    want = Counter((r["name"], r["start_ns"], r["d"]) for r in rows)
    assert got == want
    written = sum(d for (_, _, d), n in got.items() for _ in range(n))
    assert abs(written - total) <= total * 0.001 and written == total  # the issue asks 0.1%; it is exact
    return len(rows), total


def check_flows(doc: dict) -> int:
    starts = Counter(e["id"] for e in doc["traceEvents"] if e["ph"] == "s")
    ends = Counter(e["id"] for e in doc["traceEvents"] if e["ph"] == "f")
    assert all(n == 1 for n in starts.values()) and all(n == 1 for n in ends.values())
    assert set(starts) <= set(ends)  # every arrow drawn from a launch lands on GPU work
    return len(starts)


@pytest.mark.parametrize("stem,kernels,flows", [(H100, 3442, 2092), (V100, 3003, 15016)])
def test_nsys_fixtures_timeline(nsys_run, tmp_path, stem, kernels, flows):
    run = nsys_run(stem)
    out = tmp_path / "t.json.gz"
    s = write_timeline(run, out)
    doc = load(out)
    n, total = check_kernels(doc, run)
    assert n == kernels == s["kernels"] and s["kernel_ns"] == total
    assert check_flows(doc) == flows == s["flows"]
    assert check_nesting(doc) == s["tracks"]
    check_named(doc)
    procs = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    if stem == H100:  # two processes, one GPU each (the 1 s slice's processes 111 and 112)
        assert procs == ["python3 pid 111 · GPU 0", "python3 pid 112 · GPU 1"]
    else:  # one process driving devices 0 and 3
        assert procs == ["nsys-launcher pid 71914 · GPU 0 Tesla V100-SXM2-16GB · GPU 3 Tesla V100-SXM2-16GB"]
    # every row of the timeline tables is written once
    with Engine([run]) as eng:
        counts = {t: eng.sql(f"SELECT count(*) AS n FROM {t}").to_pylist()[0]["n"]
                  for t in ("memcpy", "memset", "cuda_api", "cuda_sync", "nvtx_ranges")}
    cats = Counter(e.get("cat") for e in doc["traceEvents"] if e["ph"] in ("X", "B"))
    assert (cats["memcpy"], cats["memset"], cats["cuda_api"], cats["cuda_sync"], cats["nvtx"]) == (
        counts["memcpy"], counts["memset"], counts["cuda_api"], counts["cuda_sync"], counts["nvtx_ranges"])


@pytest.mark.slow
def test_eight_rank_kineto_job(rank8_run, tmp_path):  # noqa: F811 - the fixture imported above
    out = tmp_path / "t.json"
    s = write_timeline(rank8_run, out)
    doc = load(out)
    n, total = check_kernels(doc, rank8_run)
    # 2700 kernels per rank in the raw trace, 8 copies
    assert n == s["kernels"] == 8 * 2700
    check_nesting(doc)
    check_named(doc)
    check_flows(doc)
    procs = sorted(e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name")
    assert procs == [f"rank {r} · python3.10 pid {2910249 + r} · GPU {r} NVIDIA A100-PG509-200" for r in range(8)]
    # NCCL kernels carry their collective's size (collectives table, 21 per rank)
    nccl = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["args"]["nccl"]]
    assert len(nccl) == 8 * 21 and all(e["args"]["message_bytes"] > 0 for e in nccl)
    # --ranks keeps those processes only
    out2 = tmp_path / "r.json"
    s2 = write_timeline(rank8_run, out2, ranks="0,3")
    doc2 = load(out2)
    assert {e["args"]["name"].split(" · ")[0] for e in doc2["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_name"} == {"rank 0", "rank 3"}
    assert s2["kernels"] == 2 * 2700


def test_window_and_cut(nsys_run, tmp_path):
    run = nsys_run(H100)
    with Engine([run]) as eng:
        ks = eng.sql("SELECT start_ns, end_ns FROM kernels ORDER BY start_ns").to_pylist()
    lo, hi = ks[100]["start_ns"], ks[200]["start_ns"]
    s = write_timeline(run, tmp_path / "w.json", start_ns=lo, end_ns=hi)
    # kernels overlapping [lo, hi), written whole
    assert s["kernels"] == sum(1 for k in ks if k["start_ns"] < hi and k["end_ns"] >= lo)
    assert s["window"] == (lo, hi)
    # relative window: +N from the first event
    doc = load(tmp_path / "w.json")
    assert doc["otherData"]["window_start_ns"] == lo
    # the cut: at most max_events events, a message saying where
    s = write_timeline(run, tmp_path / "c.json", max_events=1000)
    assert s["events"] <= 1000 and s["cut"]["events_total"] == 27190 and s["cut"]["events_kept"] == s["events"]
    doc = load(tmp_path / "c.json")
    assert "cut at" in doc["otherData"]["cut"]
    check_nesting(doc)


def test_lanes_keep_every_event_and_nest(run_factory, tmp_path):
    # stream 5: kernel A [0, 100), B [50, 150) overlaps A's end (programmatic dependent launch),
    # C [60, 70) inside both; thread 9: start/end-like overlap of two push/pop ranges [0, 10), [5, 20)
    name = ["A", "B", "C"]
    run = run_factory({
        "kernels": {"start_ns": [0, 50, 60], "end_ns": [100, 150, 70], "duration_ns": [100, 100, 10],
                    "pid": [1] * 3, "device_id": [0] * 3, "stream_id": [5] * 3, "correlation_id": [1, 2, 3],
                    "name": name},
        "nvtx_ranges": {"start_ns": [0, 5, 30], "end_ns": [10, 20, None], "duration_ns": [10, 15, None],
                        "is_open": [False, False, True], "range_id": [1, 2, 3], "pid": [1] * 3, "tid": [9] * 3,
                        "style": ["push/pop"] * 3, "domain": [""] * 3, "name": ["r1", "r2 $x^2$", "open"]},
    })
    out = tmp_path / "l.json"
    s = write_timeline(run, out)
    doc = load(out)
    check_nesting(doc)
    check_named(doc)
    ev = {e["name"]: e for e in doc["traceEvents"] if e["ph"] in ("X", "B")}
    assert set(ev) == {"A", "B", "C", "r1", "r2 $x^2$", "open"}
    # A on the stream's lane 0; B cannot nest in A: lane 1; C nests in B (the innermost open one)
    assert ev["A"]["tid"] != ev["B"]["tid"] and ev["C"]["tid"] == ev["B"]["tid"]
    assert ev["r1"]["tid"] != ev["r2 $x^2$"]["tid"] and ev["open"]["ph"] == "B"
    assert s["overlap_tracks"] == 2
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert {"GPU 0 stream 5", "GPU 0 stream 5 (overlap 1)", "thread 9", "thread 9 (overlap 1)"} <= names
    assert (ev["B"]["ts"], ev["B"]["dur"]) == (Decimal("0.050"), Decimal("0.100"))


def test_lanes_and_us_units():
    lanes = Lanes()
    assert [lanes.place(s, e) for s, e in [(0, 10), (2, 4), (3, 12), (5, 6), (12, 13), (12, 12)]] == [0, 0, 1, 1, 0, 0]
    assert (us(0), us(1), us(1234567), us(-1500)) == ("0.000", "0.001", "1234.567", "-1.500")


def test_cli_errors(nsys_run, tmp_path, capsys):
    run = nsys_run(H100)
    assert main(["timeline", str(run), "-o", str(tmp_path / "a.json")]) == 0
    assert "open it at https://ui.perfetto.dev" in capsys.readouterr().err
    assert main(["timeline", str(run), "-o", str(tmp_path / "a.json")]) == 2  # exists
    assert "already exists" in capsys.readouterr().err
    assert main(["timeline", str(run), "-o", str(tmp_path / "b.json"), "--step", "9999"]) == 2
    assert "no step 9999 in the run" in capsys.readouterr().err
    assert main(["timeline", str(run), "-o", str(tmp_path / "b.txt")]) == 2
    assert main(["timeline", str(tmp_path / "nope"), "-o", str(tmp_path / "b.json")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert main(["timeline", str(run), "-o", str(tmp_path / "c.json"), "--max-events", "500"]) == 0
    assert "warning: --max-events 500" in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists() and not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(InputError):
        write_timeline(run, tmp_path / "d.json", ranks="x")
    # never written inside the run folder it reads; a missing parent folder is made
    with pytest.raises(InputError, match="inside the run folder"):
        write_timeline(run, run / "t.json")
    assert write_timeline(run, tmp_path / "new" / "t.json.gz")["kernels"] == 3442


def test_step_and_relative_windows(run_factory, tmp_path):
    from helpers.runs import steps_run

    run = steps_run(run_factory)  # 2 ranks, steps 0-3 of 1 ms, one kernel [200, 600) us into each step
    s = write_timeline(run, tmp_path / "s2.json", step=2)
    assert s["window"] == (2_000_000, 3_000_000) and s["kernels"] == 2  # one per rank
    doc = load(tmp_path / "s2.json")
    ks = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert {doc["otherData"]["time_origin_ns"] + ns(e["ts"]) for e in ks} == {2_200_000}
    # the same window relative to the first event (t = 0 here), and one rank only
    s = write_timeline(run, tmp_path / "rel.json", start_ns="+2000000", end_ns="+3000000", ranks="1")
    assert s["window"] == (2_000_000, 3_000_000) and s["kernels"] == 1 and s["processes"] == 1
    with pytest.raises(InputError, match="no step 9 in the run"):
        write_timeline(run, tmp_path / "s9.json", step=9)


def test_gpu_metrics_become_counter_tracks(run_factory, tmp_path):
    # two samples of one metric on GPU 0 and one on GPU 1, beside one kernel; the window cuts the third
    run = run_factory({
        "kernels": {"start_ns": [1000], "end_ns": [3000], "duration_ns": [2000], "pid": [7], "device_id": [0],
                    "stream_id": [1], "correlation_id": [1], "name": ["k"]},
        "gpu_metrics": {"timestamp_ns": [1000, 2000, 2500, 9000], "gpu_id": [0, 0, 1, 0], "device_id": [0, 0, 1, 0],
                        "metric_name": ["SM Active [Throughput %]"] * 4, "value": [10.0, 55.5, 3.0, 1.0]},
    })
    s = write_timeline(run, tmp_path / "c.json", end_ns=5000)
    doc = load(tmp_path / "c.json")
    check_named(doc)
    c = [(e["pid"], ns(e["ts"]), e["args"]["value"]) for e in doc["traceEvents"] if e["ph"] == "C"]
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted((procs[p], t, v) for p, t, v in c) == [
        ("GPU 0 metrics (device 0)", 0, Decimal("10.0")), ("GPU 0 metrics (device 0)", 1000, Decimal("55.5")),
        ("GPU 1 metrics (device 1)", 1500, Decimal("3.0"))]
    assert s["by_cat"]["gpu_metrics"] == 3 and s["processes"] == 3
