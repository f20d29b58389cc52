"""The in-memory NVTX nesting (collectors/common.py) against the DuckDB SQL path of the nsys
collector, on random ranges with every edge case: equal starts, zero-length and never-closed
ranges, negative lengths, null pid/tid, several threads, overlapping (not nested) ranges."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tracekit.collectors import common as nesting
from tracekit.collectors.nsys import post_steps as N


def _nested(step, t: pa.Table, folder):
    """``t`` through a nesting step (batches of 997 rows) in its own work folder."""
    work = N.Work(folder)
    try:
        return pa.Table.from_batches(list(step(iter(t.to_batches(max_chunksize=997)), work)))
    finally:
        work.close()


def _sql_path(t: pa.Table, tmp_path):
    return _nested(N._nvtx_nesting_duckdb, t, tmp_path / "w")


def _numpy_path(t: pa.Table, tmp_path):
    return _nested(N.nvtx_nesting, t, tmp_path / "n")


def _random_ranges(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    start = rng.integers(0, n // 3 + 2, n) * 10
    length = rng.choice([0, 0, 10, 20, 30, 50, 100, 1000, -10], n)
    end = start + length
    end_null = rng.random(n) < 0.03
    pid = rng.integers(1, 3, n)
    tid = rng.integers(1, 4, n)
    pid_null = rng.random(n) < 0.02
    tid_null = rng.random(n) < 0.02
    style = np.where(rng.random(n) < 0.85, "push/pop", "start/end")
    rid = np.sort(rng.choice(n * 3, n, replace=False)) + 1
    return pa.table({
        "range_id": pa.array(rid, pa.int64()),
        "pid": pa.array(pid, pa.int64(), mask=pid_null),
        "tid": pa.array(tid, pa.int64(), mask=tid_null),
        "start_ns": pa.array(start, pa.int64()),
        "end_ns": pa.array(end, pa.int64(), mask=end_null),
        "style": pa.array(style, pa.string()),
        "name": pa.array([f"r{i}" for i in range(n)]),
    })


@pytest.mark.parametrize("seed", range(6))
def test_numpy_nesting_equals_duckdb_sql(tmp_path, seed):
    t = _random_ranges(seed, 3000 + 500 * seed)
    a = _sql_path(t, tmp_path)
    b = _numpy_path(t, tmp_path)
    assert a.column_names == b.column_names == t.column_names + ["depth", "parent_range_id"]
    assert b.column("range_id").equals(t.column("range_id"))
    for c in ("depth", "parent_range_id"):
        assert a.column(c).to_pylist() == b.column(c).to_pylist(), c
    depth = b.column("depth").to_numpy(zero_copy_only=False)
    assert np.nanmax(depth) >= 3  # the data really nests


def test_properly_nested_values(tmp_path):
    # thread 1: A [0,100) > B [10,50) > C [20,30); D [60,70) under A; E zero-length at 80; F open
    t = pa.table({
        "range_id": [1, 2, 3, 4, 5, 6, 7],
        "pid": [1, 1, 1, 1, 1, 1, 2],
        "tid": [1, 1, 1, 1, 1, 1, 2],
        "start_ns": [0, 10, 20, 60, 80, 90, 20],
        "end_ns": pa.array([100, 50, 30, 70, 80, None, 25], pa.int64()),
        "style": ["push/pop"] * 7,
    })
    b = _numpy_path(t, tmp_path)
    assert b.column("depth").to_pylist() == [0, 1, 2, 1, 1, 1, 0]
    assert b.column("parent_range_id").to_pylist() == [None, 1, 2, 1, 1, 1, None]


def test_falls_back_to_duckdb_above_the_limit(tmp_path, monkeypatch):
    t = _random_ranges(11, 4000)
    monkeypatch.setattr(nesting, "MAX_ROWS", 1500)
    b = _numpy_path(t, tmp_path)  # takes the SQL path past 1500 push/pop rows
    a = _sql_path(t, tmp_path)
    assert a.column("depth").to_pylist() == b.column("depth").to_pylist()
    assert a.column("parent_range_id").to_pylist() == b.column("parent_range_id").to_pylist()


def test_deeper_than_int16_nests_as_in_sql(tmp_path):
    # 40,000 ranges each inside the one before (depths past int16, where the depth sort is not a
    # radix sort), on two threads; on the second, a zero-length range every 1000 ns as well
    n = 40_000
    i = np.arange(n)
    start = np.concatenate([i, i])
    end = np.concatenate([2 * n - i, 2 * n - i])
    tid = np.repeat([1, 2], n)
    extra = np.arange(n, 2 * n, 1000)
    t = pa.table({
        "range_id": pa.array(np.arange(1, 2 * n + 1 + extra.size), pa.int64()),
        "pid": pa.array(np.ones(2 * n + extra.size, np.int64)),
        "tid": pa.array(np.concatenate([tid, np.full(extra.size, 2)]), pa.int64()),
        "start_ns": pa.array(np.concatenate([start, extra - n + 1]), pa.int64()),
        "end_ns": pa.array(np.concatenate([end, extra - n + 1]), pa.int64()),
        "style": ["push/pop"] * (2 * n + extra.size),
    })
    b = _numpy_path(t, tmp_path)
    depth = b.column("depth").to_pylist()
    assert depth[:n] == list(range(n)) == depth[n:2 * n]
    parents = b.column("parent_range_id").to_pylist()
    assert parents[1:n] == list(range(1, n))
    # a zero-length range at s sits inside the s + 1 ranges started at or before s (longer
    # ranges first at equal starts), the innermost being the one started at s: range_id n + s + 1
    starts = extra - n + 1
    assert depth[2 * n:] == [int(s) + 1 for s in starts]
    assert parents[2 * n:] == [n + int(s) + 1 for s in starts]
    a = _sql_path(t, tmp_path)
    assert a.column("depth").to_pylist() == depth
    assert a.column("parent_range_id").to_pylist() == parents


def _threads_arrays(seed: int, n: int, threads: int) -> dict[str, np.ndarray]:
    """nest()'s input arrays for ``n`` random ranges on ``threads`` threads (a few of them with
    most of the rows), 10 % of them not push/pop."""
    rng = np.random.default_rng(seed)
    t = _random_ranges(seed, n)
    key = rng.zipf(1.5, n) % threads  # skewed: a few threads hold most ranges
    end = t.column("end_ns")
    return {"key": key.astype(np.int64), "start": t.column("start_ns").to_numpy(),
            "end": end.fill_null(0).to_numpy(), "end_valid": end.is_valid().to_numpy(zero_copy_only=False),
            "range_id": t.column("range_id").to_numpy(), "pushpop": rng.random(n) < 0.9}


@pytest.mark.parametrize("seed, threads, parts", [(0, 50, 2), (1, 7, 2), (2, 200, 3), (3, 1, 2), (4, 2, 2)])
def test_nesting_in_parts_equals_one_nesting(monkeypatch, seed, threads, parts):
    monkeypatch.setattr(nesting, "PARTS_MIN_ROWS", 10)
    want = nesting.nest(_threads_arrays(seed, 20_000, threads))
    calls = []
    one = nesting.nest
    monkeypatch.setattr(nesting, "nest", lambda cols, into=None: calls.append(1) or one(cols, into))
    got = nesting.nest_in_parts(_threads_arrays(seed, 20_000, threads), parts)
    assert len(calls) == (1 if threads == 1 else parts)  # one thread: nothing to split
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    assert want[0].max() >= 3 and (want[1] != nesting.NO_PARENT).sum() > 1000  # it really nests


def test_nvtx_step_in_two_parts_equals_duckdb_sql(tmp_path, monkeypatch):
    # the nsys step as a conversion with two cores runs it: the threads nested in two groups
    monkeypatch.setattr(nesting, "PARTS_MIN_ROWS", 10)
    t = _random_ranges(21, 6000)
    work = N.Work(tmp_path / "two", threads=2)
    try:
        b = pa.Table.from_batches(list(N.nvtx_nesting(iter(t.to_batches(max_chunksize=997)), work)))
    finally:
        work.close()
    a = _sql_path(t, tmp_path)
    for c in ("depth", "parent_range_id"):
        assert a.column(c).to_pylist() == b.column(c).to_pylist(), c
