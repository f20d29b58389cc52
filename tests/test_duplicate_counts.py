"""Duplicate rows counted while converting equal a count over the written files.

nvtx_ranges' count is made from the spilled batches while they are nested
(collectors/nsys/post_steps.py), every other event table's by the thread that wrote it, as soon as
it is written; ``tracekit.runfolder.integrity.count_duplicates`` reads a file only for a table
without such a count. Each test recounts from the Parquet files the run folder holds.
"""

from __future__ import annotations

import json

import pytest
from conftest import NSYS_FIXTURES, edited_export

PYTORCH = "nsys2026_h100_2gpu_pytorch_slice"  # 16,782 push/pop ranges, all distinct; op_id texts


def file_counts(run) -> dict[str, int]:
    """{event table: duplicate rows} counted from the run folder's files."""
    from tracekit.duck import file_literal, scratch
    from tracekit.runfolder.integrity import EVENT_TABLES, compared_columns, duplicate_rows

    m = json.loads((run / "manifest.json").read_text())
    con = scratch()
    try:
        out = {}
        for name in EVENT_TABLES:
            if name in m["tables"]:
                lit = file_literal(run / m["tables"][name]["file"])
                out[name] = duplicate_rows(con, lambda lit=lit: f"read_parquet({lit})", compared_columns(name))
        return out
    finally:
        con.close()


def manifest_counts(run) -> dict[str, int]:
    return json.loads((run / "manifest.json").read_text())["duplicate_rows"]


@pytest.mark.parametrize("export", NSYS_FIXTURES, ids=lambda p: p.stem)
def test_counts_of_every_fixture_equal_the_files(nsys_run, export):
    run = nsys_run(export.stem)
    assert manifest_counts(run) == {t: n for t, n in file_counts(run).items() if n}


# Three PyTorch op ranges copied exactly; one copied with only a payload value changed (tracekit
# keeps no payload: a duplicate in every column it has); one with another color (not a duplicate);
# one kernel copied.
DUPLICATES_SQL = """
INSERT INTO NVTX_EVENTS SELECT * FROM NVTX_EVENTS WHERE rowid IN
  (SELECT rowid FROM NVTX_EVENTS WHERE text LIKE '%op_id = %' ORDER BY rowid LIMIT 3);
INSERT INTO NVTX_EVENTS SELECT start, "end", eventType, rangeId, category, color, text, globalTid,
  endGlobalTid, textId, domainId, 12345, int64Value, doubleValue, uint32Value, int32Value,
  floatValue, jsonTextId, jsonText, binaryData FROM NVTX_EVENTS WHERE rowid = 10;
INSERT INTO NVTX_EVENTS SELECT start, "end", eventType, rangeId, category,
  coalesce(color, 0) + 1, text, globalTid, endGlobalTid, textId, domainId, uint64Value,
  int64Value, doubleValue, uint32Value, int32Value, floatValue, jsonTextId, jsonText, binaryData
  FROM NVTX_EVENTS WHERE rowid = 11;
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 5;
"""


@pytest.mark.parametrize("in_memory", [True, False], ids=["sort-and-sweep", "duckdb-nesting"])
def test_duplicated_nvtx_ranges_and_kernels_are_counted(tmp_path, monkeypatch, nsys_run, in_memory):
    from tracekit.collectors import common
    from tracekit.convert import convert
    from tracekit.runfolder import integrity

    assert manifest_counts(nsys_run(PYTORCH)) == {}  # the fixture itself has none
    if not in_memory:  # past the sort-and-sweep's row limit: nested in DuckDB, counted from the file
        monkeypatch.setattr(common, "MAX_ROWS", 100)
    scanned = []  # the relations counted

    def spy(con, relation, columns, **kw):
        scanned.append(relation())
        return count(con, relation, columns, **kw)

    count = integrity.duplicate_rows
    monkeypatch.setattr(integrity, "duplicate_rows", spy)
    run = convert([edited_export(tmp_path, PYTORCH, DUPLICATES_SQL)], tmp_path / "run")
    nvtx_files = [r for r in scanned if "nvtx_ranges.parquet" in r]
    assert ("spilled" in scanned, len(nvtx_files)) == ((True, 0) if in_memory else (False, 1))
    assert sum("kernels.parquet" in r for r in scanned) == 1  # once, by the thread that wrote it
    assert manifest_counts(run) == {"kernels": 1, "nvtx_ranges": 4}
    assert {t: n for t, n in file_counts(run).items() if n} == {"kernels": 1, "nvtx_ranges": 4}
    copies = json.loads((run / "manifest.json").read_text())["tables"]["nvtx_ranges"]["rows"]
    assert copies == 16782 + 5  # kept: no row dropped
