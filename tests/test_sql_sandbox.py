"""``tracekit sql`` without --allow-external writes nothing and loads nothing (issue 27, item 1).

Two locks, each tested alone: the statement check (DuckDB's parser, with EXPLAIN, EXPLAIN
ANALYZE, PREPARE and EXECUTE unwrapped: tracekit/query/sql_statements.py) and the read-only file
system the engine reads run folders and tracekit's data through (tracekit/query/sql_guard.py). The
fuzz test builds statements of every kind, wrapped every way, aimed at the run folder's files and
tracekit's data tables, and checks that not a byte of either changes and no function appears.
"""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest
from conftest import SMALL_EXPORT, one_error_line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit import roofline
from tracekit.cli import run
from tracekit.errors import QueryError
from tracekit.query import sql_guard
from tracekit.query.engine import Engine
from tracekit.query.sql_statements import classify


def _tree(*dirs) -> dict[str, str]:
    """{path: sha256} of every file under ``dirs``."""
    out = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                p = os.path.join(root, f)
                with open(p, "rb") as fh:
                    out[p] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A converted run folder and a copy of tracekit's data tables the engine reads instead."""
    base = tmp_path_factory.mktemp("sandbox")
    out = base / "run"
    assert run(["convert", str(SMALL_EXPORT), "-o", str(out), "-q"]) == 0
    data = base / "data"
    shutil.copytree(os.path.dirname(roofline.peaks_path()), data)
    return out, data


@pytest.fixture
def data_copy(sandbox, monkeypatch):
    run_dir, data = sandbox
    monkeypatch.setattr(roofline, "peaks_path", lambda: str(data / "gpu_peaks.csv"))
    monkeypatch.setattr(roofline, "data_file", lambda name: str(data / name))
    return run_dir, data


# -- the statement check -----------------------------------------------------------------------
@pytest.mark.parametrize("text, kinds", [
    ("EXPLAIN ANALYZE COPY (SELECT 42 x) TO 'k.parquet'", ["COPY"]),
    ("explain select 1", ["SELECT"]),
    ("/* EXPLAIN */ EXPLAIN (FORMAT json) LOAD json", ["LOAD"]),
    ("EXPLAIN ANALYZE (FORMAT json) COPY kernels TO 'x'", ["COPY"]),
    ("EXPLAIN (ANALYZE, FORMAT json) INSTALL httpfs", ["LOAD"]),
    ("PREPARE p AS COPY (SELECT 1) TO 'x'; EXECUTE p", ["COPY", "COPY"]),
    ("PREPARE p AS SELECT $1 AS n; EXECUTE p(3); DEALLOCATE p", ["SELECT", "SELECT", "DEALLOCATE"]),
    ("EXECUTE q", ["EXECUTE"]),
    ("CREATE OR REPLACE PERSISTENT SECRET s (TYPE s3)", ["CREATE SECRET"]),
    ("CREATE OR REPLACE TEMP MACRO m() AS 1", ["CREATE"]),
    ("DROP PERSISTENT SECRET s", ["DROP SECRET"]),
    ("CREATE TABLE IF NOT EXISTS t AS SELECT 'AS' AS x", ["CREATE"]),
    ("PIVOT kernels ON stream_id USING count(*)", ["SELECT"]),
    ("SELECT 1; ATTACH 'x.db'", ["SELECT", "ATTACH"]),
    ("UPDATE EXTENSIONS", ["unnamed (UPDATE)"]),
])
def test_classify_unwraps_what_runs(text, kinds):
    assert [s.kind for s in classify(text)] == kinds


@pytest.mark.parametrize("statement, needle", [
    ("EXPLAIN ANALYZE COPY (SELECT 42 x) TO 'RUN/kernels.parquet' (FORMAT parquet, USE_TMP_FILE false)",
     "COPY statements are not allowed"),
    ("EXPLAIN ANALYZE COPY (SELECT 1) TO 'PEAKS' (HEADER false)", "COPY statements are not allowed"),
    ("EXPLAIN ANALYZE LOAD json", "LOAD statements are not allowed"),
    ("PREPARE p AS COPY kernels TO 'RUN/kernels.parquet'; EXECUTE p", "COPY statements are not allowed"),
    ("CREATE PERSISTENT SECRET s (TYPE s3)", "CREATE SECRET statements are not allowed"),
    ("UPDATE EXTENSIONS", "statements are not allowed"),
    ("", "no SQL statement in ''"),
    (";;;", "no SQL statement in ';;;'"),
    ("SELECT * FROM read_parquet('RUN/kernels.parquet')", "through the views kernels"),
])
def test_sql_refuses_writes_and_loads_exit_2(data_copy, capsys, statement, needle):
    run_dir, data = data_copy
    before = _tree(run_dir, data)
    statement = statement.replace("RUN", str(run_dir)).replace("PEAKS", str(data / "gpu_peaks.csv"))
    capsys.readouterr()
    assert run(["sql", statement, str(run_dir)]) == 2
    assert needle in one_error_line(capsys)
    assert _tree(run_dir, data) == before


