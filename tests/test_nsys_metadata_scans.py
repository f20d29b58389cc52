"""The nsys collector's metadata queries on the export's sqlite3 connection: the NVTX domain and
category names come from one scan of NVTX_EVENTS, and a table's rowid bounds from none (both were
whole-table scans per lookup / per table: docs/performance-history.md, issue 39); and the labels of NVTX
domains and categories in an export without naming events (the lookup's shortcut)."""

from __future__ import annotations

import sqlite3

from conftest import FIXTURES, edited_export

from tracekit.collectors.nsys import mapping as M
from tracekit.collectors.nsys.decode import Context, TablePlan
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


# NVTX ranges without any naming event (no NvtxDomainCreate, no NvtxCategory row): the domain and
# category lookups are empty, and every key gets its label (pid 77, tid 78)
NO_NAMES_EDIT = """
DELETE FROM NVTX_EVENTS;
INSERT INTO NVTX_EVENTS (rowid, start, end, eventType, text, globalTid, domainId, category) VALUES
 (1, 100, 200, 59, 'default domain', 77*16777216+78, 0, NULL),
 (2, 110, 120, 59, 'domain five', 77*16777216+78, 5, 9),
 (3, 130, 140, 60, 'no domain id', 77*16777216+78, NULL, 0);
"""


def test_lookups_without_naming_events(tmp_path):
    src = edited_export(tmp_path, "nsys2023.1_rtx3090_conv_fp16", NO_NAMES_EDIT)
    with Export(src) as ex:
        ctx = Context(ex)
        plan = TablePlan(ex, M.TABLE_MAPS["nvtx_ranges"], ctx)
        batches = list(plan.batches(ex, lambda n: None))
        assert ctx.lookup("nvtx_domain") == {} and ctx.lookup("nvtx_category") == {}
    got = [(r["name"], r["domain"], r["category"]) for b in batches for r in b.to_pylist()]
    assert got == [("default domain", "", None), ("domain five", "<unknown domain 5>", "9"),
                   ("no domain id", "", None)]
    assert all(b.schema.field(c).type == "string" for b in batches for c in ("domain", "category"))


def test_names_made_per_distinct_key_equal_names_made_per_row():
    """_decode_lookup builds the names of a batch's distinct keys and takes them for every row;
    the result must be what building them row by row gives: named keys (the fixture's TensorRT
    domain), unknown keys, the default domain 0, categories, nulls, in any order."""
    import pyarrow as pa

    from tracekit.collectors.nsys import decode as D

    named = (24129 << 32) | 2
    keys = [named, (24129 << 32) | 7, 24129 << 32, None, named, (5 << 32) | 0xFFFFFFFF, None, 24129 << 32]
    with Export(EXPORT) as ex:
        ctx = Context(ex)
        for name in ("nvtx_domain", "nvtx_category"):
            for arr in (pa.array(keys, pa.int64()), pa.array(keys[::-1], pa.int64()),
                        pa.array([None, None], pa.int64()), pa.array([], pa.int64())):
                got = D._decode_lookup(arr, name, ctx)
                assert got.type == pa.string()
                assert got.to_pylist() == D._lookup_names(arr, name, ctx).to_pylist()
        dom = D._decode_lookup(pa.array(keys, pa.int64()), "nvtx_domain", ctx).to_pylist()
    assert dom == ["TensorRT", "<unknown domain 7>", "", None, "TensorRT", "<unknown domain 4294967295>", None, ""]
