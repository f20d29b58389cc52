"""The nsys collector's metadata queries on the export's sqlite3 connection: the NVTX domain and
category names come from one scan of NVTX_EVENTS, and a table's rowid bounds from none (both were
whole-table scans per lookup / per table: docs/performance.md, issue 39)."""

from __future__ import annotations

import sqlite3

from conftest import FIXTURES

from tracekit.collectors.nsys.decode import Context
from tracekit.collectors.nsys.export import Export

# one NvtxDomainCreate row (process 24129, domain 2 "TensorRT"), 60 NVTX rows with rowids 1..60
EXPORT = FIXTURES / "nsys" / "nsys2023.1_rtx3090_conv_fp16.sqlite"


def _plan(con: sqlite3.Connection, sql: str) -> str:
    return " / ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN " + sql))


def test_nvtx_names_read_in_one_scan():
    raw = sqlite3.connect(f"file:{EXPORT}?mode=ro&immutable=1", uri=True)
    (gtid, dom, text), = raw.execute("SELECT globalTid, domainId, text FROM NVTX_EVENTS WHERE eventType = 75")
    with Export(EXPORT) as ex:
        seen: list[str] = []
        ex.meta.set_trace_callback(seen.append)
        ctx = Context(ex)
        domains = ctx.lookup("nvtx_domain")
        categories = ctx.lookup("nvtx_category")
        assert ctx.lookup("nvtx_domain") is domains  # asked again: no new query
        ex.meta.set_trace_callback(None)
    assert domains == {((gtid >> 24) & 0xFFFFFF) << 32 | dom: text} == {(24129 << 32) | 2: "TensorRT"}
    assert categories == {}
    scans = [s for s in seen if "FROM NVTX_EVENTS" in s]
    assert len(scans) == 1, scans


def test_rowid_bounds_scan_nothing():
    raw = sqlite3.connect(f"file:{EXPORT}?mode=ro&immutable=1", uri=True)
    with Export(EXPORT) as ex:
        seen: list[str] = []
        ex.meta.set_trace_callback(seen.append)
        ranges = ex.rowid_ranges("NVTX_EVENTS", rows=25)
        ex.meta.set_trace_callback(None)
    # (lo, hi] ranges of 25 rowids from before the first rowid to the last: 1..60
    assert ranges == [(0, 25), (25, 50), (50, 60)]
    assert seen and all("rowid" in s for s in seen)
    for sql in seen:
        plan = _plan(raw, sql)
        assert "SCAN" not in plan, (sql, plan)
