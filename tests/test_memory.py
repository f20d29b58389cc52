"""Memory over time: Kineto [memory] events -> memory_events -> memory_summary, memory_at_peak,
memory_timeline, checked against an independent reading of the raw JSON (json module, a replay
of the allocations in Python) on a real PyTorch profiler trace recorded here with
profile_memory=True, and against hand arithmetic on a small GPU trace written here.

Of the shared Kineto fixtures only the H100 TimeSformer trace holds [memory] events (checked in
test_fixtures_have_no_memory; its memory_events are recounted from the raw JSON), so the real
CPU trace is made by the installed torch in this session."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import KINETO_FIXTURES

from tracekit.convert import convert
from tracekit.query import Engine

torch = pytest.importorskip("torch")


def _record(path: Path, steps: int = 4) -> Path:
    """A CPU training loop under the torch profiler with profile_memory=True; the model and the
    first batch exist before the profiler starts (memory allocated before the trace)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    kept = torch.randn(64, 256)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
        for i in range(steps):
            with record_function(f"step {i}"):
                with record_function("data"):
                    x = torch.randn(64, 256) + kept
                    y = torch.randint(0, 10, (64,))
                with record_function("forward"):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                with record_function("backward"):
                    loss.backward()
                with record_function("optimizer"):
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            del x, y, loss
    prof.export_chrome_trace(str(path))
    return path


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    base = tmp_path_factory.mktemp("memtrace")
    trace = _record(base / "train.pt.trace.json")
    gz = base / "train.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(trace.read_bytes()))
    run = convert([gz], base / "run")
    return trace, run


def _q(run: Path, name: str, **params):
    with Engine([run]) as eng:
        return eng.query(name, {k: str(v) for k, v in params.items()}).to_pylist()


def _raw_memory(trace: Path):
    doc = json.loads(trace.read_text(), parse_float=Decimal)
    ev = doc["traceEvents"]
    mem = [(i, e) for i, e in enumerate(ev) if e.get("ph") == "i" and e.get("name") == "[memory]"]
    ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    return doc, mem, ops


def _device(a) -> str:
    return "cpu" if a["Device Type"] == 0 else f"cuda:{a['Device Id']}"


# the shared Kineto fixtures recorded with profile_memory=True (the others have no [memory] event).
# The fixtures README says both new traces carry [memory] events; the MI300X trace has none.
WITH_MEMORY = {"kineto_h100_timesformer_infer.json.gz"}


def test_fixtures_have_no_memory():
    """The shared Kineto fixtures other than WITH_MEMORY were recorded without profile_memory: no
    [memory] events; they convert with memory_events not captured (and the memory queries say why
    on an empty result)."""
    for p in KINETO_FIXTURES:
        with gzip.open(p, "rt") as f:
            assert ('"[memory]"' in f.read()) == (p.name in WITH_MEMORY), p.name


@pytest.mark.parametrize("name", sorted(WITH_MEMORY))
def test_fixture_memory_events_equal_raw(name, kineto_run):
    """memory_events of a shared fixture with [memory] events against a recount of the raw JSON:
    per (device, action) the number of events, the summed abs(Bytes) and the largest
    'Total Allocated'."""
    path = next(p for p in KINETO_FIXTURES if p.name == name)
    with gzip.open(path, "rt") as f:
        ev = json.load(f, parse_float=Decimal)["traceEvents"]
    mem = [e for e in ev if e.get("ph") == "i" and e.get("name") == "[memory]"]
    assert mem
    want = defaultdict(lambda: [0, 0, 0])
    for e in mem:
        a = e["args"]
        w = want[(_device(a), "alloc" if a["Bytes"] > 0 else "free")]
        w[0] += 1
        w[1] += abs(int(a["Bytes"]))
        w[2] = max(w[2], int(a["Total Allocated"]))
    run = kineto_run(name.replace(".json.gz", ""))
    with Engine([run]) as eng:
        t = eng.sql("SELECT CASE WHEN device_type = 'cpu' THEN 'cpu' ELSE 'cuda:' || device_id END, "
                    "action, count(*), sum(bytes), max(total_allocated_bytes) FROM memory_events "
                    "GROUP BY 1, 2").to_pylist()
    got = {tuple(r.values())[:2]: [int(v) for v in tuple(r.values())[2:]] for r in t}
    assert got == dict(want)
    assert sum(v[0] for v in got.values()) == len(mem)


