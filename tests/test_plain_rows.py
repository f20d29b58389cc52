"""The query path without pyarrow (issue 39) writes what the Arrow path writes, byte for byte.

- :func:`tracekit.cli.serialize.float_text` against pyarrow's CSV writer on any float64;
- CSV and JSON of a :class:`tracekit.duck.Rows` against those of the Arrow table DuckDB returns
  for the same relation, on random tables of every plain type (nulls, quotes, newlines, NaN);
- :func:`tracekit.runfolder.footer.read_footer` against pyarrow's footer reader on every table
  file of a converted fixture and on nested columns, and only ValueError for damaged footers;
- :func:`tracekit.duck.fetch_query` (a named query's text run once) as :func:`~tracekit.duck.fetch`;
  ``@few_rows`` queries as Rows over tables larger than the input limit, and Arrow past it.
"""

from __future__ import annotations

import dataclasses
import io
import struct

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit.cli.serialize import csv_bytes, float_text, json_text
from tracekit.duck import PLAIN_TYPES, Rows, fetch, fetch_query
from tracekit.runfolder.footer import read_footer


def _arrow_csv_floats(values: list[float]) -> list[str]:
    buf = io.BytesIO()
    pacsv.write_csv(pa.table({"x": pa.array(values, pa.float64())}), buf)
    return buf.getvalue().decode().splitlines()[1:]


EDGES = [0.0, -0.0, 1.0, 100.0, 1e9, 1e10, 999999999.5, 9999999999.0, 1e-6, 1e-7, 1.5e-6,
         0.1, 1 / 3, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, float("nan"),
         float("inf"), float("-inf"), -123456.789, 199.83993594874875, 2.0**53, 2.0**63]


def test_float_text_equals_pyarrow_at_the_edges():
    assert [float_text(v) for v in EDGES] == _arrow_csv_floats(EDGES)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=50))
def test_float_text_equals_pyarrow(values):
    assert [float_text(v) for v in values] == _arrow_csv_floats(values)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-30, 30).map(lambda e: 10.0**e), min_size=1, max_size=30),
       st.integers(1, 9))
def test_float_text_equals_pyarrow_near_powers_of_ten(powers, mult):
    values = [p * mult for p in powers] + [p * mult * 1.0000001 for p in powers]
    assert [float_text(v) for v in values] == _arrow_csv_floats(values)


TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ['', '"', 'a,b', 'x\ny', '""', 'é\r\n'])
COLUMNS = {
    "TINYINT": (pa.int8(), st.integers(-128, 127)),
    "SMALLINT": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "INTEGER": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "BIGINT": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "UTINYINT": (pa.uint8(), st.integers(0, 255)),
    "USMALLINT": (pa.uint16(), st.integers(0, 2**16 - 1)),
    "UINTEGER": (pa.uint32(), st.integers(0, 2**32 - 1)),
    "UBIGINT": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "DOUBLE": (pa.float64(), st.floats()),
    "VARCHAR": (pa.string(), TEXT),
    "BOOLEAN": (pa.bool_(), st.booleans()),
}


@st.composite
def plain_tables(draw):
    n = draw(st.integers(0, 8))
    kinds = draw(st.lists(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=6))
    cols = {}
    for i, kind in enumerate(kinds):
        typ, values = COLUMNS[kind]
        cols[f'c{i} "{kind}"'] = pa.array(draw(st.lists(st.none() | values, min_size=n, max_size=n)), typ)
    return pa.table(cols)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain_tables())
def test_rows_write_as_the_arrow_table_does(table):
    con = duckdb.connect()
    try:
        rows = fetch(con.from_arrow(table), arrow=False)
        arrow = fetch(con.from_arrow(table))
        con.register("t", table)
        once = fetch_query(con, "SELECT * FROM t", arrow=False)
    finally:
        con.close()
    assert isinstance(rows, Rows) and set(rows.types) <= PLAIN_TYPES
    assert isinstance(once, Rows) and (once.names, once.types) == (rows.names, rows.types)
    assert csv_bytes(once) == csv_bytes(rows)  # (NaN is not equal to itself in the tuples)
    assert isinstance(arrow, pa.Table)
    assert csv_bytes(rows) == csv_bytes(arrow)
    assert json_text(rows) == json_text(arrow)
    names = list(reversed(rows.column_names))[:2]
    assert csv_bytes(rows.select(names)) == csv_bytes(arrow.select(names))


