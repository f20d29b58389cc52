"""The what-if scenario registry (tracekit.whatif.scenarios.SCENARIOS): one entry per scenario,
from which `whatif --help` and docs/whatif.md's list are made; each -s parsed once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from helpers.whatif_run import tiny_run as build_tiny_run

from tracekit.cli import run as cli
from tracekit.errors import InputError
from tracekit.query import Engine
from tracekit.whatif import load_graph, scenarios, whatif
from tracekit.whatif.registry import Change, Scenario

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny_run(run_factory):
    """The hand-computed what-if run (tests/helpers/whatif_run.py): two launches, a sync, a 1000 ns step range."""
    return build_tiny_run(run_factory)


def test_docs_list_every_scenario_from_the_registry():
    doc = (ROOT / "docs" / "whatif.md").read_text()
    begin = doc.index("-->\n", doc.index("<!-- scenarios: generated")) + 4
    end = doc.index("<!-- scenarios: end -->")
    assert doc[begin:end] == scenarios.markdown(), \
        "docs/whatif.md's scenario list is stale: paste tracekit.whatif.scenarios.markdown()"
    assert [line.split("`")[1] for line in doc[begin:end].splitlines()] == \
        ["baseline", "no-straggler", "comm=F", "launch=0", "kernels:REGEX=F", "ops:REGEX=F", "host=F"]


def test_help_and_errors_name_every_scenario(monkeypatch, capsys):
    """whatif --help at 80 columns lists every scenario on a line of its own (before: squeezed
    into the option's 22-character column)."""
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["whatif", "--help"]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    for s in scenarios.SCENARIOS:
        assert f"{s.syntax}: {s.help}" in lines
    with pytest.raises(InputError, match=r"unknown scenario 'x': use baseline, no-straggler, comm=F, "
                                         r"launch=0, kernels:REGEX=F, ops:REGEX=F or host=F \(combine with \+\)"):
        scenarios.parse("comm=0.5+x")
    with pytest.raises(InputError, match="only launch=0 is defined"):
        scenarios.parse("launch=0.5")
    assert scenarios.parse("kernels:a=b=0.5+host=2") == [Change("kernels", 0.5, "a=b"), Change("host", 2.0)]


def test_a_new_scenario_is_one_entry(tiny_run, monkeypatch):
    """An entry appended to the registry parses, applies and describes with no other change."""
    def halve_all(g, c, st):
        st.d1[:] = st.d1 // 2
    new = Scenario("halve", "halve", "every duration / 2", "every node's own time / 2.",
                   lambda part, spec: Change("halve") if part == "halve" else None, halve_all,
                   lambda g, c: ["halve: every node"])
    monkeypatch.setattr(scenarios, "SCENARIOS", (*scenarios.SCENARIOS, new))
    assert "  halve: every duration / 2" in scenarios.help_epilog()
    with Engine([tiny_run]) as e:
        t = whatif(e, ["baseline", "halve+host=1"])
    assert t.column("predicted_ns").to_pylist()[0] == 1000
    assert t.column("predicted_ns").to_pylist()[1] < 1000


def test_each_scenario_is_parsed_once(tiny_run, monkeypatch, capsys):
    calls = []
    real = scenarios.parse
    monkeypatch.setattr(scenarios, "parse", lambda spec: calls.append(spec) or real(spec))
    assert cli(["whatif", str(tiny_run), "-s", "host=0.5", "-s", "launch=0", "-f", "csv"]) == 0
    assert calls == ["host=0.5", "launch=0"]
    assert "host=0.5" in capsys.readouterr().out


def _cpu_ranges(rows) -> dict:
    """nvtx_ranges of process 1 from (start_us, end_us, tid, domain, name) rows (times in us)."""
    i64, us = pa.int64(), 1000
    return {"start_ns": pa.array([r[0] * us for r in rows], i64), "end_ns": pa.array([r[1] * us for r in rows], i64),
            "duration_ns": pa.array([(r[1] - r[0]) * us for r in rows], i64),
            "range_id": pa.array(range(1, len(rows) + 1), i64), "pid": pa.array([1] * len(rows), i64),
            "tid": pa.array([r[2] for r in rows], i64), "domain": [r[3] for r in rows], "name": [r[4] for r in rows]}


@pytest.fixture
def cpu_rank(run_factory):
    """A CPU rank by hand (us): main thread 10 runs aten::linear [100, 300] (aten::mm [150, 250]
    and aten::add [260, 290] inside), c10d::allreduce_ [350, 400], then idles until its Gloo
    all-reduce on thread 20 [420, 700] has ended and runs aten::copy_ [720, 800], aten::zero_
    [820, 830], aten::fill_ [840, 850] in ProfilerStep#0 [0, 1000]. The main thread's gaps before its
    operators are 100, 50, 320, 20, 10 (median 50): the 320 us gap is the wait (>= 4 x 50), and it
    woke 20 us after the range ended, having idled 300 before."""
    rows = [(0, 1000, 10, "pytorch.user_annotation", "ProfilerStep#0"),
            (100, 300, 10, "pytorch.cpu_op", "aten::linear"), (150, 250, 10, "pytorch.cpu_op", "aten::mm"),
            (260, 290, 10, "pytorch.cpu_op", "aten::add"), (350, 400, 10, "pytorch.cpu_op", "c10d::allreduce_"),
            (420, 700, 20, "pytorch.user_annotation", "gloo:all_reduce"),
            (720, 800, 10, "pytorch.cpu_op", "aten::copy_"), (820, 830, 10, "pytorch.cpu_op", "aten::zero_"),
            (840, 850, 10, "pytorch.cpu_op", "aten::fill_")]
    nv = _cpu_ranges(rows)
    return run_factory({"nvtx_ranges": nv})


def test_cpu_rank_graph_and_its_scenarios_by_hand(cpu_rank):
    with Engine([cpu_rank]) as eng:
        g = load_graph(eng)
        out = whatif(eng, ["baseline", "ops:aten::mm=0.5", "host=0.5", "ops:.=0.5", "ops:nothing=0",
                           "kernels:.=0.5"])
    assert {k: g.counts[k] for k in ("wait:gloo start", "wait:gloo wait", "instances")} == \
        {"wait:gloo start": 1, "wait:gloo wait": 1, "instances": 1}
    pred = {r["scenario"]: r["predicted_ns"] for r in out.to_pylist()}
    assert pred["baseline"] == 1_000_000
    # aten::mm at half: linear takes 150, everything after it 50 earlier (the Gloo range starts
    # 70 after the call that hands it over, the copy 20 after the range's end): 950
    assert pred["ops:aten::mm=0.5"] == 950_000
    # host time x 0.5: linear 50-250, the call 275-325, the range 70 after the call's start (not
    # host time) 345-625, the copy 10 after its end 635-715, zero 725-735, fill 740-750, the
    # step's end 75 later: 825. Without the wait edge the copy would start 160 after the call's
    # end (485) and the step end at 675
    assert pred["host=0.5"] == 825_000
    # every operator at half: linear 100-200, call 250-275, range 320-600, copy 620-660,
    # zero 680-685, fill 695-700, end 850
    assert pred["ops:.=0.5"] == 850_000
    assert pred["ops:nothing=0"] is None and pred["kernels:.=0.5"] is None
    from tracekit.whatif import notes

    lines = notes(out)
    assert "ops:.=0.5 scales 7 operators of 7 names (0.350 ms of host time)" in lines
    assert "ops:nothing=0: n/a: ops:nothing=0 matches none of the 7 operators" in lines
    assert "kernels:.=0.5: n/a: the run has no kernels (its CPU ranks' operators are ops:REGEX=F)" in lines


def test_ops_on_a_gpu_run_is_na(tiny_run):
    with Engine([tiny_run]) as eng:
        out = whatif(eng, ["ops:gemm=0.5"])
    assert out.column("predicted_ns").to_pylist() == [None]
    assert "no operators of a CPU rank" in out.column("note")[0].as_py()


def test_critical_path_names_split_a_segment_by_the_ranges_it_overlaps(run_factory):
    """Issue 35 item 3: the hand-made step of test_whatif_floors (host [0,100) before the first
    launch, launch latency [100,115), K1 [115,515), stream gap [515,520), K2 [520,870), the
    sync's return [870,900), host [900,1000)) with a range `prep` [40,100) and `tail` [950,1000):
    the first host segment is 40 ns of the call's own name and 60 of prep (before, all 100 went
    to the range at its start: none), the last one 50 of `tail` and 50 of no range (the step's
    end mark's name: before, all 100)."""
    run = build_tiny_run(run_factory, ranges=(("prep", 40, 100), ("tail", 950, 1000)))
    with Engine([run]) as e:
        rows = e.query("critical_path_names").to_pylist()
    got = {(r["side"], r["source"], r["name"]): r["time_ns"] for r in rows}
    assert got[("host", "range", "prep")] == 60
    assert got[("host", "range", "tail")] == 50
    assert got[("host", "api", "cudaLaunchKernel")] == 40
    assert got[("host", "api", "cudaStreamSynchronize")] == 30  # the sync's return
    assert got[("host", "api", "end ProfilerStep#0")] == 50  # host time outside any range
    assert sum(r["time_ns"] for r in rows) == 1000


def test_cpu_rank_thread_wait_by_hand(run_factory):
    """The 'thread wait' rule: the main thread (10) runs aten::a [100, 200], idles until
    thread 30's autograd_op [150, 580] has ended, runs aten::b [600, 700] 20 us after it, then
    aten::c, aten::d, aten::e [710-720, 730-740, 750-760] in ProfilerStep#0 [0, 1000] (main's
    gaps 100, 400, 10, 10, 10: median 10). ops:autograd_op=0.5 ends it at 365, so b starts at
    385 and the step ends at 785 (without the edge, b would wait 400 after a: no change)."""
    rows = [(0, 1000, 10, "pytorch.user_annotation", "ProfilerStep#0"), (100, 200, 10, "pytorch.cpu_op", "aten::a"),
            (150, 580, 30, "pytorch.cpu_op", "autograd_op"), (600, 700, 10, "pytorch.cpu_op", "aten::b"),
            (710, 720, 10, "pytorch.cpu_op", "aten::c"), (730, 740, 10, "pytorch.cpu_op", "aten::d"),
            (750, 760, 10, "pytorch.cpu_op", "aten::e")]
    nv = _cpu_ranges(rows)
    with Engine([run_factory({"nvtx_ranges": nv})]) as eng:
        g = load_graph(eng)
        out = whatif(eng, ["baseline", "ops:autograd_op=0.5"])
    assert g.counts.get("wait:thread wait") == 1 and "wait:gloo wait" not in g.counts
    assert out.column("predicted_ns").to_pylist() == [1_000_000, 785_000]
