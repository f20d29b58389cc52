"""The one schema: docs/schema.md is current, every column has a unit, and every fixture export
converts into tables that conform to it and keep the invariants the docs promise."""

from __future__ import annotations

import sqlite3

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import NSYS_FIXTURES, ROOT

from tracekit import schema
from tracekit.runfolder import open_run
from tracekit.schema.docs import render_markdown

STEMS = [p.stem for p in NSYS_FIXTURES]


def test_schema_doc_is_current():
    doc = ROOT / "docs" / "schema.md"
    assert doc.read_text(encoding="utf-8") == render_markdown(), (
        "docs/schema.md is stale: run `tracekit schema > docs/schema.md`")


def test_every_column_has_a_unit_and_a_meaning():
    for t in schema.TABLES.values():
        assert t.description.strip(), t.name
        for c in t.columns:
            assert c.unit in schema.UNITS, (t.name, c.name)
            assert c.description.strip(), (t.name, c.name)
            if c.name.endswith("_ns"):
                assert c.unit == "ns", (t.name, c.name)
            if c.unit == "ns":
                assert c.name.endswith("_ns"), (t.name, c.name)
            if c.unit == "bytes":
                assert "bytes" in c.name, (t.name, c.name)


# Independent row counts: {table: SQL over the export}, written here rather than taken from the
# collector's mapping. NVTX event types are the ids every fixture's ENUM_NSYS_EVENT_TYPE uses.
SOURCE_COUNTS = {
    "kernels": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL",
    "cuda_api": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME",
    "memcpy": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    "memset": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET",
    "cuda_sync": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "nvtx_ranges": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71)",
    "nvtx_marks": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (34, 65)",
    # event class 27 = OS runtime call (31/32 are zero-length profiling start/finish markers,
    # left out as nsys stats' osrtsum does)
    "osrt_api": "SELECT count(*) FROM OSRT_API WHERE eventClass = 27",
    "processes": "SELECT count(*) FROM PROCESSES",
    "threads": "SELECT count(*) FROM ThreadNames",
    "gpu_metrics": "SELECT count(*) FROM GPU_METRICS",
    # one interval per switch-in
    "cpu_thread_state": "SELECT count(*) FROM SCHED_EVENTS WHERE isSchedIn <> 0",
}

# string-ID columns: {table: (export table, id column, tracekit column)}
STRING_IDS = {
    "kernels": ("CUPTI_ACTIVITY_KIND_KERNEL", "shortName", "short_name"),
    "cuda_api": ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId", "name"),
    "osrt_api": ("OSRT_API", "nameId", "name"),
    "threads": ("ThreadNames", "nameId", "name"),
}


@pytest.mark.parametrize("stem", STEMS)
def test_fixture_converts_and_conforms(nsys_run, stem):
    run = open_run(nsys_run(stem))
    src = sqlite3.connect(f"file:{NSYS_FIXTURES[STEMS.index(stem)]}?mode=ro", uri=True)
    tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for name, info in run.manifest["tables"].items():
        tdef = schema.table(name)
        f = pq.read_table(run.table_path(name))
        assert f.schema.names == tdef.column_names, name
        for field, col in zip(f.schema, tdef.columns):
            assert field.type == col.type, (name, col.name, field.type)
            if col.required:
                assert f.column(col.name).null_count == 0, (name, col.name)
        assert f.num_rows == info["rows"]
        if name in SOURCE_COUNTS:
            assert f.num_rows == src.execute(SOURCE_COUNTS[name]).fetchone()[0], name
    for name, reason in run.manifest["not_captured"].items():
        assert name not in run.manifest["tables"] and reason
    # a table the export has is never reported as not captured
    for name, sql in SOURCE_COUNTS.items():
        export_table = sql.split(" FROM ")[1].split()[0]
        assert (name in run.manifest["tables"]) == (export_table in tables), name


