"""nsys CUDA memory usage events (CUDA_GPU_MEMORY_USAGE_EVENTS, `nsys profile
--cuda-memory-usage=true`) -> memory_events -> memory_summary / memory_at_peak.

No shared fixture export has the table (test_no_fixture_has_memory_usage counts), so it is added
to a copy of the 2-GPU PyTorch slice with the columns NVIDIA's exports have: allocations and
frees of the two processes that ran kernels, at times inside the slice, on their own devices."""

from __future__ import annotations

import sqlite3

from conftest import NSYS_FIXTURES, edited_export

from tracekit.convert import convert
from tracekit.query import Engine

BASE = "nsys2026_h100_2gpu_pytorch_slice"
P0, P1 = 281476838981632, 281476855758848  # globalPid of the processes on device 0 and 1
MIB = 1 << 20
T = 155_400_000_000  # inside the slice

# (start, globalPid, deviceId, contextId, address, bytes, memKind, op): 0 alloc, 1 free
EVENTS = [
    (T + 0, P0, 0, 1, 0x7F0000000000, 512 * MIB, 2, 0),  # caching allocator segment
    (T + 10, P0, 0, 1, 0x7F0040000000, 64 * MIB, 2, 0),  # e.g. NCCL buffers
    (T + 20, P0, 0, 1, 0x7F0080000000, 256 * MIB, 2, 0),
    (T + 30, P0, 0, 1, 0x7F0080000000, 256 * MIB, 2, 1),
    (T + 40, P0, 0, 1, 0x200000000, 8 * MIB, 1, 0),  # pinned host memory
    (T + 5, P1, 1, 2, 0x7F1000000000, 512 * MIB, 2, 0),
    (T + 50, P1, 1, 2, 0x7F1000000000, 512 * MIB, 2, 1),
    (T + 60, P1, 1, 2, 0x7F1020000000, 128 * MIB, 2, 0),
]
SQL = """
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL,
  bytes INTEGER NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT,
  correlationId INTEGER, localMemoryPoolAddress INTEGER, localMemoryPoolReleaseThreshold INTEGER,
  localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER, importedMemoryPoolAddress INTEGER,
  importedMemoryPoolProcessId INTEGER);
""" + "".join(
    f"INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES ({s}, {g}, {d}, {c}, {a}, 0, {b}, {k}, {o}, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL);\n" for s, g, d, c, a, b, k, o in EVENTS)


def test_no_fixture_has_memory_usage():
    for p in NSYS_FIXTURES:
        con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        con.close()
        assert not names & {"CUDA_GPU_MEMORY_USAGE_EVENTS", "CUDA_GPU_MEMORY_POOL_EVENTS"}


def test_nsys_memory_usage(tmp_path, nsys_run):
    run = convert([edited_export(tmp_path, BASE, SQL)], tmp_path / "run")
    with Engine([run]) as eng:
        ev = eng.sql("SELECT * FROM memory_events ORDER BY seq").to_pylist()
        summary = eng.query("memory_summary").to_pylist()
        at = eng.query("memory_at_peak").to_pylist()
    assert len(ev) == len(EVENTS)
    assert {(r["device_type"], r["device_id"], r["memory_kind"]) for r in ev} == {
        ("cuda", 0, "Device"), ("cuda", 1, "Device"), ("cuda_host", -1, "Pinned")}
    assert all(r["total_allocated_bytes"] is None and r["source"] == "nsys" for r in ev)
    run_rows = {r["device"]: r for r in summary if r["scope"] == "run"}
    # device 0: 512 -> 576 -> 832 (peak at T+20) -> 576 MiB; device 1: 512 -> 0 -> 128 MiB
    assert run_rows["cuda:0"]["peak_allocated_bytes"] == 832 * MIB
    assert run_rows["cuda:0"]["peak_at_ns"] == T + 20
    assert run_rows["cuda:0"]["end_allocated_bytes"] == 576 * MIB
    assert (run_rows["cuda:0"]["allocations"], run_rows["cuda:0"]["frees"]) == (3, 1)
    assert run_rows["cuda:0"]["peak_reserved_bytes"] is None
    assert run_rows["cuda:1"]["peak_allocated_bytes"] == 512 * MIB
    assert run_rows["cuda_host"]["peak_allocated_bytes"] == 8 * MIB
    size0 = {r["name"]: r["bytes"] for r in at if r["device"] == "cuda:0" and r["by"] == "size"}
    assert size0 == {">= 256 MiB": 768 * MIB, "16-256 MiB": 64 * MIB}
    # the pids are the processes that ran the kernels (globalPid >> 24)
    assert {r["pid"] for r in summary} == {(P0 >> 24) & 0xFFFFFF, (P1 >> 24) & 0xFFFFFF}
    base = nsys_run(BASE)
    with Engine([base]) as eng:
        assert eng.sql("SELECT count(*) AS n FROM memory_events").to_pylist()[0]["n"] == 0


def test_memory_outside_the_allocator(tmp_path):
    """nsys events of device 0 and a snapshot of the same process in one run folder: the 512 MiB
    and the 256 MiB allocations are the allocator's segments (the snapshot took them:
    segment_alloc at those addresses); the 64 MiB one (e.g. NCCL) is outside. At the device peak
    (832 MiB at T+20) 64 MiB is outside; device 1 has no snapshot, so no row."""
    import pickle

    seg = lambda i, addr, size: {"action": "segment_alloc", "addr": addr, "size": size, "stream": 0,
                                 "time_us": 1_790_000_000_000_000 + i, "frames": []}
    snap = {"segments": [{"device": 0, "address": 0x7F0000000000, "total_size": 512 * MIB,
                          "allocated_size": 0, "blocks": []}],
            "device_traces": [[seg(1, 0x7F0000000000, 512 * MIB), seg(2, 0x7F0080000000, 256 * MIB),
                               {"action": "segment_free", "addr": 0x7F0080000000, "size": 256 * MIB,
                                "stream": 0, "time_us": 1_790_000_000_000_003, "frames": []}]]}
    sp = tmp_path / "snap.pickle"
    sp.write_bytes(pickle.dumps(snap, protocol=4))
    run = convert([edited_export(tmp_path, BASE, SQL), sp], tmp_path / "run")
    with Engine([run]) as eng:
        rows = eng.query("memory_outside_allocator").to_pylist()
    assert len(rows) == 1
    r = rows[0]
    assert (r["device"], r["peak_device_bytes"], r["outside_at_peak_bytes"], r["allocator_at_peak_bytes"]) == (
        "cuda:0", 832 * MIB, 64 * MIB, 768 * MIB)
    assert (r["peak_outside_bytes"], r["outside_allocations"], r["allocator_segments"]) == (64 * MIB, 1, 2)
    assert r["outside_share"] == 64 / 832 and r["peak_at_ns"] == T + 20
