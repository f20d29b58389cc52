"""Replay and what-if (tracekit.whatif, `tracekit whatif`, critical_path): a hand-computed run,
the shared Kineto traces with ProfilerStep, and an 8-rank job from tests/jobgen.py."""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.whatif_run import tiny_run

from tracekit.cli import run as cli
from tracekit.query import Engine
from tracekit.whatif import by_step as whatif_by_step
from tracekit.whatif import whatif

sys.path.insert(0, str(Path(__file__).parent))
import jobgen


@pytest.fixture
def tiny(run_factory):
    """One thread: launch K1 [100,110], launch K2 [120,130], cudaStreamSynchronize [200,900];
    stream 7: K1 [115,515], K2 [520,870]; step range [0,1000]."""
    return tiny_run(run_factory)


def _pred(run, scenario):
    with Engine([run]) as e:
        t = whatif(e, [scenario])
    return t.column("predicted_ns").to_pylist()


def test_tiny_run_by_hand(tiny):
    assert _pred(tiny, "baseline") == [1000]
    # K1 200: K2 starts 315 + its 5 ns stream gap, ends 670; the sync returns 30 ns later (700),
    # then 100 ns of host time to the step's end
    assert _pred(tiny, "kernels:gemm=0.5") == [800]
    # launches take no time: K1 [100,500], K2 [500,850], sync returns 880, step end 980
    assert _pred(tiny, "launch=0") == [980]
    # host gaps halved: A at 50, K1 [65,465], K2 [470,820], sync 850, end 900
    assert _pred(tiny, "host=0.5") == [900]
    assert _pred(tiny, "kernels:gemm=0.5+host=0.5") == [700]  # K1 [65,265], K2 [270,620], 650, 700


def test_tiny_critical_path(tiny):
    with Engine([tiny]) as e:
        cp = e.query("critical_path").to_pylist()
    got = [(r["category"], r["name"], r["dur_ns"]) for r in cp]
    assert got == [("host", "cudaLaunchKernel", 100), ("launch", "gemm_k1", 15),
                   ("kernel", "gemm_k1", 400), ("stream wait", "elementwise_k2", 5),
                   ("kernel", "elementwise_k2", 350), ("sync wait", "cudaStreamSynchronize", 30),
                   ("host", "end ProfilerStep#0", 100)]
    assert sum(r["dur_ns"] for r in cp) == cp[0]["wall_ns"] == 1000


@pytest.mark.parametrize("stem", ["kineto_a100_nccl_2ranks_rank0", "kineto_a100_triton"])
def test_baseline_matches_step_summary(kineto_run, stem):
    run = kineto_run(stem)
    with Engine([run]) as e:
        steps = {r["step"]: r["wall_ns"] for r in e.query("step_summary").to_pylist()}
        rows = whatif(e, ["baseline"]).to_pylist()
    assert rows and {r["step"] for r in rows} == set(steps)
    for r in rows:
        assert r["measured_ns"] == steps[r["step"]]
        assert abs(r["predicted_ns"] - steps[r["step"]]) <= 0.02 * steps[r["step"]]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    from tracekit.convert import convert

    base = tmp_path_factory.mktemp("whatif_job")
    out = {}
    for name, straggler in (("straggler", 3), ("clean", None)):
        j = jobgen.make_job(base / f"src_{name}", ranks=8, seed=1, offsets_ns=[0] * 8,
                            drifts_ppm=[0.0] * 8, straggler=straggler, straggler_delay_ns=400_000)
        out[name] = (convert(j.paths, base / name), j.truth)
    return out


@pytest.fixture(scope="module")
def hosts_job(job, tmp_path_factory):
    """The straggler job with every rank on a host of its own: clock offsets of -2.8 to +2.7 ms
    and drifts of up to 20 ppm, estimated back by the clock model. Given offsets draw nothing
    from the seed, so the jitter is the one-clock job's and its clean twin is job's."""
    from tracekit.convert import convert

    base = tmp_path_factory.mktemp("whatif_hosts")
    j = jobgen.make_job(base / "src", ranks=8, seed=1, straggler=3, straggler_delay_ns=400_000,
                        offsets_ns=[0, -160_868, 70_930, 1_531_005, 2_702_783, -2_790_885, -2_135_043, 1_937_662],
                        drifts_ppm=[0.0, 12.5, -8.0, 19.0, -15.5, 4.0, -20.0, 7.5])
    return {"straggler": (convert(j.paths, base / "straggler"), j.truth), "clean": job["clean"]}


