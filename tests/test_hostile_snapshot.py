"""Hostile allocator snapshots (issue 37, items 1-4): plain data that passes the safe unpickler
but hangs, exits 1 or outlives its parent. Every case: exit 2 with one line naming the file (or
the right rows), in bounded time, no temporary folder, no child process left."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_memory_snapshot import MIB, T0, snapshot
from tracekit.cli import run as cli
from tracekit.convert import convert
from tracekit.query import Engine


def _dag(depth: int = 40, leaf="alloc"):
    """A tuple of 2^depth leaves in a few hundred bytes: every level holds the one below twice."""
    x = (leaf,)
    for _ in range(depth):
        x = (x, x)
    return x


def _dag_key_pickle() -> bytes:
    """``{DAG: 1}`` written opcode by opcode (Python cannot build it: it would hash the key).
    Unpickling it hashes the key: 2^40 leaves, hours of CPU."""
    ops = [b"\x80\x04}", b"\x8c\x05alloc\x85\x94"]  # PROTO 4, EMPTY_DICT; ('alloc',), MEMOIZE 0
    for k in range(40):
        ops.append(b"0h" + bytes([k]) + b"h" + bytes([k]) + b"\x86\x94")  # POP, BINGET k twice, TUPLE2, MEMOIZE
    return b"".join(ops) + b"K\x01s."  # BININT1 1, SETITEM, STOP


def _write(tmp_path: Path, doc, name="snap.pickle", protocol=4) -> Path:
    p = tmp_path / name
    p.write_bytes(pickle.dumps(doc, protocol=protocol))
    return p


def _exit_2(path: Path, tmp_path: Path, capsys, text: str, limit_s: float = 30):
    t = time.monotonic()
    rc = cli(["convert", str(path), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert text in err and path.name in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - t < limit_s
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.tmp-*"))


def _with_entry_field(**fields) -> dict:
    doc = snapshot()
    doc["device_traces"][0][1].update(fields)
    return doc


def test_dag_as_action_frame_name_or_line_is_refused_at_once(tmp_path, capsys):
    """Item 1: a 2^40-leaf tuple DAG as an entry's action was hashed by ``ACTIONS.get`` for
    hours; as a frame's name or line, ``str()`` grew by 8-10 MB/s."""
    p = _write(tmp_path, _with_entry_field(action=_dag()))
    assert p.stat().st_size < 2000
    _exit_2(p, tmp_path, capsys, "device_traces[0][1]: the action is a tuple, not text")
    for field, text in (("name", "a frame's name is a tuple, not text"),
                        ("line", "a frame's line is a tuple, not a line number")):
        doc = snapshot()
        doc["device_traces"][0][1]["frames"][1][field] = _dag()
        _exit_2(_write(tmp_path, doc), tmp_path, capsys, text)


def test_unhashable_huge_int_and_bytearray_values(tmp_path, capsys):
    """Item 2: these exited 1 (TypeError unhashable, ValueError 4300 digits, `internal error:
    Refused` for a bytearray re-pickled as builtins.bytearray)."""
    _exit_2(_write(tmp_path, _with_entry_field(action=["alloc"])), tmp_path, capsys, "the action is a list, not text")
    _exit_2(_write(tmp_path, _with_entry_field(action={"a": 1})), tmp_path, capsys, "the action is a dict, not text")
    _exit_2(_write(tmp_path, _with_entry_field(action=10**5000)), tmp_path, capsys, "the action is a int, not text")
    doc = snapshot()
    doc["device_traces"][0][1]["frames"][1]["line"] = 10**5000
    _exit_2(_write(tmp_path, doc), tmp_path, capsys, "a frame's line is an int beyond int64")
    # protocol 5 writes a bytearray with its own opcode (no global): as an action it is refused,
    # anywhere tracekit does not read it is ignored and the rows are those of the plain snapshot
    _exit_2(_write(tmp_path, _with_entry_field(action=bytearray(b"alloc")), protocol=5), tmp_path, capsys,
            "the action is a bytearray, not text")
    doc = _with_entry_field(extra=bytearray(b"x" * 10))
    doc["segments"][0]["blob"] = bytearray(3)
    run = convert([_write(tmp_path, doc, "ba.pickle", protocol=5)], tmp_path / "ba")
    plain = convert([_write(tmp_path, snapshot(), "plain.pickle")], tmp_path / "plain")
    rows = []
    for r in (run, plain):
        with Engine([r]) as eng:
            rows.append(eng.sql("SELECT * EXCLUDE (run_id) FROM allocator_events ORDER BY seq").to_pylist())
    assert rows[0] == rows[1] and len(rows[0]) == 7