def test_summary_peaks_equal_raw(real):
    trace, run = real
    _, mem, _ = _raw_memory(trace)
    assert len(mem) > 100
    want = defaultdict(lambda: {"alloc": 0, "free": 0, "bytes": 0, "peak": 0, "res": 0})
    for _, e in mem:
        a = e["args"]
        w = want[(int(e["pid"]), _device(a))]
        w["alloc" if a["Bytes"] > 0 else "free"] += 1
        w["bytes"] += max(a["Bytes"], 0)
        w["peak"] = max(w["peak"], a["Total Allocated"])
        w["res"] = max(w["res"], a["Total Reserved"])
    rows = [r for r in _q(run, "memory_summary") if r["scope"] == "run"]
    got = {(r["pid"], r["device"]): {"alloc": r["allocations"], "free": r["frees"],
                                     "bytes": r["allocated_total_bytes"],
                                     "peak": r["peak_allocated_bytes"], "res": r["peak_reserved_bytes"]}
           for r in rows}
    assert got == dict(want)
    steps = [r for r in _q(run, "memory_summary") if r["scope"] == "step"]
    assert sorted(r["step"] for r in steps) == [0, 1, 2, 3]
    assert max(r["peak_allocated_bytes"] for r in steps) == rows[0]["peak_allocated_bytes"]
    assert rows[0]["peak_phase"] in ("forward", "backward", "optimizer")


def _containing(ops, e):
    """Outermost cpu_op of e's thread whose [ts, ts + dur] holds e's ts (brute force)."""
    t = Decimal(str(e["ts"]))
    hold = [o for o in ops if o["pid"] == e["pid"] and o["tid"] == e["tid"]
            and Decimal(str(o["ts"])) <= t <= Decimal(str(o["ts"])) + Decimal(str(o.get("dur", 0)))]
    return min(hold, key=lambda o: (Decimal(str(o["ts"])), -Decimal(str(o.get("dur", 0)))))["name"] if hold else None


def test_at_peak_adds_up_and_matches_replay(real):
    """Replay the allocations in time order: the blocks live at the first peak event, grouped by
    the outermost operator around their allocation (found by brute force over the raw cpu_op
    events), equal memory_at_peak's 'operator' rows; every grouping sums to the peak."""
    trace, run = real
    _, mem, ops = _raw_memory(trace)
    order = sorted(mem, key=lambda ie: (Decimal(str(ie[1]["ts"])), ie[0]))
    peak = max(e["args"]["Total Allocated"] for _, e in order)
    live: dict[int, tuple[int, dict]] = {}
    first = order[0][1]["args"]
    baseline = first["Total Allocated"] - first["Bytes"]
    freed_before = 0
    for _, e in order:
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = (a["Bytes"], e)
        elif a["Addr"] in live:
            del live[a["Addr"]]
        else:
            freed_before += -a["Bytes"]  # a block allocated before the trace
        if a["Total Allocated"] == peak:
            break
    by_op = Counter()
    for size, e in live.values():
        by_op[_containing(ops, e) or "(no operator)"] += size
    if baseline - freed_before:
        by_op["(before the trace)"] = baseline - freed_before
    rows = _q(run, "memory_at_peak")
    got = {r["name"]: r["bytes"] for r in rows if r["by"] == "operator"}
    assert got == dict(by_op)
    for by in ("operator", "phase", "size"):
        assert sum(r["bytes"] for r in rows if r["by"] == by) == peak
    assert {r["name"] for r in rows if r["by"] == "phase"} <= {"data", "forward", "backward", "optimizer", "(no phase)", "(before the trace)"}


def test_timeline_max_is_peak(real):
    trace, run = real
    _, mem, _ = _raw_memory(trace)
    rows = _q(run, "memory_timeline", bins=50)
    assert 1 <= max(r["bin"] for r in rows) + 1 <= 50
    assert sum(r["events"] for r in rows) == len(mem)
    assert max(r["max_allocated_bytes"] for r in rows) == max(e["args"]["Total Allocated"] for _, e in mem)
    last = max(mem, key=lambda ie: (Decimal(str(ie[1]["ts"])), ie[0]))[1]["args"]["Total Allocated"]
    assert max(rows, key=lambda r: r["bin"])["allocated_bytes"] == last


# --- a small GPU trace with hand arithmetic -------------------------------------------------