@pytest.mark.parametrize("clocks", ["job", "hosts_job"])
def test_job_baseline_within_2pct_of_truth(clocks, request):
    for run, truth in request.getfixturevalue(clocks).values():
        with Engine([run]) as e:
            rows = whatif(e, ["baseline"]).to_pylist()
        assert len(rows) == 8 * 3
        steps = sorted({r["step"] for r in rows})
        for r in rows:
            true_ns = truth.step_ns[r["rank"]][steps.index(r["step"])]
            assert abs(r["predicted_ns"] - true_ns) <= 0.02 * true_ns
            assert r["baseline_err_pct"] == pytest.approx(0.0, abs=2.0)


def test_job_critical_path_adds_up_and_sits_on_the_straggler(job):
    run, truth = job["straggler"]
    with Engine([run]) as e:
        cp = e.query("critical_path").to_pylist()
        summary = e.query("critical_path_summary").to_pylist()
    by_step: dict[int, list] = {}
    for r in cp:
        by_step.setdefault(r["step"], []).append(r)
    assert len(by_step) == 3
    for step, segs in by_step.items():
        wall = segs[0]["wall_ns"]
        k = sorted(by_step).index(step)
        true_wall = max(truth.steps[r][k][2] - truth.steps[r][k][1] for r in range(8))  # the longest rank's
        assert wall == true_wall
        assert abs(sum(s["dur_ns"] for s in segs) - wall) <= 0.001 * wall
    for step in by_step:
        shares = [r["share_pct"] for r in summary if r["step"] == step]
        assert sum(shares) == pytest.approx(100.0, abs=0.1)
    # the job's non-collective time on the path: at least 80 % on the straggler (rank 3)
    other = [r for r in cp if r["category"] != "collective transfer"]
    on_straggler = sum(r["dur_ns"] for r in other if r["rank"] == truth.straggler)
    assert on_straggler >= 0.8 * sum(r["dur_ns"] for r in other)


@pytest.mark.parametrize("source", ["job", "kineto_h100_timesformer_infer", "kineto_mi300_resnet_actckpt_train",
                                    "nsys2026_h100_2gpu_pytorch_slice"])
def test_one_wall_time_per_step(source, request):
    """step_summary, the replay and the critical path give each step the same wall time: the
    step range of each rank (process), and for the step of a job (or of a run of several
    processes) its longest rank's (docs/whatif.md, "What a step is"). Before, the critical path
    ran from the earliest start to the latest end over the ranks: 326 us over every rank's
    step 4 in the straggler job, through an 'other' segment at its start."""
    if source == "job":
        run = request.getfixturevalue("job")["straggler"][0]
    elif source.startswith("kineto"):
        run = request.getfixturevalue("kineto_run")(source)
    else:
        run = request.getfixturevalue("nsys_run")(source)
    with Engine([run]) as e:
        ss = e.query("step_summary").to_pylist()
        result = whatif(e, ["baseline"])
        cp = e.query("critical_path").to_pylist()
        cps = e.query("critical_path_summary").to_pylist()
    rows = result.to_pylist()
    summary = {(r["pid"], r["step"]): r["wall_ns"] for r in ss}
    assert {(r["pid"], r["step"]): r["measured_ns"] for r in rows} == summary
    assert all(r["baseline_ns"] == r["measured_ns"] for r in rows)
    longest: dict = {}
    for (_, step), wall in summary.items():
        longest[step] = max(longest.get(step, 0), wall)
    per_step = {r["step"]: r["baseline_ns"] for r in whatif_by_step(result).to_pylist()}
    assert per_step == longest
    assert {r["step"]: r["wall_ns"] for r in cps} == longest
    path: dict = {}
    for r in cp:
        path[r["step"]] = path.get(r["step"], 0) + r["dur_ns"]
    assert path == longest