def test_explain_analyze_and_prepare_of_a_select_still_run(data_copy, capsys):
    run_dir, _ = data_copy
    capsys.readouterr()
    assert run(["sql", "PREPARE p AS SELECT count(*) AS n FROM kernels; EXECUTE p",
                str(run_dir), "-f", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"n"', "3"]
    assert run(["sql", "EXPLAIN ANALYZE SELECT count(*) FROM kernels", str(run_dir), "-f", "csv"]) == 0
    assert "analyzed_plan" in capsys.readouterr().out


# -- the read-only file system, with the statement check switched off ----------------------------
def _engine(run_dir, monkeypatch, checked: bool) -> Engine:
    if not checked:
        monkeypatch.setattr(sql_guard, "check_statements", lambda text: None)
    eng = Engine([run_dir], external_access=False)
    eng.sql("SELECT count(*) FROM kernels JOIN gpu_peaks ON true")  # views, roofline, lock
    return eng


@pytest.mark.parametrize("target", ["RUN/kernels.parquet", "tkro://RUN/kernels.parquet",
                                    "tkro://RUN/new.csv", "tkro://DATA/gpu_peaks.csv",
                                    "file://RUN/kernels.parquet"])
@pytest.mark.parametrize("options", ["(FORMAT parquet, USE_TMP_FILE false)", "(FORMAT csv)", ""])
def test_read_only_file_system_alone_refuses_every_write(data_copy, monkeypatch, target, options):
    run_dir, data = data_copy
    before = _tree(run_dir, data)
    with _engine(run_dir, monkeypatch, checked=False) as eng:
        target = target.replace("RUN", str(run_dir)).replace("DATA", str(data))
        with pytest.raises(QueryError) as err:
            eng.sql(f"COPY (SELECT 42 AS x) TO '{target}' {options}")
        assert "read-only in `tracekit sql`" in str(err.value) or "Permission Error" in str(err.value)
        assert eng.sql("SELECT count(*) AS n FROM kernels").column("n").to_pylist() == [3]
    assert _tree(run_dir, data) == before


# -- fuzz: every statement kind, every wrapper, every target -------------------------------------
_TARGETS = ["RUN/kernels.parquet", "RUN/manifest.json", "RUN/x.parquet", "RUN", "DATA/gpu_peaks.csv",
            "DATA/new.csv", "DATA", "/tmp/../RUN/kernels.parquet"]
_SCHEMES = ["", "tkro://", "file://"]
_BODIES = [
    "COPY (SELECT 42 AS x) TO '{t}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY kernels TO '{t}' (FORMAT csv)",
    "COPY (SELECT 1) TO '{t}'",
    "COPY kernels FROM '{t}'",
    "EXPORT DATABASE '{t}'",
    "ATTACH '{t}' AS a",
    "ATTACH '{t}' AS a; CREATE TABLE a.t AS SELECT 1",
    "INSTALL httpfs", "LOAD httpfs", "LOAD json", "FORCE INSTALL json",
    "SET enable_external_access = true", "SET profile_output = '{t}'",
    "PRAGMA enable_profiling", "CALL pragma_version()", "CHECKPOINT", "VACUUM",
    "CREATE PERSISTENT SECRET s (TYPE s3)", "CREATE TABLE t AS SELECT * FROM read_text('{t}')",
    "SELECT * FROM read_parquet('{t}')", "SELECT * FROM read_csv('{t}')", "SELECT * FROM glob('{t}/*')",
    "SELECT count(*) FROM kernels", "CREATE TABLE t AS SELECT 1 AS a", "DROP VIEW kernels",
    "INSERT INTO kernels SELECT * FROM kernels", "DELETE FROM kernels", "UPDATE EXTENSIONS",
]
_WRAPPERS = ["{s}", "EXPLAIN {s}", "EXPLAIN ANALYZE {s}", "explain analyze (format json) {s}",
             "/* x */ EXPLAIN\n-- y\nANALYZE {s}", "PREPARE p AS {s}; EXECUTE p",
             "SELECT 1; {s}", "EXPLAIN (ANALYZE, FORMAT json) {s}", "{s};"]


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.sampled_from(_BODIES), wrapper=st.sampled_from(_WRAPPERS),
       target=st.sampled_from(_TARGETS), scheme=st.sampled_from(_SCHEMES),
       checked=st.booleans(), upper=st.booleans())
def test_fuzz_no_statement_writes_or_loads(data_copy, monkeypatch, body, wrapper, target,
                                           scheme, checked, upper):
    run_dir, data = data_copy
    before = _tree(run_dir, data)
    t = scheme + target.replace("RUN", str(run_dir)).replace("DATA", str(data))
    text = wrapper.format(s=body.format(t=t))
    text = text.upper().replace(t.upper(), t) if upper else text
    with monkeypatch.context() as mp, _engine(run_dir, mp, checked) as eng:
        functions = eng._con.sql("SELECT count(*) FROM duckdb_functions()").fetchall()
        try:
            eng.sql(text)
        except QueryError:
            pass
        assert eng._con.sql("SELECT count(*) FROM duckdb_functions()").fetchall() == functions
    assert _tree(run_dir, data) == before, text
    assert not any(p.name.startswith("tmp_") for p in run_dir.iterdir())


def test_read_only_file_system_reads_right_bytes_from_many_threads(tmp_path):
    """DuckDB reads a Python file system's file at an offset as ``seek`` then ``read`` on a
    handle its scan threads share; with one shared position a scan returned a ZSTD decompression
    failure, a garbled string or a silently wrong sum in 18 of 20 eight-thread scans (CI failed
    on it once). Each thread's own position makes every scan exact."""
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 400_000
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": np.arange(n, dtype=np.int64),
                             "s": [f"name{i % 997}" for i in range(n)]}),
                   path, compression="zstd", row_group_size=10_000)
    for _ in range(6):
        con = duckdb.connect()
        con.execute("SET threads = 8")
        sql_guard.mount(con)
        got = con.execute("SELECT sum(a), count(DISTINCT s), sum(length(s)) FROM read_parquet("
                          f"'{sql_guard.url(path)}')").fetchone()
        assert got == (n * (n - 1) // 2, 997, sum(len(f"name{i % 997}") for i in range(n)))
        con.close()