def test_rows_keep_the_order_and_give_way_to_arrow_past_the_limit(monkeypatch):
    """Rows come back in the query's order (a sort over more rows than one thread's share), and
    past ROWS_CELLS values (lowered here) the result is Arrow, every row of it."""
    from tracekit import duck

    monkeypatch.setattr(duck, "ROWS_CELLS", 20_000)
    con = duckdb.connect()
    try:
        con.execute("SET threads = 4")
        sql = "SELECT (range * 7919) % 10007 AS k, range AS i FROM range(10000) ORDER BY k DESC"
        want = con.sql(sql).fetchall()
        rows = fetch(con.sql(sql), arrow=False)
        assert isinstance(rows, Rows) and rows.rows == want
        big = fetch(con.sql(sql.replace("10000", "10001")), arrow=False)
        assert isinstance(big, pa.Table) and big.num_rows == 10001
        assert big.to_pylist()[:3] == [dict(zip(["k", "i"], r)) for r in con.sql(sql).fetchall()[:3]]
        two = fetch(con.sql("SELECT 1 AS a, 2 AS a"), arrow=False)  # names twice: Arrow
        assert isinstance(two, pa.Table) and two.column_names == ["a", "a"]
        rows = fetch_query(con, sql, arrow=False)
        assert isinstance(rows, Rows) and rows.rows == want
        big = fetch_query(con, sql.replace("10000", "10001"), arrow=False)
        assert isinstance(big, pa.Table) and big.num_rows == 10001
        two = fetch_query(con, "SELECT 1 AS a, 2 AS a", arrow=False)
        assert isinstance(two, pa.Table) and two.column_names == ["a", "a"]
    finally:
        con.close()


def test_other_types_come_as_arrow():
    con = duckdb.connect()
    try:
        for sql in ("SELECT 1::HUGEINT", "SELECT 1.5::DECIMAL(4, 1)", "SELECT 1.5::FLOAT",
                    "SELECT TIMESTAMP '2026-12-07 10:00:00'", "SELECT [1, 2]", "SELECT 'a'::BLOB"):
            assert isinstance(fetch(con.sql(sql), arrow=False), pa.Table), sql
            assert isinstance(fetch_query(con, sql, arrow=False), pa.Table), sql
    finally:
        con.close()


def test_fetch_query_runs_a_small_plain_result_once():
    """Rows come from one run of the statement (a sequence counts the runs); a result of other
    types runs a second time, for Arrow, as fetch_query's docstring says."""
    con = duckdb.connect()
    try:
        con.execute("CREATE SEQUENCE s")
        got = fetch_query(con, "SELECT nextval('s') AS v, 'x' AS t", arrow=False)
        assert isinstance(got, Rows) and got.rows == [(1, "x")]
        assert con.sql("SELECT nextval('s')").fetchall() == [(2,)]
        arrow = fetch_query(con, "SELECT nextval('s') AS v, [1] AS l", arrow=False)
        assert isinstance(arrow, pa.Table) and arrow.column("v").to_pylist() == [4]
        assert fetch_query(con, "SELECT 7 AS v").column("v").to_pylist() == [7]  # arrow=True
    finally:
        con.close()


def test_footer_equals_pyarrow_on_every_table_file(small_run, tmp_path):
    nested = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"a": [[1, 2], None], "b": [{"x": 1, "y": [1]}, None],
                             "m": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())),
                             "flag": [True, None]}), nested, row_group_size=1)
    files = sorted(small_run.glob("*.parquet")) + [nested]
    assert len(files) > 3
    for f in files:
        meta = pq.read_metadata(f)
        want = (meta.num_rows, tuple(meta.schema.to_arrow_schema().names))
        assert read_footer(f) == want, f.name
        assert read_footer(f, f.read_bytes()) == want, f.name


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_footer_raises_value_error_only(small_run, data):
    raw = bytearray((small_run / "kernels.parquet").read_bytes())
    (length,) = struct.unpack("<I", raw[-8:-4])
    start = len(raw) - 8 - length
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(start, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, 3))
    blob = bytes(raw[:len(raw) - cut * data.draw(st.integers(1, 40))])
    try:
        rows, names = read_footer("x.parquet", blob)
    except ValueError:
        return
    assert rows >= 0 and all(isinstance(n, str) for n in names)


