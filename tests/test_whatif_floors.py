"""What-if on real GPU traces where the GPU, not the host, bounds the step (issue 34): the host
waits the trace shows only as long calls, the floors every prediction respects, and n/a where a
scenario cannot act. Numbers from the shared traces (../shared/fixtures/kineto, README there)."""

from __future__ import annotations

import pytest
from helpers.whatif_run import tiny_run

from tracekit.cli import run as cli
from tracekit.query import Engine
from tracekit.whatif import load_graph, whatif

REMOVING = ["launch=0", "host=0.5", "kernels:.=0.5", "comm=0.5", "no-straggler"]


@pytest.fixture(scope="module")
def timesformer(kineto_run):
    run = kineto_run("kineto_h100_timesformer_infer")
    with Engine([run]) as e:
        g = load_graph(e)
        rows = {r["scenario"]: r for r in whatif(e, ["baseline", *REMOVING]).to_pylist()}
        cp = e.query("critical_path_summary").to_pylist()
        names = e.query("critical_path_names").to_pylist()  # the same engine's critical path
    return run, g, rows, cp, names


@pytest.fixture(scope="module")
def removing(kineto_run):
    """{stem: whatif rows of baseline and every removing scenario}, once per trace."""
    out = {}
    for stem in ("kineto_a100_nccl_2ranks_rank0", "kineto_mi300_resnet_actckpt_train"):
        with Engine([kineto_run(stem)]) as e:
            out[stem] = whatif(e, ["baseline", *REMOVING]).to_pylist()
    return out


def test_pageable_copy_is_a_wait_for_the_gpu(timesformer):
    """ProfilerStep#6: the cudaMemcpyAsync DtoH [252, 378] ms returns after its copy, queued behind
    the last kernel: one 'pageable copy' wait edge, and the 126 ms are GPU work on the path, not
    launch (before: launch 129.3 ms, 33.8 %)."""
    _, g, rows, cp, _ = timesformer
    assert g.counts["wait:pageable copy"] == 1
    share = {r["category"]: r["share_pct"] for r in cp}
    assert share.get("launch", 0) < 1.0
    assert share.get("kernel", 0) + share.get("stream wait", 0) + share.get("memcpy", 0) > 30.0
    assert rows["baseline"]["predicted_ns"] == rows["baseline"]["measured_ns"] == 382_535_558


def test_faster_kernels_help_the_step_that_waited_for_them(timesformer):
    """kernels:.=0.5 halves 154.856 ms of kernels on the one stream (158.433 ms of GPU work ->
    81.005 ms); the host's 252 ms before the copy stay, so the step loses about the halved
    kernel time: 382.536 - 306.429 = 76.1 ms of 77.4 ms (speedup 1.248; before: 1.000)."""
    _, _, rows, _, _ = timesformer
    r = rows["kernels:.=0.5"]
    assert r["gpu_floor_ns"] == 81_005_440
    assert rows["baseline"]["gpu_floor_ns"] == 158_433_174
    assert 1.24 < r["speedup"] < 1.26
    assert r["saved_ns"] == rows["baseline"]["baseline_ns"] - r["predicted_ns"]


def test_scenario_that_cannot_act_is_n_a_with_its_reason(timesformer, capsys):
    run, _, rows, _, _ = timesformer
    for spec in ("comm=0.5", "no-straggler"):
        assert rows[spec]["predicted_ns"] is None and rows[spec]["speedup"] is None
        assert rows[spec]["note"] == "n/a: the run has no NCCL collectives"
    assert cli(["whatif", str(run), "-s", "kernels:nomatch=0.5", "-s", "kernels:gemm=0.5",
                "-s", "kernels:gemm=0.5+host=0.5", "-f", "csv"]) == 0
    err = capsys.readouterr().err
    assert "kernels:nomatch=0.5: n/a: kernels:nomatch=0.5 matches none of the 446 kernels" in err
    assert err.count("scales 132 kernels") == 1  # once, not once per scenario


def test_balanced_steps_keep_the_gpu_floor(removing):
    """MI300X ProfilerStep#16-17: the GPU's busiest stream runs 15.909 and 15.426 ms of the
    steps' work (15.951, 15.887 ms): host=0.5 and launch=0 cannot go below it (before: 1.87x
    and 1.07x); the host waits 0.02 ms: both sides saturated."""
    rows = [r for r in removing["kineto_mi300_resnet_actckpt_train"]
            if r["scenario"] in ("baseline", "host=0.5", "launch=0")]
    assert len(rows) == 9
    for r in rows:
        if r["step"] in (16, 17):
            assert r["bound"] == "balanced"
            assert 1.0 <= r["speedup"] <= 1.035, r
            assert r["predicted_ns"] >= min(r["gpu_floor_ns"], r["baseline_ns"])
    floors = {r["step"]: r["gpu_floor_ns"] for r in rows if r["scenario"] == "baseline"}
    assert floors == {15: 15_864_902, 16: 15_909_382, 17: 15_426_026}


@pytest.mark.parametrize("stem", ["kineto_a100_nccl_2ranks_rank0", "kineto_mi300_resnet_actckpt_train"])
def test_no_removing_scenario_is_slower_or_below_its_floor(removing, stem):
    rows = removing[stem]
    for r in rows:
        if r["predicted_ns"] is None:
            assert r["note"].startswith("n/a: ")
            continue
        assert r["speedup"] >= 1.0, r
        assert r["predicted_ns"] >= min(r["gpu_floor_ns"], r["baseline_ns"]), r


def test_critical_path_names_the_work(run_factory, timesformer):
    """critical_path_names: host time by the range around it (a record_function range such as
    `extra_work` by its name), GPU time by kernel. The hand-made step: host [0,100) before the
    first launch, launch latency [100,115), K1 [115,515), stream gap [515,520), K2 [520,870),
    the sync's return [870,900), host [900,1000); extra_work [850,1000] holds 30 + 100 ns."""
    run = tiny_run(run_factory, ranges=(("extra_work", 850, 1000),))
    with Engine([run]) as e:
        rows = e.query("critical_path_names").to_pylist()
    got = {(r["side"], r["source"], r["name"]): r["time_ns"] for r in rows}
    assert got[("host", "range", "extra_work")] == 130
    assert got[("gpu", "kernel", "gemm_k1")] == 400
    assert got[("gpu", "kernel", "elementwise_k2")] == 350
    assert got[("host", "api", "cudaLaunchKernel")] == 100
    assert sum(r["time_ns"] for r in rows) == 1000  # fewer than 10 names: all of the step
    # the H100 trace: the 222 ms before the first launch are a Python thread's wait
    top = timesformer[4][0]
    assert (top["side"], top["source"], top["name"]) == ("host", "python_function", "threading.py(359): wait")
    assert 225_000_000 < top["time_ns"] < 227_000_000
