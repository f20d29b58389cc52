"""The query core's extension point (tracekit.query.hooks): a name an extension provides is
created on first use with what it reads, counted in the tables a statement reads, offered in
"did you mean" hints; the shipped extensions come from the entry module. Issue 38 item 1."""

from __future__ import annotations

import pytest

from tracekit.errors import QueryError
from tracekit.query import Engine, catalog, hooks


@pytest.fixture
def answer_ext():
    calls = []

    def prepare(engine, con):
        calls.append(engine)
        con.execute("CREATE TEMP VIEW tk_test_answer AS SELECT count(*) + 42 AS n FROM kernels")

    ext = hooks.Extension("test_answer", frozenset({"tk_test_answer"}), frozenset({"kernels"}),
                          prepare, in_full=False)
    hooks.register(ext)
    yield calls
    hooks.unregister("test_answer")


def test_extension_names_are_created_on_first_use_with_what_they_read(answer_ext):
    with Engine([]) as eng:
        assert eng.sql("SELECT n FROM tk_test_answer").column("n").to_pylist() == [42]
        assert "kernels" in eng._created  # the view it reads was created before it
        eng.sql("SELECT n + 1 AS m FROM tk_test_answer")
        assert answer_ext == [eng]  # prepared once per engine
    assert catalog.tables_read("SELECT * FROM tk_test_answer") == {"kernels"}
    assert "tk_test_answer" in catalog.all_names()


def test_an_unregistered_name_is_not_there(answer_ext):
    hooks.unregister("test_answer")
    with Engine([]) as eng, pytest.raises(QueryError, match="tk_test_answer"):
        eng.sql("SELECT * FROM tk_test_answer")


def test_shipped_extensions_come_from_the_entry_module():
    names = {e.name for e in hooks.extensions()}
    assert {"roofline", "critical_path"} <= names
    assert hooks.provider("tk_critical_path").name == "critical_path"
    assert hooks.provider("gpu_peaks").name == "roofline"
    assert catalog.tables_read("SELECT * FROM tk_critical_path") >= {"kernels", "cuda_api"}
    # Engine.con creates the roofline (in full) but not the critical path (a replay)
    assert "<roofline>" in catalog.everything() and "<critical_path>" not in catalog.everything()


def test_session_gathers_warnings_and_empty_reasons(kineto_run):
    """Issue 38 item 2: a caller with many queries (a plot, the study, the timeline) gets what
    `tracekit query` prints: the runs' warnings and why a result is empty."""
    from tracekit.query import Session, run

    path = kineto_run("kineto_a100_alexnet")
    with Session([path]) as s:
        direct = run("cuda_api_summary", [path])
        assert s.query("cuda_api_summary") == direct.table  # the same rows as the front door
        # its 94 zero-duration cuda_api rows were said once at convert, not again (issue 36 item 6)
        assert s.warnings == direct.warnings == []
        assert s.query("nccl").num_rows == 0
        assert "no NCCL kernels" in s.empty["nccl"]
        assert s.sql("SELECT count(*) AS n FROM kernels").column("n").to_pylist() == [79]


def test_no_caller_outside_the_query_core_opens_an_engine():
    """Every analysis reaches DuckDB through tracekit.query.run or a Session (issue 38): the only
    modules that open an Engine are the front door (query/api.py: run() and Session) and the
    workers' half of a named query computed in parts (query/parts.py, which api.py calls). The
    what-if graph's parts on workers open a Session too (whatif/parts.py)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "tracekit"
    found = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py")
        if any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "Engine"
               for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))))
    assert found == ["query/api.py", "query/parts.py"]