def test_cli_whatif_formats_and_errors(job, capsys):
    run, _ = job["straggler"]
    assert cli(["whatif", str(run), "-s", "baseline", "-s", "comm=0.5+launch=0", "-f", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 * 24
    assert set(rows[0]) == {"scenario", "run_id", "step", "rank", "measured_ns", "predicted_ns",
                            "speedup", "baseline_err_pct", "baseline_ns", "pid", "saved_ns", "replay_ns",
                            "gpu_floor_ns", "host_wait_ns", "bound", "note", "run_ahead_ns"}
    assert all(r["baseline_err_pct"] == 0 for r in rows)
    assert cli(["whatif", str(run), "-s", "comm=fast"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "comm=fast" in err[0] and "not a number" in err[0]
    assert cli(["whatif", str(run), "-s", "warp=9"]) == 2
    assert "unknown scenario 'warp=9'" in capsys.readouterr().err


@pytest.mark.parametrize("clocks", ["job", "hosts_job"])
def test_no_straggler_predicts_the_clean_job(clocks, request):
    """The straggler job under no-straggler against the same job generated without the
    straggler (same jitter seed): error at most 10 % of the straggler's effect, every rank and
    step; also when every rank's host clock differs (the graph's times on rank 0's clock)."""
    job = request.getfixturevalue(clocks)
    run_s, truth_s = job["straggler"]
    _, truth_n = job["clean"]
    with Engine([run_s]) as e:
        rows = whatif(e, ["no-straggler"]).to_pylist()
    steps = sorted({r["step"] for r in rows})
    for r in rows:
        k = steps.index(r["step"])
        clean = truth_n.step_ns[r["rank"]][k]
        effect = truth_s.step_ns[r["rank"]][k] - clean
        assert effect > 2_000_000  # milliseconds per step (7 collectives x 400 us)
        assert abs(r["predicted_ns"] - clean) <= 0.10 * effect
        assert r["speedup"] > 1.0


def test_timeline_track_and_plot(job, tmp_path):
    run, _ = job["straggler"]
    with Engine([run]) as e:
        cp = e.query("critical_path").to_pylist()
    out = tmp_path / "t.json"
    assert cli(["timeline", str(run), "-o", str(out), "--critical-path"]) == 0
    doc = json.loads(out.read_text())
    ev = [x for x in doc["traceEvents"] if x.get("cat") == "critical_path"]
    assert len(ev) == len([r for r in cp if r["dur_ns"] > 0])
    # each step its own track, events in a track never overlap (Perfetto drops partial overlaps)
    by_tid: dict = {}
    for x in ev:
        by_tid.setdefault(x["tid"], []).append((float(x["ts"]), float(x["ts"]) + float(x["dur"])))
    assert len(by_tid) == 3
    for spans in by_tid.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in itertools.pairwise(spans))
    png = tmp_path / "cp.png"
    assert cli(["plot", "critical-path", str(run), "-o", str(png)]) == 0
    assert png.stat().st_size > 10_000


def _same_graph(a, b):
    for f in ("start", "end", "chain", "first", "cat", "rank", "run", "name_idx", "lead", "d1", "d2",
              "anchor", "instance"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert (a.t0, a.names, a.run_ids) == (b.t0, b.names, b.run_ids)
    for s, d in (("start_src", "start_dst"), ("end_src", "end_dst"), ("after_src", "after_dst")):
        assert sorted(zip(getattr(a, s).tolist(), getattr(a, d).tolist())) == \
            sorted(zip(getattr(b, s).tolist(), getattr(b, d).tolist())), s
    assert a.steps.equals(b.steps)


def test_graph_in_rank_parts_equals_the_whole_job(job):
    """The straggler job built in parts of 2-3 ranks (60,000 event rows) gives the arrays of the
    graph built over the whole job at once, node for node."""
    from tracekit.whatif import graph, parts

    run, _ = job["straggler"]
    with Engine([run]) as e:
        whole = graph.load(e.con)
        groups = parts.rank_groups(e.runs[0], 60_000)
        split = parts.load_in_parts(e, part_rows=60_000)
    assert [len(g) for g in groups] == [2, 2, 2, 2]  # 27,000-odd event rows per rank
    assert whole.n == split.n == 8 * 12_520 + 21  # event nodes, a transfer node per collective
    _same_graph(whole, split)


def test_two_jobs_in_parts_keep_their_collectives_apart(job):
    """Two job run folders replayed together (`tracekit whatif STRAGGLER CLEAN`): built in
    parts, each run's collective instances are their own (before, the parts numbered them per
    run, so the two jobs' instances 0..20 shared 21 transfer nodes: every collective waited for
    the later of the two jobs' ranks); the graph equals the one built over both at once."""
    from tracekit.whatif import graph, parts

    runs = [job["straggler"][0], job["clean"][0]]
    with Engine(runs) as e:
        whole = graph.load(e.con)
        split = parts.load_in_parts(e, part_rows=60_000)
    assert whole.counts["instances"] == split.counts["instances"] == 2 * 21
    _same_graph(whole, split)


def test_critical_path_does_not_depend_on_the_order_of_the_edges(job, tmp_path):
    """The straggler job replicated to 16 ranks (benchmarks/whatif_scale.py: rank r is a copy
    of rank r % 8): the straggler and its copy arrive at every collective at the same time, so
    which of them the critical path follows is a tie. DuckDB returns the edges in no fixed
    order; before, the tie went to the last edge, and the two swapped places on the path from
    run to run (2,942 of 7,931 segments). Now the same path for any order of the edges."""
    import dataclasses

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from whatif_scale import build

    from tracekit.whatif import load_graph
    from tracekit.whatif.critical import critical_path
    from tracekit.whatif.replay import replay

    with Engine([build(job["straggler"][0], 16, tmp_path / "job16")]) as e:
        g = load_graph(e)
    s = replay(g)
    base = critical_path(g, s).to_pylist()
    assert {r["rank"] for r in base} & {3, 11}  # the straggler or its copy
    rng = np.random.default_rng(0)
    for _ in range(3):
        kw = {}
        for a, b in (("start_src", "start_dst"), ("end_src", "end_dst"), ("after_src", "after_dst")):
            o = rng.permutation(len(getattr(g, a)))
            kw[a], kw[b] = getattr(g, a)[o], getattr(g, b)[o]
        h = dataclasses.replace(g, **kw)
        assert critical_path(h, replay(h)).to_pylist() == base


def test_graph_on_disk_in_small_chunks_equals_the_graph_in_memory(job, monkeypatch):
    """The straggler job's graph, replays and critical path with every array in files mapped
    into memory (TRACEKIT_WHATIF_DISK_NODES=0) and the chunked loops cut every 1,000 nodes (so
    every chunk boundary of the build, the windows, the scenarios and the critical path is
    crossed a hundred times): equal, node for node, to the graph in memory in one chunk. The
    store's folder is gone once the graph is freed."""
    import gc

    from tracekit.whatif import load_graph, step_times, store
    from tracekit.whatif.critical import critical_path
    from tracekit.whatif.replay import replay
    from tracekit.whatif.scenarios import apply, parse

    run, _ = job["straggler"]
    out = {}
    for disk in (False, True):
        monkeypatch.setattr(store, "CHUNK", 1000 if disk else 1 << 20)
        monkeypatch.setenv(store.DISK_NODES_ENV, "0" if disk else "100000000")
        with Engine([run]) as e:
            g = load_graph(e)
        assert g.store.disk is disk and isinstance(g.start.base, np.memmap) is disk
        folder = g.store.path
        res = {k: np.array(getattr(g, k)) for k in ("start", "end", "first", "lead", "d1", "d2",
                                                    "anchor", "instance", "cat", "rank")}
        for spec in ("baseline", "no-straggler", "comm=0.5", "launch=0", "host=0.5+kernels:gemm=0.5"):
            s = replay(g, *apply(g, parse(spec)))
            res[spec] = (np.array(s.start), np.array(s.end), np.array(s.R), step_times(g, s))
            if spec == "baseline":
                res["critical_path"] = critical_path(g, s).to_pylist()
        out[disk] = res
        if disk:
            assert Path(folder).is_dir()
            del g, s
            gc.collect()
            assert not Path(folder).exists()
    assert out[False].keys() == out[True].keys()
    for k in out[False]:
        a, b = out[False][k], out[True][k]
        if k == "critical_path":
            assert a == b and len(a) > 100
        elif isinstance(a, tuple):
            assert all(np.array_equal(x, y) for x, y in zip(a, b)), k
        else:
            assert np.array_equal(a, b), k


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE as on Linux")
def test_full_disk_for_the_mapped_arrays_is_one_line_exit_2(job, tmp_path):
    """The arrays on disk with no room for them (a real limit: RLIMIT_FSIZE of 200 kB, so each
    file of 100,000 nodes is refused by the kernel): one line naming the folder and what to do,
    exit 2, and the store's folder removed; never a SIGBUS from a mapped page."""
    import resource
    import signal
    import subprocess

    run, _ = job["straggler"]
    tmp = tmp_path / "t"
    tmp.mkdir()

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    env = {**os.environ, "TRACEKIT_WHATIF_DISK_NODES": "0", "TMPDIR": str(tmp)}
    p = subprocess.run([sys.executable, "-m", "tracekit", "whatif", str(run), "-s", "baseline"],
                       capture_output=True, text=True, env=env, preexec_fn=limit, timeout=300)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"tracekit: error: cannot hold the replay's arrays in {tmp}/tracekit-whatif-")
    assert "File too large (set TMPDIR to a folder on a disk with room" in lines[0]
    assert list(tmp.iterdir()) == []


@pytest.mark.slow
def test_graph_parts_on_a_dask_cluster(job, capsys):
    """Per-rank parts on a real scheduler with two worker processes on 127.0.0.1: the same graph,
    and `tracekit whatif --scheduler` prints what the local run prints."""
    distributed = pytest.importorskip("distributed")
    from tracekit.whatif import graph, parts

    run, _ = job["straggler"]
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, scheduler_port=0, silence_logs=40)
    try:
        with distributed.Client(lc) as c:
            c.wait_for_workers(2, timeout=120)
        with Engine([run]) as e:
            _same_graph(graph.load(e.con), parts.load_in_parts(e, part_rows=60_000,
                                                                scheduler=lc.scheduler_address))
        assert cli(["whatif", str(run), "-s", "no-straggler", "-f", "csv"]) == 0
        local = capsys.readouterr().out
        assert cli(["whatif", str(run), "-s", "no-straggler", "-f", "csv",
                    "--scheduler", lc.scheduler_address]) == 0
        assert capsys.readouterr().out == local
    finally:
        lc.close(timeout=60)


def test_critical_path_without_steps_says_what_is_missing(nsys_run, capsys):
    """An export with CUDA API calls and copies but no kernels and no step ranges: an empty
    critical path explained in one line naming the missing steps and what the run does have;
    `tracekit whatif` is an error (exit 2) saying there are no steps."""
    run = nsys_run("nsys2022.4export_8gpu_jax_no_kernels")
    for name in ("critical_path", "critical_path_summary"):
        assert cli(["query", name, str(run)]) == 0
        cap = capsys.readouterr()
        err = [line for line in cap.err.splitlines() if "returned no rows" in line]
        assert cap.out == "" and len(err) == 1
        assert "no steps to replay" in err[0] and "1242 rows of cuda_api" in err[0]
        assert "reads no run-folder table" not in err[0]
    assert cli(["whatif", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no steps to replay" in err[0] and str(run) in err[0]


def test_cli_table_on_a_job_one_row_per_step_in_80_columns(job, monkeypatch, capsys):
    """The terminal table of a job: one row per scenario and step, within 80 columns, naming the
    rank the step waits for (issue 36 item 3: the straggler, rank 3; the slowest rank by the
    prediction was any of the 8, which end within microseconds); saved ms per step; a kernels
    scenario that matches nothing is n/a in the table and says why on stderr."""
    from tracekit.whatif import by_step

    run, truth = job["straggler"]
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["whatif", str(run), "-s", "no-straggler", "-s", "kernels:no_such_kernel=0.5"]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert lines and all(len(line) <= 80 for line in lines)
    assert f"ranks 8, rank {truth.straggler}," in lines[1]  # the same rank in every row
    head = lines[2].split()
    assert head[:2] == ["scenario", "step"] and head[-1] == "note" and "saved" in head
    assert lines[1].endswith(", bound host")  # the waited-for rank's bound, the same in every row
    div = {"ms": 1e6, "µs": 1e3}[head[head.index("saved") + 1]]
    rows = [line.split() for line in lines if line.startswith(("no-straggler", "kernels:"))]
    assert len(rows) == 2 * 3
    assert "matches none of the" in cap.err and "rank = the rank the step waits for" in cap.err
    with Engine([run]) as e:
        full = whatif(e, ["no-straggler"])
    steps = by_step(full).to_pylist()
    assert len(steps) == 3 and all(s["ranks"] == 8 for s in steps)
    for s, row in zip(steps, rows):
        # step, predicted ms, speedup, saved ms: the largest over the ranks
        assert row[1:5] == [str(s["step"]), f"{s['predicted_ns'] / 1e6:.3f}", f"{s['speedup']:.3f}",
                            f"{s['saved_ns'] / div:.3f}"]
    assert [r[1:] for r in rows[3:]] == [[str(s["step"]), "n/a"] for s in steps]


def test_step_waits_and_the_steps_plot_show_the_straggler(job, tmp_path):
    """step_waits per rank and step (issue 36 item 11): the straggler waits for nobody and holds
    the others up by its 7 collectives' delays; the steps plot draws it as a panel."""
    from tracekit.plots.steps import plot_steps

    run, truth = job["straggler"]
    with Engine([run]) as e:
        waits = e.query("step_waits").to_pylist()
    assert len(waits) == 8 * 3 and all(r["collectives"] == 7 for r in waits)
    steps = sorted({r["step"] for r in waits})
    for r in waits:  # against the truth: 7 collectives a step, in step order; one clock model
        mine = truth.collectives[7 * steps.index(r["step"]):][:7]  # bound (< 1 us) per arrival
        if r["rank"] == truth.straggler:
            held = sum(c["last_arrival_ns"] - sorted(c["arrival_ns"])[-2] for c in mine)
            assert r["wait_ns"] == 0 and r["last_arrivals"] == 7 and abs(r["held_ns"] - held) <= 7_000
        else:
            wait = sum(c["wait_ns"][r["rank"]] for c in mine)
            assert r["last_arrivals"] == 0 and r["held_ns"] == 0 and abs(r["wait_ns"] - wait) <= 7_000
    info = plot_steps([run], tmp_path / "steps.png")
    assert info["waits"] == 8 and (tmp_path / "steps.png").stat().st_size > 0


def test_collectives_match_across_host_clocks(hosts_job, capsys):
    """Ranks on hosts whose clocks differ by milliseconds: every NCCL kernel of every rank is in
    a collective instance matched across ranks (before, the graph kept each rank's own clock
    and the matched calls rank 0's: only rank 0's kernels matched and no-straggler changed
    nothing), and whatif says nothing about unmatched collectives."""
    from tracekit.whatif import load_graph, unmatched_collectives
    from tracekit.whatif.graph import CAT

    run, _ = hosts_job["straggler"]
    with Engine([run]) as e:
        g = load_graph(e)
    coll = g.cat == CAT["collective"]
    assert int(coll.sum()) == 168 and int((g.instance[: len(coll)][coll] < 0).sum()) == 0
    assert unmatched_collectives(g) == []
    assert cli(["whatif", str(run), "-s", "baseline", "-f", "csv"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_job_rows_show_the_waited_for_ranks_bound_and_say_what_by_step_picks():
    """A job's terminal rows (issue 36 item 3 follow-up): a step with a waited-for rank shows that
    rank's bound and run-ahead, not the longest rank's; a step without one shows by_step's rank,
    the one whose predicted step is longest (not the one ending last), and stderr says so."""
    import pyarrow as pa  # here: main's test_whatif.py no longer imports it at the top

    from tracekit.cli.whatif_output import job_rows
    from tracekit.whatif import RESULT_SCHEMA

    def row(step, rank, pred, bound, ahead):
        return {"scenario": "host=0.5", "run_id": "j", "step": step, "rank": rank, "measured_ns": 1000,
                "predicted_ns": pred, "baseline_ns": 1000, "replay_ns": pred, "baseline_err_pct": 0.0,
                "bound": bound, "run_ahead_ns": ahead}
    result = pa.Table.from_pylist([row(1, 0, 900, "gpu", 5), row(1, 1, 800, "host", 7),
                                   row(2, 0, 700, "serial", 0), row(2, 1, 600, "host", 3)], schema=RESULT_SCHEMA)
    waits = pa.table({"run_id": ["j", "j", "j", "j"], "step": [1, 1, 2, 2], "rank": [0, 1, 0, 1],
                      "held_ns": [0, 40, 0, 0]})
    rows, lines = job_rows(result, waits)
    got = [(r["step"], r["rank"], r["predicted_ns"], r["bound"], r["run_ahead_ns"]) for r in rows.to_pylist()]
    assert got == [(1, 1, 900, "host", 7), (2, 0, 700, "serial", 0)]
    assert len(lines) == 1 and lines[0].endswith(
        "; 1 of 2 rows have no such rank and show the rank whose predicted step is longest")
