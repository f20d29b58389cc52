"""Allocator snapshots (torch.cuda.memory._dump_snapshot pickles) -> allocator_events, read with
an unpickler that refuses every global: a hostile pickle (a __reduce__ that would run a command)
and a truncated one are one-line errors with exit 2 and nothing runs.

The CPU build of torch here cannot record a snapshot (it needs CUDA), so the snapshot is written
here in the documented layout (torch.cuda.memory._snapshot's docstring), physically consistent:
the segments at the end hold exactly what the history leaves allocated, plus what was allocated
before the history started."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from tracekit.cli import run as cli
from tracekit.convert import convert
from tracekit.errors import InputError
from tracekit.query import Engine

MIB = 1 << 20
T0 = 1_790_000_000_000_000  # us since the epoch
S1, S2 = 0x7F0000000000, 0x7F0001000000


def _frames(line):
    return [{"filename": "/usr/lib/python3/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"},
            {"filename": "/work/train.py", "line": line, "name": "step"}]


def snapshot() -> dict:
    """Device 0: a 2 MiB segment with a 1 MiB block allocated before the history started (the
    weights); then a 20 MiB segment and allocations in it. Device 1: nothing recorded."""
    def e(i, action, addr, size, **kw):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": T0 + i,
                "frames": _frames(10 + i), **kw}
    trace = [
        e(1, "segment_alloc", S2, 20 * MIB),
        e(2, "alloc", S2, 8 * MIB),
        e(3, "alloc", S2 + 8 * MIB, 4 * MIB),
        e(4, "free_requested", S2, 8 * MIB),
        e(5, "free_completed", S2, 8 * MIB),
        e(6, "alloc", S2, 6 * MIB),
        {"action": "oom", "size": 1 << 30, "stream": 0, "time_us": T0 + 7, "device_free": 0, "frames": []},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": T0 + 8, "frames": []},
    ]
    segments = [
        {"device": 0, "address": S1, "total_size": 2 * MIB, "allocated_size": 1 * MIB, "active_size": 1 * MIB,
         "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
         "blocks": [{"address": S1, "size": MIB, "requested_size": MIB, "state": "active_allocated", "frames": []},
                    {"address": S1 + MIB, "size": MIB, "requested_size": MIB, "state": "inactive", "frames": []}]},
        {"device": 0, "address": S2, "total_size": 20 * MIB, "allocated_size": 10 * MIB, "active_size": 10 * MIB,
         "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
         "blocks": [{"address": S2, "size": 6 * MIB, "requested_size": 6 * MIB, "state": "active_allocated", "frames": []},
                    {"address": S2 + 6 * MIB, "size": 2 * MIB, "requested_size": 0, "state": "inactive", "frames": []},
                    {"address": S2 + 8 * MIB, "size": 4 * MIB, "requested_size": 4 * MIB, "state": "active_allocated", "frames": []},
                    {"address": S2 + 12 * MIB, "size": 8 * MIB, "requested_size": 0, "state": "inactive", "frames": []}]},
    ]
    return {"segments": segments, "device_traces": [trace, []]}


@pytest.fixture
def snap_file(tmp_path) -> Path:
    p = tmp_path / "snapshot.pickle"
    p.write_bytes(pickle.dumps(snapshot(), protocol=4))
    return p


def test_snapshot_totals_and_peak(snap_file, tmp_path):
    run = convert([snap_file], tmp_path / "run")
    with Engine([run]) as eng:
        ev = eng.sql("SELECT * FROM allocator_events ORDER BY seq").to_pylist()
        summary = eng.query("memory_summary").to_pylist()
        at = eng.query("memory_at_peak").to_pylist()
    # before the history: 11 - (8 + 4 - 8 + 6) = 1 MiB allocated, 22 - 20 = 2 MiB reserved
    assert [r["action"] for r in ev] == ["segment_alloc", "alloc", "alloc", "free", "free_completed", "alloc", "oom"]
    assert [r["total_allocated_bytes"] // MIB for r in ev] == [1, 9, 13, 5, 5, 11, 11]
    assert [r["total_reserved_bytes"] // MIB for r in ev] == [22] * 7
    assert ev[1]["frame"] == "/work/train.py:12 step" and ev[1]["timestamp_ns"] == (T0 + 2) * 1000
    [s] = summary[:1]
    assert (s["scope"], s["device"], s["source"], s["pid"]) == ("run", "cuda:0", "snapshot", None)
    assert (s["peak_allocated_bytes"], s["peak_reserved_bytes"]) == (13 * MIB, 22 * MIB)
    assert s["peak_at_ns"] == (T0 + 3) * 1000 and s["oom_events"] == 1
    assert (s["start_allocated_bytes"], s["end_allocated_bytes"]) == (1 * MIB, 11 * MIB)
    # live at the peak: 8 MiB + 4 MiB from the history, 1 MiB from before it
    assert {r["name"]: r["bytes"] for r in at if r["by"] == "size"} == {"1-16 MiB": 12 * MIB, "(before the trace)": MIB}


def _one_line_exit_2(path: Path, tmp_path, capsys, text: str):
    rc = cli(["convert", str(path), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert text in err and str(path.name) in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


class Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_hostile_pickle_is_refused_and_never_runs(tmp_path, capsys):
    marker = tmp_path / "pwned"
    doc = snapshot()
    doc["device_traces"][0].append(Evil(marker))
    p = tmp_path / "evil.pickle"
    p.write_bytes(pickle.dumps(doc, protocol=4))
    assert b"system" in p.read_bytes()
    pickle.loads(pickle.dumps(Evil(tmp_path / "control")))  # the payload works when unpickled normally
    assert (tmp_path / "control").exists()
    _one_line_exit_2(p, tmp_path, capsys, "refused without running it")
    assert not marker.exists()


def test_truncated_and_foreign_pickles(snap_file, tmp_path, capsys):
    data = snap_file.read_bytes()
    cut = tmp_path / "cut.pickle"
    cut.write_bytes(data[: len(data) // 2])
    _one_line_exit_2(cut, tmp_path, capsys, "cut short")
    other = tmp_path / "list.pickle"
    other.write_bytes(pickle.dumps([1, 2, 3], protocol=4))
    _one_line_exit_2(other, tmp_path, capsys, "not a PyTorch memory snapshot")


def test_load_snapshot_refuses_every_global(tmp_path):
    from collections import OrderedDict

    from tracekit.collectors.memsnapshot import load_snapshot

    p = tmp_path / "od.pickle"
    p.write_bytes(pickle.dumps({"segments": [], "device_traces": [OrderedDict()]}, protocol=2))
    with pytest.raises(InputError, match="collections.OrderedDict"):
        load_snapshot(p)


def test_every_cut_and_flipped_byte_is_an_input_error(snap_file, tmp_path):
    """Cut at every 97th byte, and with one byte changed at every 61st position (MARK bytes
    turned into LONG_BINPUT with a huge memo index among them): each is read or refused with
    InputError (never another exception, never the machine's memory)."""
    from tracekit.collectors.memsnapshot import load_snapshot

    data = snap_file.read_bytes()
    p = tmp_path / "x.pickle"
    bad = 0
    for i in range(2, len(data), 97):
        p.write_bytes(data[:i])
        with pytest.raises(InputError):
            load_snapshot(p)
    for i in [*range(2, len(data), 61), 277, 887, 1107]:
        p.write_bytes(data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:])
        try:
            load_snapshot(p)
        except InputError:
            bad += 1
    assert bad > 0


def test_memo_bomb_is_stopped_by_the_memory_limit(tmp_path):
    """Three opcodes: protocol 4, an empty dict, LONG_BINPUT 0xFFFFFFF0: CPython's unpickler would
    grow its memo table to 2 x 4G entries (64 GiB, zero-filled); the child's limit stops it."""
    import time

    from tracekit.collectors.memsnapshot import load_snapshot

    p = tmp_path / "bomb.pickle"
    p.write_bytes(b"\x80\x04}r\xf0\xff\xff\xff.")
    t = time.monotonic()
    with pytest.raises(InputError, match="more than .* MiB of memory"):
        load_snapshot(p)
    assert time.monotonic() - t < 20
