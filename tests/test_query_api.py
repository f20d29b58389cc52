"""The front door for queries (issue 23): ``tracekit.query.run`` returns the rows the engine
computes, the units of the query's header, its notices, the runs' warnings and why a result is
empty, for named queries and SQL alike; with workers, the same rows."""

from __future__ import annotations

import pytest

from tracekit.errors import QueryError
from tracekit.query import Engine, QueryResult, get_query, run

# two kernels on one stream: busy 30 + 20 = 50 ns of a 10..70 ns window
KERNELS = {"start_ns": [10, 40], "end_ns": [40, 60], "duration_ns": [30, 20],
           "device_id": [0, 0], "stream_id": [7, 7], "correlation_id": [1, 2],
           "name": ["gemm", "relu"], "pid": [5, 5]}


@pytest.fixture
def one_run(run_factory):
    return run_factory({"kernels": KERNELS}, {"warnings": ["kernels: 3 rows had no stream"]},
                       name="r1")


def test_named_query_rows_units_and_warnings(one_run):
    res = run("kernel_summary", [one_run])
    assert isinstance(res, QueryResult) and res.name == "kernel_summary"
    with Engine([one_run]) as eng:
        assert res.table.equals(eng.query("kernel_summary"))
    rows = {r["name"]: r["total_ns"] for r in res.table.to_pylist()}
    assert rows == {"gemm": 30, "relu": 20}
    q = get_query("kernel_summary")
    assert res.units == {c.name: (c.unit, c.description) for c in q.columns}
    assert res.units["total_ns"][0] == "ns"
    assert res.warnings == ["run r1: kernels: 3 rows had no stream"]
    assert res.empty_reason is None


def test_sql_and_its_empty_reason(one_run):
    res = run("SELECT name FROM kernels WHERE duration_ns > 100", [one_run])
    assert res.name is None and res.units == {} and res.table.num_rows == 0
    assert res.empty_reason.startswith("the statement returned no rows: no row matched")
    assert "2 rows of kernels in run r1" in res.empty_reason
    assert run("SELECT sum(duration_ns) AS busy FROM kernels", [one_run]).table.to_pylist() == [{"busy": 50}]


def test_empty_named_query_says_what_is_missing(one_run):
    res = run("memcpy_summary", [one_run])
    assert res.table.num_rows == 0
    assert res.empty_reason.startswith("memcpy_summary returned no rows: run r1 has no memcpy")


def test_name_or_sql_and_errors(one_run):
    with pytest.raises(QueryError, match="unknown query 'kernel_sumary'.*kernel_summary"):
        run("kernel_sumary", [one_run])
    with pytest.raises(QueryError, match="no parameter 'bogus'"):
        run("kernel_summary", [one_run], {"bogus": "1"})
    with pytest.raises(QueryError, match="parameters are for named queries"):
        run("SELECT 1", [one_run], {"top": "1"})
    with pytest.raises(QueryError, match="unknown query"):
        run("SELECT", [one_run], sql=False)
    with pytest.raises(QueryError, match="SQL failed"):  # sql=True: a bare word is SQL, not a name
        run("kernel_summary", [one_run], sql=True)
    with Engine([one_run]) as eng:  # an open engine is reused: its runs, its cached steps
        assert run("kernel_summary", engine=eng).table.num_rows == 2
        assert run("kernel_summary", engine=eng, params={"top": "1"}).table.num_rows == 1


def test_in_parts_on_local_workers_gives_the_same_rows(run_factory):
    runs = [run_factory({"kernels": KERNELS}, name=f"r{i}") for i in range(3)]
    whole = run("kernel_summary", runs)
    parts = run("kernel_summary", runs, jobs=2)
    assert parts.table.equals(whole.table) and parts.table.num_rows == 6
    assert parts.units == whole.units and parts.notices == whole.notices
