"""Dask: `convert --scheduler` and `query --scheduler` on a real scheduler with two worker
processes on 127.0.0.1 give exactly the local results; local worker processes (`--jobs`) too."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.jobs import BASE
from helpers.jobs import kineto_copy as _kineto
from helpers.jobs import rank_export as _rank_export

from tracekit.convert import convert
from tracekit.query import run
from tracekit.query.engine import Engine
from tracekit.query.named_queries import all_queries
from tracekit.query.parts import _chunks

distributed = pytest.importorskip("distributed")

# every test here starts a real Dask cluster (seconds each)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    """A scheduler and two single-threaded worker processes on 127.0.0.1, torn down after."""
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, scheduler_port=0, silence_logs=40)
    try:
        with distributed.Client(lc) as c:
            c.wait_for_workers(2, timeout=120)
            workers = set(c.scheduler_info()["workers"])
        yield lc.scheduler_address, workers
    finally:
        lc.close(timeout=60)


@pytest.fixture(scope="module")
def rank_inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ranks")
    return tmp, [_rank_export(tmp, "r_rank0.sqlite", 0),
                 _rank_export(tmp, "r_rank1.sqlite", 1, start_shift_ns=2_500, host="node2", pid_shift=3)]


def _tables(run):
    m = json.loads((run / "manifest.json").read_text())
    out = {}
    for name, info in m["tables"].items():
        out[name] = (info["files"], [pq.read_table(run / f).to_pylist() for f in info["files"]])
    return m, out


def test_convert_on_the_cluster_equals_local(cluster, rank_inputs):
    address, workers = cluster
    tmp, inputs = rank_inputs
    local = convert(inputs, tmp / "local", jobs=1)
    remote = convert(inputs, tmp / "remote", scheduler=address)
    ml, tl = _tables(local)
    mr, tr = _tables(remote)
    assert tr == tl
    strip = lambda rs: [{k: v for k, v in r.items() if k != "worker"} for r in rs]  # noqa: E731
    assert strip(mr["ranks"]) == strip(ml["ranks"])
    assert [r["clock_offset_ns"] for r in mr["ranks"]] == [0, 2_500]
    assert {r["worker"] for r in mr["ranks"]} <= workers
    assert all(r["worker"].startswith("tcp://127.0.0.1:") for r in mr["ranks"])
    assert all(r["worker"].startswith("local:") for r in ml["ranks"])


def test_convert_on_the_cluster_broken_rank(cluster, tmp_path):
    address, _ = cluster
    good = _kineto(tmp_path, "k_rank0.json", 10)
    bad = tmp_path / "k_rank1.json"
    bad.write_text("{\"traceEvents\": [{\"ph\": \"X\"")
    from tracekit.errors import InputError

    with pytest.raises(InputError, match="k_rank1.json"):
        convert([good, bad], tmp_path / "run", scheduler=address)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k_rank0.json", "k_rank1.json"]


def assert_same(got, want):
    """Equal tables: same columns and types, same rows in the same order; every integer, text and
    boolean value exact, floating-point values to 1e-12 relative (DuckDB sums floating-point
    aggregates such as stddev in the order its threads finish, so the last bit of a double can
    differ between two runs over different file groupings, on one machine too)."""
    assert got.schema == want.schema and got.num_rows == want.num_rows
    for name in want.column_names:
        a, b = got.column(name).to_pylist(), want.column(name).to_pylist()
        if pa.types.is_floating(want.schema.field(name).type):
            assert all((x is None and y is None) or (x is not None and y is not None and math.isclose(
                x, y, rel_tol=1e-12, abs_tol=0)) for x, y in zip(a, b)), name
        else:
            assert a == b, name


QUERIES = ["kernel_summary", "gpu_idle", "nvtx_gpu_projection", "step_summary", "nccl", "launch_latency"]


@pytest.fixture(scope="module")
def runs(rank_inputs, nsys_run):
    tmp, inputs = rank_inputs
    job = convert(inputs, tmp / "job_q", jobs=1)
    return [job, nsys_run("nsys2026_h100_2gpu_pytorch_slice"), nsys_run(BASE),
            nsys_run("nsys2020.5_2xv100_p2p_nvlink")]


@pytest.mark.parametrize("name", QUERIES)
def test_query_on_the_cluster_equals_local(cluster, runs, name):
    address, _ = cluster
    with Engine(runs) as e:
        local = e.query(name)
    assert_same(run(name, runs, scheduler=address).table, local)
    assert_same(run(name, runs, jobs=2).table, local)


def test_cli_query_with_scheduler_env(cluster, runs, tmp_path):
    address, _ = cluster
    out = tmp_path / "local.parquet"
    cmd = [sys.executable, "-m", "tracekit", "query", "kernel_summary", *map(str, runs), "-f", "parquet"]
    subprocess.run(cmd + ["-o", str(out)], capture_output=True, text=True, check=True)
    env = {**os.environ, "TRACEKIT_SCHEDULER": address}
    remote = subprocess.run(cmd + ["-o", str(tmp_path / "remote.parquet")], capture_output=True,
                            text=True, env=env)
    assert remote.returncode == 0, remote.stderr
    local = pq.read_table(out)
    assert local.num_rows > 40
    assert_same(pq.read_table(tmp_path / "remote.parquet"), local)


def test_unreachable_scheduler_is_one_line_exit_2(tmp_path, runs):
    p = subprocess.run([sys.executable, "-m", "tracekit", "query", "kernel_summary", str(runs[2]),
                        "--scheduler", "tcp://127.0.0.1:9", "--scheduler-timeout", "3"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in p.stderr
    assert not re.search(r"\d\.\d{4,}", p.stderr), p.stderr  # Dask's '2.4000000000000004 s' rounded
    assert "Traceback" not in p.stderr


def test_which_queries_are_split_per_run():
    # per-run parts concatenated in run_id order equal the query over all runs only for queries
    # whose rows each come from one run and whose final ORDER BY starts with run_id
    from tracekit.query.parts import splittable

    qs = all_queries()
    assert splittable(qs["kernel_summary"]) and splittable(qs["nvtx_gpu_projection"])
    whole = {n for n, q in qs.items() if not splittable(q)}
    assert "roofline_ceilings" in whole  # per GPU model, over all runs


def test_query_over_runs_of_a_cross_run_query(runs):
    # roofline_ceilings aggregates over runs: computed whole, still equal to the local result
    with Engine(runs) as e:
        local = e.query("roofline_ceilings")
    assert_same(run("roofline_ceilings", runs, jobs=2).table, local)


def test_chunks_are_contiguous_and_cover_everything():
    paths = [f"r{i}" for i in range(7)]
    for w in (1, 2, 3, 10):
        c = _chunks(paths, w)
        assert sum(c, []) == paths and len(c) == min(7, 2 * w)


def _killing_cluster(marker, once: bool):
    """A LocalCluster (nannies restart a dead worker) whose workers exit abruptly (os._exit, as a
    node lost mid-job) when they start one of tracekit's tasks: the first such task only
    (``once``; ``marker`` records it), or every one."""
    import dask

    class KillOnTask(distributed.WorkerPlugin):
        name = "tracekit-test-kill"

        def transition(self, key, start, finish, **kwargs):
            k = key if isinstance(key, str) else str(key)
            if finish == "executing" and "_guarded" in k:
                if once:
                    try:
                        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    except FileExistsError:
                        return
                    os.close(fd)
                os._exit(1)

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      host="127.0.0.1", dashboard_address=":0", scheduler_port=0,
                                      silence_logs=50)
    c = distributed.Client(lc)
    c.wait_for_workers(2, timeout=120)
    c.register_plugin(KillOnTask())
    return lc, c


def test_convert_retries_a_rank_whose_worker_was_lost(rank_inputs, tmp_path):
    # the worker running the first rank dies mid-task: Dask runs the task again on a live
    # worker, and the run folder equals the local conversion
    tmp, inputs = rank_inputs
    marker = tmp_path / "killed"
    lc, c = _killing_cluster(str(marker), once=True)
    try:
        remote = convert(inputs, tmp_path / "remote", scheduler=lc.scheduler_address)
    finally:
        c.close()
        lc.close(timeout=60)
    assert marker.exists()  # a worker was really lost
    local = convert(inputs, tmp_path / "local", jobs=1)
    assert _tables(remote)[1] == _tables(local)[1]


def test_convert_fails_cleanly_when_workers_keep_dying(rank_inputs, tmp_path):
    # every worker that starts a rank dies: the task is given up (KilledWorker) and the convert
    # fails with one line, leaving no run folder and no temporary folder behind
    from tracekit.errors import InputError

    _, inputs = rank_inputs
    out = tmp_path / "out"
    out.mkdir()
    lc, c = _killing_cluster(str(tmp_path / "unused"), once=False)
    try:
        with pytest.raises(InputError, match=r"failed a task: KilledWorker") as ei:
            convert(inputs, out / "run", scheduler=lc.scheduler_address)
    finally:
        c.close()
        lc.close(timeout=60)
    assert "\n" not in str(ei.value)
    assert list(out.iterdir()) == []
