"""Workers lost mid-convert, and schedulers that do not answer (issue 27, items 2 and 3), end to
end through ``python -m tracekit convert``: a real Dask scheduler and worker processes on
127.0.0.1, real local worker processes killed with SIGKILL, real sockets that never answer or
speak garbage. Each result is compared with a clean conversion of the same 8-rank job."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from jobgen import make_job

from tracekit.convert import convert

pytestmark = pytest.mark.slow
RANKS = 8


def _tracekit(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tracekit", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _tables(run: Path) -> dict:
    """Every table's files and rows, the ranks' entries less the worker that ran them, and
    every path in the folder."""
    m = json.loads((run / "manifest.json").read_text())
    out = {name: (info["files"], [pq.read_table(run / f).to_pylist() for f in info["files"]])
           for name, info in m["tables"].items()}
    out["ranks"] = [{k: v for k, v in r.items() if k != "worker"} for r in m["ranks"]]
    out["files"] = sorted(str(p.relative_to(run)) for p in run.rglob("*"))  # nothing left over
    return out


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """The inputs of an 8-rank job and their clean conversion (one process)."""
    tmp = tmp_path_factory.mktemp("loss")
    j = make_job(tmp / "in", ranks=RANKS, seed=3)
    clean = convert(j.paths, tmp / "clean", jobs=1)
    return j.paths, _tables(clean)


def _one_line_error(p: subprocess.CompletedProcess | tuple, needle: str) -> str:
    rc, err = (p.returncode, p.stderr) if hasattr(p, "returncode") else p
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, (rc, err)
    assert lines[0].startswith("tracekit: error: ") and needle in lines[0], lines
    return lines[0]


# --- Dask -----------------------------------------------------------------------------------

distributed = pytest.importorskip("distributed")


def _kill_after_two_tasks(log: str, marker: str):
    """A worker plugin: every task start and end is logged (``start KEY PID`` / ``done KEY
    PID``); the first worker to start its third task of tracekit's is killed with SIGKILL there,
    holding the results (and the part folders) of its first two."""

    class KillAfterTwo(distributed.WorkerPlugin):
        name = "tracekit-test-kill-after-two"

        def setup(self, worker):
            self.done = 0

        def transition(self, key, start, finish, **kwargs):
            k = key if isinstance(key, str) else str(key)
            if "_guarded" not in k:
                return
            with open(log, "a") as f:
                if finish == "executing":
                    f.write(f"start {k} {os.getpid()}\n")
                elif start == "executing" and finish == "memory":
                    f.write(f"done {k} {os.getpid()}\n")
                    self.done += 1
            if finish == "executing" and self.done >= 2:
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    return
                os.kill(os.getpid(), signal.SIGKILL)

    return KillAfterTwo()


def test_dask_worker_killed_holding_finished_ranks(job, tmp_path):
    """The issue's case: a worker dies after it finished ranks (their parts are written, their
    results live on it). Dask runs those ranks again; before, the rerun failed with
    `.parts/00000: already exists (use --force to replace it)`. Now the parts are replaced
    atomically and the run folder equals the clean conversion."""
    paths, clean = job
    log, marker = tmp_path / "tasks.log", tmp_path / "killed"
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None, scheduler_port=0,
                                  silence_logs=50)
    try:
        with distributed.Client(lc) as c:
            c.wait_for_workers(2, timeout=120)
            c.register_plugin(_kill_after_two_tasks(str(log), str(marker)))
            p = _tracekit("convert", *paths, "-o", tmp_path / "run", "--scheduler",
                          lc.scheduler_address)
            out, err = p.communicate(timeout=240)
    finally:
        lc.close(timeout=60)
    assert p.returncode == 0, err
    assert "Traceback" not in err
    assert marker.exists()
    events = [ln.split() for ln in log.read_text().splitlines()]
    killed = next(pid for what, _, pid in events if what == "start" and
                  sum(1 for w, _, q in events if w == "done" and q == pid) >= 2)
    finished = [k for what, k, pid in events if what == "done" and pid == killed]
    rerun = [k for k in finished if sum(1 for w, q, _ in events if w == "start" and q == k) > 1]
    assert rerun, events  # a rank finished on the lost worker really ran again
    assert _tables(tmp_path / "run") == clean
    assert sorted(p.name for p in tmp_path.iterdir()) == ["killed", "run", "tasks.log"]


class _Server:
    """A TCP server on 127.0.0.1 that accepts connections and then says ``reply`` (or nothing,
    ever); each connection is held open until the test ends."""

    def __init__(self, reply: bytes | None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.reply, self.conns = reply, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.reply is not None:
                try:
                    conn.sendall(self.reply)
                except OSError:
                    pass

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize("reply, needle", [
    (None, "no answer within 3 s (--scheduler-timeout"),
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" + os.urandom(4096), "cannot reach"),
    (os.urandom(64 << 10), "cannot reach"),
], ids=["silent", "http", "garbage"])
def test_scheduler_that_never_answers_or_speaks_garbage(job, tmp_path, reply, needle):
    """Before: the silent server hung the convert 400 s (until the peer closed), the garbage one
    exited 1. Now: exit 2, one line, within the timeout (plus the interpreter's start)."""
    paths, _ = job
    server = _Server(reply)
    try:
        t0 = time.monotonic()
        p = _tracekit("convert", *paths[:2], "-o", tmp_path / "run", "--scheduler",
                      server.address, "--scheduler-timeout", "3")
        out, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        server.close()
    line = _one_line_error((p.returncode, err), needle)
    assert f"the Dask scheduler at {server.address}" in line
    assert took < 3 + 12, took  # the timeout, plus importing tracekit and Dask on a busy machine
    assert not (tmp_path / "run").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("address", ["foo", "ucx://127.0.0.1:8786", "tls://127.0.0.1:8786",
                                     "tcp://"])
def test_scheduler_address_that_is_not_tcp(job, tmp_path, address):
    """Before: `--scheduler foo` printed the right line, then waited 20 s and printed a 10-line
    `Client.__del__` traceback; ucx:// and tls:// exited 1."""
    paths, _ = job
    t0 = time.monotonic()
    p = _tracekit("convert", *paths[:2], "-o", tmp_path / "run", "--scheduler", address)
    out, err = p.communicate(timeout=60)
    _one_line_error((p.returncode, err), "expected tcp://HOST:PORT")
    assert "__del__" not in err and "Exception ignored" not in err
    assert time.monotonic() - t0 < 15
    assert list(tmp_path.iterdir()) == []


# --- local worker processes (--jobs) --------------------------------------------------------

def _workers(parent: int) -> list[int]:
    """The pool's worker processes among ``parent``'s children (not its resource tracker)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent and fields[0] != "Z" and b"spawn_main" in cmd:
            out.append(int(d))
    return sorted(out)


def _parts(out: Path) -> list[Path]:
    return [p for p in out.parent.glob(f".{out.name}.tmp-*/.parts/0*") if not p.name.startswith(".")]


def _kill_workers(p: subprocess.Popen, out: Path, times: int) -> list[int]:
    """SIGKILL one worker of ``p``'s pool once the first part is written; with ``times`` 2,
    then one worker of the new pool (a process not seen before the first kill) once started."""
    killed: list[int] = []
    old: set[int] = set()
    deadline = time.monotonic() + 180
    while len(killed) < times and time.monotonic() < deadline and p.poll() is None:
        live = _workers(p.pid)
        if not killed:
            old.update(live)
        new = [w for w in live if w not in old]
        if not killed and live and _parts(out):
            os.kill(live[0], signal.SIGKILL)
            killed.append(live[0])
        elif killed and new:
            os.kill(new[0], signal.SIGKILL)
            killed.append(new[0])
        time.sleep(0.02)
    return killed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_local_worker_killed_during_convert_is_retried_once(job, tmp_path):
    """Before: exit 1 `BrokenProcessPool`. Now: the unfinished ranks run again on a new pool,
    the run folder equals the clean conversion, and a warning says a worker was lost."""
    paths, clean = job
    out = tmp_path / "run"
    p = _tracekit("convert", *paths, "-o", out, "--jobs", "2")
    killed = _kill_workers(p, out, 1)
    _, err = p.communicate(timeout=240)
    assert len(killed) == 1
    assert p.returncode == 0, err
    assert "Traceback" not in err
    assert "a local worker process died (killed, or out of memory?); " in err
    assert _tables(out) == clean
    assert [q.name for q in tmp_path.iterdir()] == ["run"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_local_worker_killed_twice_is_one_line_exit_2(job, tmp_path):
    paths, _ = job
    out = tmp_path / "run"
    p = _tracekit("convert", *paths, "-o", out, "--jobs", "2")
    killed = _kill_workers(p, out, 2)
    _, err = p.communicate(timeout=240)
    assert len(killed) == 2
    _one_line_error((p.returncode, err), "a local worker process died twice")
    assert list(tmp_path.iterdir()) == []