@pytest.mark.parametrize("blob", [b"", b"PAR1", b"x" * 20, b"PAR1" + b"\0" * 4 + b"\xff\xff\xff\x7fPAR1",
                                  b"PAR1\x00\x00\x00\x00\x04\x00\x00\x00PARE"])
def test_not_a_footer(blob):
    with pytest.raises(ValueError):
        read_footer("x.parquet", blob)


def test_rows_only_over_few_input_rows(small_run, monkeypatch):
    """`run(..., arrow=False)` gives Rows where the tables read hold at most ROWS_CELLS rows (the
    manifests' counts), else Arrow: a large result over large tables would run twice."""
    from tracekit import duck
    from tracekit.query import get_query, run

    got = run("kernel_summary", [small_run], arrow=False)
    assert isinstance(got.table, Rows) and got.table.num_rows > 0
    same = run("kernel_summary", [small_run])
    assert csv_bytes(got.table) == csv_bytes(same.table)
    monkeypatch.setattr(duck, "ROWS_CELLS", 2)
    import tracekit.query.engine as engine

    monkeypatch.setattr(engine, "ROWS_CELLS", 2)
    many = dataclasses.replace(get_query("kernel_summary"), few_rows=False)  # as without @few_rows
    assert isinstance(run(many, [small_run], arrow=False).table, pa.Table)
    assert isinstance(run("SELECT count(*) AS n FROM kernels", [small_run], arrow=False).table, pa.Table)
    monkeypatch.setattr(engine, "ROWS_CELLS", 10**6)
    assert isinstance(run("SELECT count(*) AS n FROM kernels", [small_run], arrow=False).table, Rows)


def test_few_rows_queries_come_as_rows_over_large_tables(small_run, monkeypatch):
    """A query whose header says ``@few_rows`` comes as Rows even where its tables hold more rows
    than the input limit (lowered to 2 here), with the same bytes as Arrow; nvtx_summary's
    ``raw=true`` is excepted (``@few_rows unless raw=true``); a few-rows query whose result is
    past ROWS_CELLS after all comes whole, as Arrow."""
    import tracekit.query.engine as engine
    from tracekit import duck
    from tracekit.query import get_query, run

    monkeypatch.setattr(engine, "ROWS_CELLS", 2)
    for name in ("kernel_summary", "cuda_api_summary"):
        assert get_query(name).few_rows
        got = run(name, [small_run], arrow=False)
        assert isinstance(got.table, Rows) and got.table.num_rows > 0, name
        assert csv_bytes(got.table) == csv_bytes(run(name, [small_run]).table), name
    nvtx = get_query("nvtx_summary")
    assert nvtx.has_few_rows({}) and nvtx.has_few_rows({"raw": "no"})
    assert not nvtx.has_few_rows({"raw": "TRUE"}) and not nvtx.has_few_rows({"raw": "1"})
    assert not get_query("nvtx_gpu_projection").has_few_rows({})
    monkeypatch.setattr(duck, "ROWS_CELLS", 12)  # a row of cuda_api_summary's 11 columns
    whole = run("cuda_api_summary", [small_run], arrow=False).table
    assert isinstance(whole, pa.Table)
    assert whole.num_rows == run("cuda_api_summary", [small_run]).table.num_rows > 1


@pytest.mark.parametrize("line", ["@few_rows sometimes", "@few_rows unless", "@few_rows unless raw",
                                  "@few_rows unless nope=1", "@few_rows unless raw=maybe"])
def test_malformed_few_rows_line(line):
    from tracekit.errors import QueryError
    from tracekit.query.named_queries import parse_query

    text = ("-- q: a query.\n-- @param raw BOOLEAN false  Raw.\n-- @column n count  N.\n"
            f"-- @key n\n-- {line}\nSELECT 1 AS n")
    with pytest.raises(QueryError, match="few_rows|raw"):
        parse_query(text, "q.sql")
