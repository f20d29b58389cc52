"""Ctrl-C and SIGTERM stop a running query: exit 130, one line, spill folder removed (issue 27,
item 6). Real subprocesses of `tracekit sql` on a converted fixture, signalled mid-query."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import duckdb
import pytest
from conftest import FIXTURES

from tracekit.cli import run
from tracekit.query import interruptible

SMALL = FIXTURES / "nsys" / "nsys2025.5_cuda_graph.sqlite"
HEAVY = {
    "recursive_cte": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                     "WHERE n < 10000000000) SELECT count(*) FROM r",
    "spilling_sort": "SELECT range FROM range(3000000000) t ORDER BY hash(range) LIMIT 5",
}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sig") / "run"
    assert run(["convert", str(SMALL), "-o", str(out), "-q"]) == 0
    return out


def test_interruptible_run_stops_duckdb_and_frees_the_connection():
    con = duckdb.connect()
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        interruptible.run(con, lambda: con.sql(HEAVY["recursive_cte"]).fetchall())
    assert time.monotonic() - t0 < 30
    assert con.sql("SELECT 42").fetchall() == [(42,)]  # not "busy with another call"
    con.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("query", sorted(HEAVY))
def test_signal_during_sql_exits_130_and_removes_the_spill_folder(small_run, tmp_path, sig, query):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    p = subprocess.Popen([sys.executable, "-m", "tracekit", "sql", HEAVY[query], str(small_run),
                          "--memory-limit", "100MB", "-f", "csv"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not any(tmp.iterdir()) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.1)  # the engine has made its spill folder: the query is about to run
        time.sleep(2.0)
        assert p.poll() is None, p.stderr.read()
        p.send_signal(sig)
        t0 = time.monotonic()
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, err
    assert time.monotonic() - t0 < 30
    assert err.strip().splitlines() == ["tracekit: error: interrupted"]
    assert list(tmp.iterdir()) == []
