"""Every SQL file declares what it includes (issue 38 item 4, Perfetto's INCLUDE PERFETTO MODULE
as the model): the ``-- @include`` lines of a named query or macro module name exactly the macro
modules and extensions whose names it calls; a module's ``-- @private`` helpers are called by no
other file; the modules load in the order their includes give."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit.errors import QueryError
from tracekit.query import catalog, hooks, named_queries
from tracekit.query.named_queries import declarations, macro_modules, macro_topics

QUERIES = Path(__file__).resolve().parent.parent / "queries"


def _module_files() -> dict[str, Path]:
    return {m: QUERIES / t / "_macros.sql" for m, t in macro_modules().items()}


def _definitions() -> dict[str, str]:
    """Every name a SQL file may call -> the module (or extension) that defines it."""
    out = {}
    for m, f in _module_files().items():
        for x in catalog._MACRO.finditer(f.read_text(encoding="utf-8")):  # noqa: SLF001
            out[x.group(1).lower()] = m
    for ext in hooks.extensions():
        for n in ext.provides:
            out.setdefault(n, ext.name)
    return out


def _calls(text: str, own: str | None = None) -> set[str]:
    defs = _definitions()
    return {defs[i] for i in catalog.identifiers(text) if i in defs and defs[i] != own}


def _sql_files():
    for m, f in _module_files().items():
        yield f, m
    for f in sorted(QUERIES.glob("*/*.sql")):
        if not f.name.startswith("_"):
            yield f, None


@pytest.mark.parametrize("path,module", list(_sql_files()),
                         ids=lambda v: str(v.relative_to(QUERIES)) if isinstance(v, Path) else "")
def test_includes_are_what_the_file_calls(path, module):
    text = path.read_text(encoding="utf-8")
    declared = set(declarations(text)["include"])
    assert declared == _calls(text, module), (
        f"{path.relative_to(QUERIES.parent)}: its -- @include line must name exactly the modules "
        f"whose macros it calls: {' '.join(sorted(_calls(text, module)))}")


def test_private_helpers_stay_in_their_module():
    files = {f: f.read_text(encoding="utf-8") for f, _ in _sql_files()}
    defs = _definitions()
    for m, f in _module_files().items():
        for name in declarations(files[f])["private"]:
            assert defs.get(name) == m, f"{f}: @private {name} is not a macro of this module"
            callers = [str(g.relative_to(QUERIES)) for g, text in files.items()
                       if g != f and name in catalog.identifiers(text)]
            assert callers == [], f"{name} is private to {f.relative_to(QUERIES)}, called by {callers}"


def test_modules_load_after_what_they_include():
    order = ["core" if t == "" else t for t in macro_topics()]
    for m in order:
        for d in declarations(_module_files()[m].read_text(encoding="utf-8"))["include"]:
            if d != "roofline":
                assert order.index(d) < order.index(m)


def test_a_circle_of_includes_is_an_error(monkeypatch):
    texts = {"": "-- @include ranks\n", "ranks": "-- @include core\n"}
    monkeypatch.setattr(named_queries, "macros_sql", lambda t="": texts.get(t, ""))
    with pytest.raises(QueryError, match="circle"):
        macro_topics()


def test_named_queries_carry_their_includes():
    assert named_queries.get_query("nccl").includes == ("core", "cpu", "ranks")
    assert named_queries.get_query("kernel_summary").includes == ("core",)  # tk_stddev_samp
    assert named_queries.get_query("clock_offsets").includes == ()
    assert "@include" not in named_queries.get_query("nccl").details


def test_step_name_regex_is_written_once():
    """The tracekit step range's regex: one macro in queries/_macros.sql (three copies before),
    the same text as the Python side's tracekit.schema.step_ranges.STEP_SQL_REGEX."""
    from tracekit.schema.step_ranges import STEP_SQL_REGEX

    text = (Path(__file__).resolve().parents[1] / "queries" / "_macros.sql").read_text()
    assert f"CREATE OR REPLACE TEMP MACRO tk_step_regex() AS '{STEP_SQL_REGEX}';" in text
    assert text.count(STEP_SQL_REGEX) == 1


def test_pass_through_columns_take_their_docs_from_the_schema():
    """Issue 38 item 4: ``-- @column run_id`` and ``-- @column NAME from TABLE[.COLUMN]`` take
    the unit and description of tracekit.schema instead of repeating them."""
    from tracekit import schema

    q = named_queries.parse_query(
        "-- q: x\n-- @column run_id\n-- @column pid from kernels\n-- @column src from kernels.pid\n"
        "-- @column total_ns ns Sum.\nSELECT 1", "q.sql")
    pid = schema.TABLES["kernels"].column("pid")
    assert [(c.name, c.unit, c.description) for c in q.columns] == [
        ("run_id", "id", "Run folder the row comes from."), ("pid", "id", pid.description),
        ("src", "id", pid.description), ("total_ns", "ns", "Sum.")]
    for line, why in (("-- @column pid", "no unit and description"),
                      ("-- @column pid from kernelz", "unknown table 'kernelz'"),
                      ("-- @column pid from kernels.pidd", "has no column 'pidd'")):
        with pytest.raises(QueryError, match=f"^q.sql: @column pid.*{why}"):
            named_queries.parse_query(f"-- q: x\n{line}\nSELECT 1", "q.sql")
    # no named query writes the run_id doc out again
    texts = [p.read_text(encoding="utf-8") for p in QUERIES.rglob("*.sql")]
    assert sum(t.count("\n-- @column run_id\n") for t in texts) == 51
    assert not any("@column run_id " in t for t in texts)