@pytest.mark.parametrize("stem", STEMS)
def test_fixture_invariants(nsys_run, stem):
    path = nsys_run(stem)
    run = open_run(path)
    src = sqlite3.connect(f"file:{NSYS_FIXTURES[STEMS.index(stem)]}?mode=ro", uri=True)
    for name in run.manifest["tables"]:
        cols = schema.table(name).column_names
        f = run.table_path(name)
        if {"start_ns", "end_ns", "duration_ns"} <= set(cols):
            bad = duckdb.sql(f"SELECT count(*) FROM '{f}' WHERE end_ns IS NOT NULL AND "
                             "duration_ns IS DISTINCT FROM end_ns - start_ns").fetchall()[0][0]
            assert bad == 0, name
        if {"pid", "tid"} <= set(cols) and name != "processes":
            nulls = duckdb.sql(f"SELECT count(*) FROM '{f}' WHERE pid IS NULL OR tid IS NULL").fetchall()[0][0]
            assert nulls == 0, name
    for name, (table, idcol, col) in STRING_IDS.items():
        if name not in run.manifest["tables"]:
            continue
        unknown_src = src.execute(f"SELECT count(*) FROM {table} WHERE {idcol} IS NOT NULL AND {idcol} "
                                  "NOT IN (SELECT id FROM StringIds)").fetchone()[0]
        nulls_src = src.execute(f"SELECT count(*) FROM {table} WHERE {idcol} IS NULL").fetchone()[0]
        got = duckdb.sql(f"SELECT count(*) FILTER (WHERE {col} LIKE '<unknown string %'), "
                         f"count(*) FILTER (WHERE {col} IS NULL) FROM '{run.table_path(name)}'").fetchall()[0]
        assert got == (unknown_src, nulls_src), name
    # NVTX: open ranges are exactly those without an end, and the manifest counts them
    if "nvtx_ranges" in run.manifest["tables"]:
        f = run.table_path("nvtx_ranges")
        open_src = src.execute("SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71) "
                               "AND \"end\" IS NULL").fetchone()[0]
        got = duckdb.sql(f"SELECT count(*) FILTER (WHERE is_open), count(*) FILTER (WHERE is_open <> "
                         f"(end_ns IS NULL)) FROM '{f}'").fetchall()[0]
        assert got == (open_src, 0)
        assert run.manifest["sources"]["nsys"]["stats"]["nvtx_open_ranges"] == open_src


def test_manifest_counts_nonpositive_durations(tmp_path):
    """No fixture has such rows: add two OS runtime calls whose end is not after their start."""
    import shutil

    from tracekit.convert import convert

    stem = "nsys2025.5_cuda_graph"
    dst = tmp_path / "edited.sqlite"
    shutil.copyfile(NSYS_FIXTURES[STEMS.index(stem)], dst)
    dst.chmod(0o644)
    con = sqlite3.connect(dst)
    con.executescript("""
        INSERT INTO OSRT_API SELECT start, start, eventClass, globalTid, nameId, returnValue, nestingLevel,
               callchainId, argumentsId FROM OSRT_API WHERE eventClass = 27 LIMIT 1;
        INSERT INTO OSRT_API SELECT start, start - 5, eventClass, globalTid, nameId, returnValue, nestingLevel,
               callchainId, argumentsId FROM OSRT_API WHERE eventClass = 27 LIMIT 1;""")
    con.commit()
    con.close()
    run = open_run(convert([dst], tmp_path / "run"))
    assert run.manifest["tables"]["osrt_api"]["rows"] == 653
    assert run.manifest["sources"]["nsys"]["stats"]["nonpositive_duration_rows"] == {"osrt_api": 2}
    assert "1 row(s) of osrt_api end before they start (negative duration); kept, time metrics leave " \
        "them out" in run.manifest["warnings"]
    assert run.manifest["zero_duration_rows"] == {"osrt_api": 1}
    got = duckdb.sql(f"SELECT min(duration_ns) FROM '{run.table_path('osrt_api')}'").fetchall()
    assert got == [(-5,)]
