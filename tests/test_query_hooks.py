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