def _gpu_trace(path: Path) -> Path:
    """One process, one GPU. 1000 bytes (weights) were allocated before the profiler started.
    step 0 [0, 100) us: forward [0, 40) with aten::linear [5, 30); backward [40, 90) with
    autograd::engine::evaluate_function: MmBackward0 [45, 80) on thread 2 (the autograd thread)."""
    def mem(ts, tid, addr, size, total, reserved):
        return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": tid,
                "ts": ts, "args": {"Addr": addr, "Bytes": size, "Total Allocated": total,
                                   "Total Reserved": reserved, "Device Type": 1, "Device Id": 0}}

    def x(name, cat, ts, dur, tid=1):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}

    ev = [
        x("step 0", "user_annotation", 0, 100), x("forward", "user_annotation", 0, 40),
        x("aten::linear", "cpu_op", 5, 25), x("aten::empty", "cpu_op", 10, 2),
        x("backward", "user_annotation", 40, 50),
        x("autograd::engine::evaluate_function: MmBackward0", "cpu_op", 45, 35, tid=2),
        # totals: 1000 before; +400 = 1400; +600 = 2000; -400 = 1600; +300 (bwd) = 1900 (peak 2000 is earlier)
        mem(11, 1, 0xA000, 400, 1400, 2097152),
        mem(20, 1, 0xB000, 600, 2000, 2097152),
        mem(50, 2, 0xA000, -400, 1600, 2097152),
        mem(60, 2, 0xC000, 300, 1900, 4194304),
        {"ph": "i", "cat": "cpu_instant_event", "name": "[OutOfMemory]", "pid": 1, "tid": 2, "ts": 70,
         "args": {"Bytes": 1 << 40, "Total Allocated": 1900, "Total Reserved": 4194304,
                  "Device Type": 1, "Device Id": 0}},
        mem(95, 1, 0xD000, -1000, 900, 4194304),  # the weights, allocated before the trace
    ]
    path.write_text(json.dumps({"traceEvents": ev, "baseTimeNanoseconds": 0}))
    return path


def test_gpu_golden(tmp_path):
    run = convert([_gpu_trace(tmp_path / "gpu.json")], tmp_path / "run")
    s = next(r for r in _q(run, "memory_summary") if r["scope"] == "run")
    assert (s["device"], s["peak_allocated_bytes"], s["peak_reserved_bytes"]) == ("cuda:0", 2000, 4194304)
    assert (s["peak_at_ns"], s["peak_step"], s["peak_phase"], s["peak_op"]) == (20_000, 0, "forward", "aten::linear")
    assert s["peak_inner_op"] == "aten::linear"  # ts 20 is after aten::empty [10, 12]
    assert (s["allocations"], s["frees"], s["allocated_total_bytes"], s["oom_events"]) == (3, 2, 1300, 1)
    assert (s["start_allocated_bytes"], s["end_allocated_bytes"]) == (1000, 900)
    rows = _q(run, "memory_at_peak")
    # live at the peak (ts 20): 0xA000 400 + 0xB000 600, both from aten::linear in forward; 1000 before
    want_op = {"aten::linear": 1000, "(before the trace)": 1000}
    assert {r["name"]: r["bytes"] for r in rows if r["by"] == "operator"} == want_op
    assert {r["name"]: r["bytes"] for r in rows if r["by"] == "phase"} == {"forward": 1000, "(before the trace)": 1000}
    assert {r["name"]: r["share"] for r in rows if r["by"] == "size"} == {"< 1 MiB": 0.5, "(before the trace)": 0.5}
    with Engine([run]) as eng:
        ctx = {r["ord"]: r for r in eng.sql("SELECT * FROM tk_memory_context()").to_pylist()}
    assert ctx[4]["phase"] == "backward" and ctx[4]["op"] == "autograd::engine::evaluate_function: MmBackward0"


def test_bad_memory_event_is_counted(tmp_path):
    p = _gpu_trace(tmp_path / "gpu.json")
    doc = json.loads(p.read_text())
    doc["traceEvents"][6]["args"]["Bytes"] = "lots"
    p.write_text(json.dumps(doc))
    run = convert([p], tmp_path / "run")
    man = json.loads((run / "manifest.json").read_text())
    assert any("1 [memory] event(s) have no numeric Bytes" in w for w in man["warnings"])
    assert _q(run, "memory_summary")[0]["allocations"] == 2


def test_no_memory_events_not_captured(kineto_run):
    man = json.loads((kineto_run("kineto_a100_alexnet") / "manifest.json").read_text())
    assert "profile_memory" in man["not_captured"]["memory_events"]
    assert _q(kineto_run("kineto_a100_alexnet"), "memory_summary") == []


# --- tracekit collect --profile-memory, end to end on the CPU -------------------------------

def test_runner_command_carries_profile_memory():
    from tracekit.collect import commands as C

    w = C.Workload("resnet_cifar")
    cmd = C.runner_command(w, "r.json", torch_profile="t", profile_memory=True)
    assert cmd[-3:] == ["--torch-profile", "t", "--profile-memory"]
    assert "--profile-memory" not in C.runner_command(w, "r.json", profile_memory=True)


