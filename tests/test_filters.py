"""Filters of every named query (issue 28): --step, --window, --rank, --device, --nvtx narrow the
tables before any query reads them; a kernel belongs to a step or window by its start."""

from __future__ import annotations

import json

import pytest

from tracekit.cli import run as cli
from tracekit.query.engine import Engine
from tracekit.query.filters import Filters, parse_time, use

SLICE = "nsys2026_h100_2gpu_pytorch_slice"


def test_kernel_summary_of_a_step_equals_the_kernels_starting_in_it(nsys_run, capsys):
    run = nsys_run(SLICE)
    with Engine([run]) as eng:  # unfiltered: the kernels whose start falls in step 3 of their process
        [want] = eng.sql("SELECT count(*) AS n, sum(k.duration_ns)::BIGINT AS t FROM kernels k "
                         "JOIN tk_steps() s ON s.pid = k.pid AND k.start_ns >= s.start_ns "
                         "AND k.start_ns < s.end_ns WHERE s.step_number = 3").to_pylist()
    assert (want["n"], want["t"]) == (124, 1515303)
    assert cli(["query", "kernel_summary", str(run), "--step", "3", "-f", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sum(r["instances"] for r in rows) == 124 and sum(r["total_ns"] for r in rows) == 1515303
    assert cli(["query", "step_summary", str(run), "--step", "3-4", "-f", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()[1:]
    assert sorted((ln.split(",")[2], ln.split(",")[-2]) for ln in lines) == [
        ("3", "111"), ("3", "112"), ("4", "111"), ("4", "112")]


def test_profiler_steps_of_a_kineto_trace(kineto_run):
    run = kineto_run("kineto_a100_nccl_2ranks_rank0")
    with Engine([run]) as eng:
        [s] = eng.sql("SELECT start_ns, end_ns FROM tk_steps() WHERE step = 'ProfilerStep#5'").to_pylist()
        want = eng.sql(f"SELECT count(*) AS n FROM kernels WHERE start_ns >= {s['start_ns']} "
                       f"AND start_ns < {s['end_ns']}").to_pylist()[0]["n"]
    with Engine([run], filters=Filters.parse(step="5")) as eng:
        got = sum(r["instances"] for r in eng.query("kernel_summary").to_pylist())
        steps = eng.query("step_summary").to_pylist()
    assert got == want > 0
    assert [r["step"] for r in steps] == [5]


def test_nvtx_filter_matches_nsys_nvtxkernsum(nsys_run):
    # nsys stats --report nvtxkernsum on this export: 'Jacobi Solve' holds 1000 jacobi_kernel
    # executions, 4,651,646,617 ns; 'Jacobi solve' (lower case) 2000, 4,642,364,999 ns
    run = nsys_run("nsys2020.5_2xv100_p2p_nvlink")
    with Engine([run], filters=Filters.parse(nvtx="^Jacobi Solve$")) as eng:
        rows = eng.query("kernel_summary").to_pylist()
    assert [(r["name"][:13], r["instances"], r["total_ns"]) for r in rows] == [
        ("jacobi_kernel", 1000, 4651646617)]
    with Engine([run], filters=Filters.parse(nvtx="(?i)jacobi solve")) as eng:
        rows = eng.query("kernel_summary").to_pylist()
    assert [(r["instances"], r["total_ns"]) for r in rows] == [(3000, 4651646617 + 4642364999)]


def _small(run_factory):
    # two processes (ranks 0 and 1), kernels on devices 0/1; the run starts at t = 1000
    return run_factory({
        "kernels": {"start_ns": [1000, 1500, 2500, 3000], "end_ns": [1100, 1700, 2600, 3400],
                    "duration_ns": [100, 200, 100, 400], "device_id": [0, 1, 0, 1],
                    "pid": [1, 2, 1, 2], "name": ["a", "b", "a", "b"]},
        "processes": {"pid": [1, 2], "rank": [0, 1]},
    })


def test_window_rank_and_device(run_factory):
    run = _small(run_factory)

    def total(**kw):
        with Engine([run], filters=Filters.parse(**kw)) as eng:
            return {r["name"]: r["total_ns"] for r in eng.query("kernel_summary").to_pylist()}

    assert total(window="0:1us") == {"a": 100, "b": 200}  # starts 1000, 1500 < 1000 + 1000
    assert total(window="1500ns:") == {"a": 100, "b": 400}  # starts >= 2500
    assert total(window=":500") == {"a": 100}  # [start, start + 500): only t = 1000
    assert total(rank="1") == {"b": 600}
    assert total(device="0") == {"a": 200}
    assert total(rank="0,1", device="1", window="0:2us") == {"b": 200}


def test_filters_reach_plots_and_bad_values_exit_2(run_factory, tmp_path, capsys):
    run = _small(run_factory)
    from tracekit.plots.kernels import kernels_data

    with use(Filters.parse(device="1")):
        rows, _, _ = kernels_data([run])
    assert {r["name"]: r["total_ns"] for r in rows if r["level"] == "name"} == {"b": 600}
    assert cli(["plot", "kernels", str(run), "--device", "1", "-o", str(tmp_path / "k.png")]) == 0
    assert (tmp_path / "k.png").stat().st_size > 0
    capsys.readouterr()
    for bad in (["--step", "x"], ["--step", "5-3"], ["--window", "2s"], ["--window", "2s:1s"],
                ["--rank", "a"], ["--nvtx", "("]):
        assert cli(["query", "kernel_summary", str(run), *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and bad[0] in err[0]


@pytest.mark.parametrize("text,ns", [("1500", 1500), ("1.5s", 1_500_000_000), ("200ms", 200_000_000),
                                     ("30us", 30_000), ("30µs", 30_000), ("2e3", 2000)])
def test_time_units(text, ns):
    assert parse_time(text) == ns


def test_one_notion_of_a_step_for_every_command(nsys_run, kineto_run, capsys):
    # issue 36 item 2: the slice's steps are iterations 0-23 detected in the kernels (per
    # process); --step 5 narrows the replay to them as it narrows step_summary
    run = nsys_run(SLICE)
    with Engine([run], filters=Filters.parse(step="5")) as eng:
        steps = eng.query("step_summary").to_pylist()
        cp = eng.query("critical_path_summary").to_pylist()
    assert sorted((r["pid"], r["step"]) for r in steps) == [(111, 5), (112, 5)]
    assert cp and {r["step"] for r in cp} == {5}
    # the replayed step ends at its last kernel's end: within 2 µs of the measured step (the
    # longer process's, pid 111: the step's wall time, docs/whatif.md "What a step is")
    assert {r["wall_ns"] for r in cp} == {29335966}
    assert 0 <= max(r["wall_ns"] for r in steps) - 29335966 < 2000
    # a step the run does not have: one line listing those it has, for query, sql, plot, timeline
    k = kineto_run("kineto_mi300_resnet_actckpt_train")  # ProfilerStep#15-17
    for argv in (["query", "step_summary", str(k), "--step", "1"],
                 ["sql", "SELECT count(*) FROM kernels", str(k), "--step", "1"],
                 ["plot", "steps", str(k), "--step", "1", "-o", str(run.parent / "s.png")]):
        assert cli(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ["tracekit: error: --step 1: no step 1 in the run (steps: 15-17)"], argv
    assert cli(["timeline", str(k), "--step", "1", "-o", str(run.parent / "t.json")]) == 2
    assert capsys.readouterr().err.strip().endswith("no step 1 in the run (it has steps 15-17)")


def test_rank_filter_on_a_run_without_ranks_says_so(nsys_run, capsys):
    # issue 36 item 9: the 2xV100 export is one process (pid 71914) on devices 0 and 3, with no
    # rank: --rank 1 was an empty result ("no row matched"); now one line pointing to --device
    run = nsys_run("nsys2020.5_2xv100_p2p_nvlink")
    assert cli(["query", "kernel_summary", str(run), "--rank", "1"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "tracekit: error: --rank 1: the run records no ranks (no distributed rank in the trace or the "
        "manifest); --device 0, 3 picks its GPUs; its GPU work comes from process 71914"]


def test_filters_echo_times_as_the_user_writes_them():
    # issue 36 item 8: `--window 0.2s:0.3s` was echoed as "window 200000000 ns:300000000 ns"
    assert Filters.parse(window="0.2s:0.3s").describe() == "window 200ms:300ms after the run start"
    assert Filters.parse(window="1.5s:").describe() == "window 1.5s: after the run start"
    assert Filters.parse(window=":2500us").describe() == "window :2.5ms after the run start"
    for text in ("200ms", "1.5s", "2.5ms", "7ns", "1234.567us"):  # what it echoes, it reads back
        from tracekit.query.filters import format_time

        assert format_time(parse_time(text)) == text
