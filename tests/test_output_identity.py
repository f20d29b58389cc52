"""The same query on the same run gives the same bytes (issue 38, "outputs are byte-identical"):
every named query, run twice in fresh engines on real fixture runs, writes byte-identical Parquet
(Parquet, not Arrow IPC: DuckDB leaves arbitrary values under the NULLs of its Arrow buffers,
which no reader sees and Parquet does not store). Standard deviations are computed from exact
integer sums (queries/_macros.sql, tk_stddev_samp), not in the order DuckDB's threads combine
their partial states.

And the same query, what-if and study on the same fixture runs give the bytes of the tree that
wrote tests/data/output_digests.json (tests/helpers/outputs.py says how to write it anew)."""

from __future__ import annotations

import json
import statistics

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import outputs

from tracekit.query import all_queries
from tracekit.query.engine import Engine

# 1000 kernel durations of about 1 s: DuckDB's stddev_samp gave 296296.2001633161 ns (1.3e-14
# off the exact 296296.20016331226 that statistics.stdev computes with fractions)
DURATIONS = [1_000_000_000 + (i * i * 7919) % 1_000_003 for i in range(1000)]


def _kernels(durations):
    starts, t = [], 0
    for d in durations:
        starts.append(t)
        t += d + 1_000
    i64 = pa.int64()
    return {"kernels": {"start_ns": pa.array(starts, i64), "end_ns": pa.array([s + d for s, d in zip(starts, durations)], i64),
                        "duration_ns": pa.array(durations, i64), "device_id": pa.array([0] * len(durations), pa.int32()),
                        "stream_id": pa.array([7] * len(durations), i64), "pid": pa.array([1] * len(durations), i64),
                        "correlation_id": pa.array(range(len(durations)), i64), "name": ["k"] * len(durations)}}


def test_stddev_is_exact_whatever_the_row_order(run_factory):
    want = statistics.stdev(DURATIONS)
    got = []
    for durations in (DURATIONS, DURATIONS[::-1]):
        with Engine([run_factory(_kernels(durations))]) as e:
            got.append(e.query("kernel_summary").column("stddev_ns").to_pylist())
    assert got == [[want], [want]]


def _parquet_bytes(table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


@pytest.mark.slow
def test_every_named_query_gives_the_same_bytes_twice(nsys_run, named_results):
    """The 2-GPU H100 slice: the session's results of every named query (shared with
    test_screens and test_output) against a fresh engine's. The NCCL Kineto rank gave identical
    bytes too when this test was written (left out: 37 s more)."""
    run = nsys_run("nsys2026_h100_2gpu_pytorch_slice")
    first = named_results(run)
    with Engine([run]) as eng:
        again = {name: eng.query(name, params) for name, (_, params) in first.items()}
    assert len(first) == len(all_queries())
    assert [n for n, (t, _) in first.items() if _parquet_bytes(t) != _parquet_bytes(again[n])] == []


@pytest.mark.slow
def test_outputs_match_the_committed_digests(nsys_run, kineto_run, named_results, tmp_path):
    """Every named query's CSV on three fixture runs, whatif's CSV on three and the study's
    tables over three give the bytes the committed tree gave (tests/data/output_digests.json,
    tests/helpers/outputs.py): a refactoring that changes none of them on purpose keeps them."""
    committed = json.loads(outputs.DIGESTS.read_text(encoding="utf-8"))
    if committed["versions"] != outputs.versions():
        pytest.skip(f"digests written with {committed['versions']}, not {outputs.versions()}")

    def run_of(stem):
        return (nsys_run if outputs.SOURCES[stem] == "nsys" else kineto_run)(stem)

    got = outputs.all_digests(run_of, named_results, tmp_path)
    want = committed["digests"]
    assert len(got) == len(want) and sum(k.startswith("query/") for k in got) == 3 * len(all_queries())
    changed = sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))
    assert changed == [], (f"outputs changed: {changed}; if on purpose, run "
                           f"`{outputs.WRITE_COMMAND}` and say why in the commit")
