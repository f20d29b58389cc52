"""The nsys pipeline's prefetch (decoding runs on a helper thread, ahead of the Parquet encoding;
issue 39): batches come in order, an error of the producer is raised to the consumer after the
batches made before it, and a consumer that stops early stops and closes the producer."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from tracekit.collectors.nsys.export import TypeMismatch
from tracekit.collectors.nsys.pipeline import prefetched


def _batches(n: int, log: list, fail_at: int | None = None):
    try:
        for i in range(n):
            if i == fail_at:
                raise TypeMismatch("NVTX_EVENTS")
            log.append((i, threading.current_thread().name))
            yield pa.record_batch({"x": [i, i + 100]})
    finally:
        log.append("closed")


def test_prefetched_keeps_order_and_runs_on_a_helper_thread():
    log: list = []
    got = [b.column("x").to_pylist() for b in prefetched(_batches(7, log), depth=2)]
    assert got == [[i, i + 100] for i in range(7)]
    made = [e for e in log if e != "closed"]
    assert [i for i, _ in made] == list(range(7))
    assert {name for _, name in made} == {f"{threading.current_thread().name}-decode"}
    assert log[-1] == "closed"


def test_producer_error_comes_after_the_batches_before_it():
    log: list = []
    got = []
    with pytest.raises(TypeMismatch, match="NVTX_EVENTS"):
        for b in prefetched(_batches(10, log, fail_at=3)):
            got.append(b.column("x")[0].as_py())
    assert got == [0, 1, 2]
    assert log[-1] == "closed"


def test_consumer_stopping_early_stops_and_closes_the_producer():
    log: list = []
    before = {t.name for t in threading.enumerate()}
    it = prefetched(_batches(1000, log), depth=2)
    assert next(it).column("x")[0].as_py() == 0
    it.close()  # the writer failed: the generator is closed after its first batch
    # the producer made at most the consumed batch, depth queued and one blocked on the queue
    made = [e for e in log if e != "closed"]
    assert 1 <= len(made) <= 4
    assert log[-1] == "closed"
    assert {t.name for t in threading.enumerate()} - before == set()