def test_sizes_adding_up_past_int64_are_refused(tmp_path, capsys):
    """Each size is an int64, their sum on a device need not be: the totals would wrap."""
    doc = snapshot()
    for e in doc["device_traces"][0][1:3]:
        e["size"] = 2**62
    _exit_2(_write(tmp_path, doc), tmp_path, capsys, "device_traces[0]: the sizes of its entries add up to 2^63")
    doc = snapshot()
    doc["segments"][0]["total_size"] = doc["segments"][1]["total_size"] = 2**62
    _exit_2(_write(tmp_path, doc), tmp_path, capsys, "the segments' sizes on one device add up to 2^63")


def test_dag_hashed_by_the_unpickler_stops_at_the_cpu_limit(tmp_path, capsys, monkeypatch):
    """As a dict key the DAG is hashed while unpickling: the child's CPU limit stops it."""
    import tracekit.collectors.memsnapshot as ms

    p = tmp_path / "key.pickle"
    p.write_bytes(_dag_key_pickle())
    assert len(p.read_bytes()) < 300
    monkeypatch.setattr(ms, "LOAD_CPU_BASE_S", 2)
    _exit_2(p, tmp_path, capsys, "needs more than 2 s of CPU time", limit_s=40)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_hanging_convert(tmp_path: Path) -> tuple[subprocess.Popen, int]:
    p = tmp_path / "key.pickle"
    p.write_bytes(_dag_key_pickle())
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "convert", str(p), "-o", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kids = _children(proc.pid)
        if kids:
            time.sleep(0.5)  # the child is hashing
            return proc, kids[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the snapshot child never started")


@pytest.mark.slow
def test_sigint_stops_a_hanging_snapshot_within_2_s(tmp_path):
    """Item 1: SIGINT was ignored while the parent hashed; now the parent waits on the child."""
    proc, child = _start_hanging_convert(tmp_path)
    t = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t < 2, err
    assert proc.returncode == 130 and err.strip() == "tracekit: error: interrupted", err
    deadline = time.monotonic() + 2
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["key.pickle"]


@pytest.mark.slow
def test_no_snapshot_child_outlives_a_killed_parent(tmp_path):
    """Item 3: after SIGKILL of convert, its child ran on (1.06 GB, writing 1.1 GB)."""
    proc, child = _start_hanging_convert(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive


@pytest.mark.slow
def test_200000_tiny_device_traces_convert_in_linear_time(tmp_path):
    """Item 4: 200,000 devices with one entry each (400 KB) took more than 100 s (an Arrow table
    per device); now one table. Every device's totals are its own."""
    n = 200_000
    traces = [[{"action": "alloc", "addr": 4096 * d, "size": 512 + d % 7, "stream": 0, "time_us": T0 + d,
                "frames": []}] for d in range(n)]
    segments = [{"device": 3, "address": 0, "total_size": 2 * MIB, "allocated_size": MIB + 515, "blocks": []}]
    p = _write(tmp_path, {"segments": segments, "device_traces": traces})
    t = time.monotonic()
    run = convert([p], tmp_path / "run")
    took = time.monotonic() - t
    with Engine([run]) as eng:
        rows = eng.sql("SELECT count(*) n, count(DISTINCT device_id) d, sum(bytes) b, "
                       "max(device_id) m FROM allocator_events").to_pylist()[0]
        three = eng.sql("SELECT * FROM allocator_events WHERE device_id = 3").to_pylist()
    assert rows == {"n": n, "d": n, "b": sum(512 + d % 7 for d in range(n)), "m": n - 1}
    assert [(r["total_allocated_bytes"], r["total_reserved_bytes"], r["bytes"]) for r in three] == [(MIB + 515, 2 * MIB, 515)]
    assert took < 60, took
