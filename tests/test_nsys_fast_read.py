"""The nsys collector's two read paths must give the same run folder as the plain one.

- Rowid ranges: a large table is read as ordered rowid ranges on several threads
  (``Export.scan_ranges``); with tiny ranges, every table of a real export must come out equal,
  row for row and in the same order, to the single-scan conversion.
- Strict first: tables are read without per-value type guards; a value of the wrong storage class
  (text or a real in an integer column) must make the collector read that table again with guards,
  so the result equals the guarded-only conversion, whether the bad value sits in the driver's
  first batch (type inference) or a later one (driver error).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, edited_export

from tracekit.collectors.nsys import export as S
from tracekit.collectors.nsys import pipeline as N
from tracekit.convert import convert

EXPORT = FIXTURES / "nsys" / "nsys2026_h100_2gpu_pytorch_slice.sqlite"


def _tables(run: Path) -> dict:
    return {p.stem: pq.read_table(p) for p in sorted(run.glob("*.parquet"))}


def _convert(src: Path, out: Path) -> dict:
    convert([src], out)
    return _tables(out)


def test_rowid_ranges_split_and_cover():
    with S.Export(EXPORT) as ex:
        assert ex.rowid_ranges("NVTX_EVENTS") is None  # 16,782 rows: one scan
        ranges = ex.rowid_ranges("NVTX_EVENTS", rows=5000)
    assert ranges == [(0, 5000), (5000, 10000), (10000, 15000), (15000, 16782)]


@pytest.mark.parametrize("strict", [True, False])  # the strict read and the guarded one
def test_ranges_on_threads_equal_one_scan(tmp_path, monkeypatch, strict):
    monkeypatch.setattr(N, "STRICT_FIRST", strict)
    monkeypatch.setenv("TRACEKIT_THREADS", "1")
    plain = _convert(EXPORT, tmp_path / "plain")
    monkeypatch.setenv("TRACEKIT_THREADS", "3")
    monkeypatch.setattr(S, "RANGE_ROWS", 997)  # NVTX_EVENTS: 17 ranges, kernels: 4, runtime: 6
    ranged = _convert(EXPORT, tmp_path / "ranged")
    assert plain.keys() == ranged.keys()
    for name in plain:
        assert ranged[name].equals(plain[name]), name
    assert plain["nvtx_ranges"].num_rows > 10000 and plain["kernels"].num_rows == 3442


@pytest.mark.parametrize("rowid", [2, 3000])  # in the driver's first batch / a later one
@pytest.mark.parametrize("table, column, value", [
    ("CUPTI_ACTIVITY_KIND_KERNEL", "gridX", "'abc'"),       # text in an integer column
    ("CUPTI_ACTIVITY_KIND_KERNEL", "registersPerThread", "7.5"),  # a real in an integer column
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId", "1e30"),     # a real outside int64
])
def test_wrong_storage_class_reads_again_with_guards(tmp_path, monkeypatch, rowid, table, column, value):
    src = edited_export(tmp_path, EXPORT.stem, f'UPDATE {table} SET "{column}" = {value} WHERE rowid = {rowid}')
    mismatches = []
    scan = S.Export.scan

    def spy(self, *a, **kw):
        try:
            yield from scan(self, *a, **kw)
        except S.TypeMismatch:
            mismatches.append(a[1])
            raise

    monkeypatch.setattr(S.Export, "scan", spy)
    fast = _convert(src, tmp_path / "fast")
    assert any(f'"{table}"' in m for m in mismatches)  # the strict read did fail...
    monkeypatch.setattr(N, "STRICT_FIRST", False)
    guarded = _convert(src, tmp_path / "guarded")
    for name in guarded:  # ...and the table read again equals the guarded-only conversion
        assert fast[name].equals(guarded[name]), name


class _CountingProgress:
    """A progress bar that records, per task, its total and how far it was advanced."""

    enabled = True

    def __init__(self):
        self.tasks: dict[str, list] = {}

    def task(self, description: str, total: int | None = None):
        rec = self.tasks[description.strip()] = [total, 0]

        def advance(n: int = 1) -> None:
            rec[1] += n
        return advance


def test_progress_of_a_table_read_again_ends_at_its_row_count(tmp_path, monkeypatch):
    # the strict read fails in a later rowid range (997 rows each), after the bar counted the
    # ranges before it; the guarded read starts over from zero
    monkeypatch.setenv("TRACEKIT_THREADS", "3")
    monkeypatch.setattr(S, "RANGE_ROWS", 997)
    src = edited_export(tmp_path, EXPORT.stem,
                        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "gridX" = \'abc\' WHERE rowid = 3000')
    progress = _CountingProgress()
    convert([src], tmp_path / "run", progress=progress)
    total, done = progress.tasks["kernels"]
    assert total == done == pq.read_metadata(tmp_path / "run" / "kernels.parquet").num_rows > 3000
    assert all(t == d for t, d in progress.tasks.values() if t is not None)


@pytest.mark.parametrize("rowid", [2, 3000])  # in the driver's first batch / a later one
def test_duration_past_int64_is_left_to_sqlite(tmp_path, monkeypatch, rowid):
    # duration_ns is end - start computed in Arrow on the strict read (not read from SQLite); where
    # the difference does not fit int64 (SQLite makes it a real), the table is read again with the
    # guarded SQL, so the result is SQLite's own, as in the guarded-only conversion
    src = edited_export(tmp_path, EXPORT.stem, 'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = '
                        f'-9223372036854775000, "end" = 9223372036854775000 WHERE rowid = {rowid}')
    fast = _convert(src, tmp_path / "fast")
    monkeypatch.setattr(N, "STRICT_FIRST", False)
    guarded = _convert(src, tmp_path / "guarded")
    for name in guarded:
        assert fast[name].equals(guarded[name]), name
    import sqlite3

    con = sqlite3.connect(src)
    [(want,)] = con.execute('SELECT CAST(("end" - start) AS INTEGER) FROM CUPTI_ACTIVITY_KIND_KERNEL '
                            f"WHERE rowid = {rowid}").fetchall()
    con.close()
    durations = fast["kernels"].column("duration_ns").to_pylist()
    assert want in durations and want == 2**63 - 1  # SQLite's real, cast back: the int64 maximum


def test_columns_computed_in_arrow_are_not_read_from_sqlite():
    from tracekit.collectors.nsys import decode as D
    from tracekit.collectors.nsys import mapping as M

    with S.Export(EXPORT) as ex:
        ctx = D.Context(ex)
        plans = {t: D.TablePlan(ex, M.TABLE_MAPS[t], ctx) for t in ("kernels", "nvtx_ranges")}
        read = {t: [c[0] for c in p.read_select(strict=True)] for t, p in plans.items()}
        assert plans["nvtx_ranges"].arrow == {"duration_ns": ("difference", ("end_ns", "start_ns")),
                                               "is_open": ("is_null", ("end_ns",))}
        assert "duration_ns" not in read["kernels"] and "is_open" not in read["nvtx_ranges"]
        # the guarded read evaluates every column in SQL
        assert [c[0] for c in plans["kernels"].read_select(strict=False)] == list(M.TABLE_MAPS["kernels"].columns)


def test_streaming_tables_run_at_lower_priority(tmp_path, monkeypatch):
    """Tables without a post-step yield the cores to the NVTX nesting's table: their threads (and
    the threads they start: the rowid-range readers) run BACKGROUND_NICE steps lower; the
    nvtx_ranges table's threads keep the process's priority. The run folder is the same."""
    import os
    import sys
    import threading

    if not sys.platform.startswith("linux"):
        pytest.skip("a thread's own nice value is Linux's")
    seen: dict[str, set] = {}
    real_scan = S.Export.scan

    def scan(self, select, from_sql, *a, **k):
        table = from_sql.split('"')[1] + (" ranges" if "59" in from_sql else "")  # not the marks
        seen.setdefault(table, set()).add(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        yield from real_scan(self, select, from_sql, *a, **k)

    monkeypatch.setattr(S.Export, "scan", scan)
    monkeypatch.setattr(S, "RANGE_ROWS", 2000)  # the large tables read on range threads
    base = os.getpriority(os.PRIO_PROCESS, 0)
    got = _convert(EXPORT, tmp_path / "a")
    assert seen["NVTX_EVENTS ranges"] == {base}
    lower = min(19, base + N.BACKGROUND_NICE)
    # lowered once per thread, however many tables it converts
    assert seen["CUPTI_ACTIVITY_KIND_KERNEL"] == seen["CUPTI_ACTIVITY_KIND_RUNTIME"] == {lower}
    assert set().union(*(v for k, v in seen.items() if k != "NVTX_EVENTS ranges")) == {lower}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base  # the caller's is untouched
    monkeypatch.setattr(N, "background_priority", lambda: None)
    want = _convert(EXPORT, tmp_path / "b")
    assert got.keys() == want.keys() and all(got[t].equals(want[t]) for t in got)