def test_profile_memory_refused_under_ncu(tmp_path, capsys):
    from tracekit.cli import run as cli

    assert cli(["collect", "resnet_cifar", "-o", str(tmp_path / "r"), "--profiler", "ncu",
                "--profile-memory"]) == 2
    assert "--profile-memory: ncu does not record memory" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_collect_profile_memory_end_to_end(tmp_path):
    """`tracekit collect --profiler torch --profile-memory`: the raw trace (kept with --keep-raw)
    read with json gives the same run-wide peaks as memory_summary; memory_at_peak adds up; the
    peak is in a measured step (the profiler records the measured steps only)."""
    from tracekit.cli import run as cli

    out = tmp_path / "run"
    assert cli(["collect", "resnet_cifar", "-o", str(out), "--profiler", "torch", "--steps", "2",
                "--warmup-steps", "1", "--profile-memory", "--keep-raw", "--timeout", "300"]) == 0
    [trace] = list((out / "raw").rglob("rank0.json"))
    _, mem, _ = _raw_memory(trace)
    want = defaultdict(int)
    for _, e in mem:
        key = _device(e["args"])
        want[key] = max(want[key], e["args"]["Total Allocated"])
    summary = _q(out, "memory_summary")
    assert {r["device"]: r["peak_allocated_bytes"] for r in summary if r["scope"] == "run"} == dict(want)
    assert sorted(r["step"] for r in summary if r["scope"] == "step") == [1, 2]
    rows = _q(out, "memory_at_peak")
    for by in ("operator", "phase", "size"):
        assert sum(r["bytes"] for r in rows if r["by"] == by) == want["cpu"]
    assert {r["name"] for r in rows if r["by"] == "phase"} & {"forward", "backward", "optimizer"}
    assert json.loads((out / "manifest.json").read_text())["collect"]["requested"]["profile_memory"] is True


# --- pictures: plot memory, the timeline's memory counter track ------------------------------

def test_plot_memory(real, tmp_path, kineto_run, capsys):
    from tracekit.cli import run as cli
    from tracekit.plots.memory import plot_memory

    _, run = real
    info = plot_memory([run], tmp_path / "m.png", bins=100)
    png = (tmp_path / "m.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    peak = next(r for r in _q(run, "memory_summary") if r["scope"] == "run")["peak_allocated_bytes"]
    assert info["devices"] == info["of"] == 1 and list(info["peaks"].values()) == [peak]
    assert cli(["plot", "memory", str(kineto_run("kineto_a100_alexnet")), "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "no memory events" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists()


def test_timeline_memory_counters(real, tmp_path):
    from tracekit.timeline import write_timeline

    trace, run = real
    _, mem, _ = _raw_memory(trace)
    out = tmp_path / "t.json"
    write_timeline(run, out)
    doc = json.loads(out.read_text())
    counters = [e for e in doc["traceEvents"] if e.get("cat") == "memory"]
    assert len(counters) == len(mem)
    assert {e["name"] for e in counters} == {"memory cpu (kineto)"}
    assert max(e["args"]["allocated_bytes"] for e in counters) == max(e["args"]["Total Allocated"] for _, e in mem)
    procs = {e["pid"] for e in doc["traceEvents"] if e.get("ph") == "X"}
    assert {e["pid"] for e in counters} <= procs  # beside the process's own tracks


# --- the study report: peak memory per run ---------------------------------------------------

def test_study_peak_memory_per_run(real, tmp_path, nsys_run):
    """Three runs: the CPU trace (host peak), the GPU trace (its GPU, not the host), and an nsys
    export without memory events (no row; the reason says how to record them)."""
    import pandas as pd

    from tracekit.study import build_study

    trace, cpu_run = real
    gpu_run = convert([_gpu_trace(tmp_path / "gpu.json")], tmp_path / "gpu")
    none = nsys_run("nsys2025.1_h200_nvfuser_bench")
    study, out = build_study([cpu_run, gpu_run, none], tmp_path / "study")
    mem = pd.read_csv(out / "memory.csv")
    cpu_peak = max(e["args"]["Total Allocated"] for _, e in _raw_memory(trace)[1])
    got = {r.runs: (r.peak_allocated_bytes, r.device, r.source) for r in mem.itertuples()}
    assert got == {"run": (cpu_peak, "cpu", "kineto"), "gpu": (2000, "cuda:0", "kineto")}
    assert "1 run(s) without memory events (nsys2025.1_h200_nvfuser_bench)" in study.reasons["memory"]
    html = (out / "report.html").read_text()
    assert "Peak memory per run" in html and "--profile-memory" in html
