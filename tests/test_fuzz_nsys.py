"""Property-based fuzzing of the nsys collector with mutated SQLite exports.

Base: a trimmed copy of a real export (every table tracekit reads, at most 40 rows each). Each
example applies one mutation -- drop a table, drop a column, NULL a cell, store a value of the
wrong type, truncate the file -- and converts. Every example must end either in an
:class:`InputError` (exit 2) or in a run folder whose numbers are right: tables the mutation did
not touch equal the unmutated conversion cell for cell, the mutated table keeps every row, and a
cell that holds garbage (text, blob, an out-of-range real) comes out NULL, never as a number.

Deterministic (``derandomize=True``, no example database) and sized for CI (about 15 s).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit.collectors.nsys import mapping as M
from tracekit.collectors.nsys import versions as V
from tracekit.convert import convert
from tracekit.errors import InputError

SRC = FIXTURES / "nsys" / "nsys2023.1_rtx3090_conv_fp16.sqlite"  # kernels, API, memcpy, NVTX, sched
KEEP_ROWS = 40
FUZZ = settings(max_examples=20, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Garbage a damaged export may hold in a numeric column; each must become NULL (or an error).
GARBAGE = ["'abc'", "X'00ff'", "1e30", "''"]


def _base(path: Path) -> Path:
    shutil.copyfile(SRC, path)
    path.chmod(0o644)
    with sqlite3.connect(path) as c:
        tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for t in tables:
            if t.startswith("ENUM_") or t in V.READ_TABLES:
                if t not in ("StringIds",) and not t.startswith("ENUM_") and "META" not in t:
                    c.execute(f'DELETE FROM "{t}" WHERE rowid NOT IN '
                              f'(SELECT rowid FROM "{t}" ORDER BY rowid LIMIT {KEEP_ROWS})')
            else:
                c.execute(f'DROP TABLE "{t}"')
    with sqlite3.connect(path) as c:
        c.execute("VACUUM")
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz_nsys")
    b = _base(d / "base.sqlite")
    ref = convert([b], d / "ref")
    with sqlite3.connect(b) as c:
        cols = {t: [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')]
                for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows = {t: c.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in cols}
    return {"path": b, "ref": _read_run(ref), "cols": cols, "rows": rows, "dir": d}


def _read_run(run_dir: Path) -> dict:
    import json

    m = json.loads((run_dir / "manifest.json").read_text())
    return {"manifest": m,
            "tables": {n: pq.read_table(run_dir / t["file"]) for n, t in m["tables"].items()}}


# -- mutations ---------------------------------------------------------------------------------------

def _rebuild(c: sqlite3.Connection, table: str, cols: list[str]) -> None:
    """Recreate ``table`` with only ``cols``, without constraints (keeps rowid order)."""
    sel = ", ".join(f'"{x}"' for x in cols)
    c.executescript(f'CREATE TABLE "_fz" AS SELECT {sel} FROM "{table}" ORDER BY rowid; '
                    f'DROP TABLE "{table}"; ALTER TABLE "_fz" RENAME TO "{table}";')


def mutate(path: Path, m: tuple, cols: dict) -> None:
    kind = m[0]
    if kind == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * m[1])])
        return
    with sqlite3.connect(path) as c:
        if kind == "drop_table":
            c.execute(f'DROP TABLE "{m[1]}"')
        elif kind == "drop_column":
            _rebuild(c, m[1], [x for x in cols[m[1]] if x != m[2]])
        elif kind in ("null", "garbage"):
            _, table, column, row = m[:4]
            _rebuild(c, table, cols[table])
            value = "NULL" if kind == "null" else m[4]
            c.execute(f'UPDATE "{table}" SET "{column}" = {value} WHERE rowid = '
                      f'(SELECT rowid FROM "{table}" ORDER BY rowid LIMIT 1 OFFSET {row})')


def mutations(cols: dict, rows: dict):
    tables = sorted(t for t in cols if t in V.READ_TABLES and rows[t])
    col = st.sampled_from(tables).flatmap(
        lambda t: st.tuples(st.just(t), st.sampled_from(cols[t])))
    cell = col.flatmap(lambda tc: st.tuples(st.just(tc[0]), st.just(tc[1]),
                                            st.integers(0, rows[tc[0]] - 1)))
    return st.one_of(
        st.tuples(st.just("truncate"), st.floats(0.02, 0.98)),
        st.tuples(st.just("drop_table"), st.sampled_from(tables)),
        col.map(lambda tc: ("drop_column", *tc)),
        cell.map(lambda x: ("null", *x)),
        st.tuples(cell, st.sampled_from(GARBAGE)).map(lambda x: ("garbage", *x[0], x[1])),
    )


# -- the oracle ------------------------------------------------------------------------------------

def _outputs_of(source: str) -> list[M.TableMap]:
    return [tm for tm in M.TABLE_MAPS.values() if source in tm.sources]


def _dependent(tm: M.TableMap, column: str) -> set[str]:
    """tracekit columns of ``tm`` whose value may depend on export column ``column``."""
    out = set()
    for name, alts in tm.columns.items():
        if any(column in a.needs or f"{tm.sources[0]}.{column}" in a.needs for a in alts):
            out.add(name)
    if "start_ns" in out or "end_ns" in out:
        out.add("duration_ns")
    return out


def check(result: dict, ref: dict, m: tuple) -> None:
    kind = m[0]
    src = m[1] if kind != "truncate" else None
    touched = {tm.table for tm in _outputs_of(src)} if src else set()
    global_change = src in ("StringIds",) or (src or "").startswith("ENUM_") or \
        src in ("EXPORT_META_DATA", "META_DATA_EXPORT", "TARGET_INFO_SESSION_START_TIME")
    for name, want in ref["tables"].items():
        got = result["tables"].get(name)
        if name in touched and kind == "drop_table":
            assert got is None and name in result["manifest"]["not_captured"]
            continue
        assert got is not None, f"{name} lost"
        assert got.num_rows == want.num_rows, f"{name}: {got.num_rows} rows, want {want.num_rows}"
        if global_change or name in ("processes", "threads"):
            continue  # string/enum lookups may legitimately change text everywhere
        if name not in touched:
            assert got.equals(want), f"{name} changed by a mutation of {src}"
            continue
        tm = M.TABLE_MAPS[name]
        if tm.post:  # nesting / interval steps: any row may move; counts checked above
            continue
        dep = _dependent(tm, m[2]) if kind != "drop_table" else set(want.column_names)
        for c in want.column_names:
            g, w = got.column(c).to_pylist(), want.column(c).to_pylist()
            if c not in dep:
                assert g == w, f"{name}.{c} changed by a mutation of {src}.{m[2]}"
            elif kind == "drop_column":
                assert all(x is None or x == y for x, y in zip(g, w)) or \
                    len(tm.columns.get(c, ())) > 1, f"{name}.{c}: a value invented"
            else:
                row = m[3]
                others = [i for i in range(len(w)) if i != row]
                if tm.where:  # rows filtered: the mutated row's position is not known
                    continue
                assert [g[i] for i in others] == [w[i] for i in others], f"{name}.{c}"
                if kind == "garbage" and tm.columns[c][0].decode not in ("text",) and \
                        pq_is_numeric(want.column(c).type) and c in _raw_numeric(tm):
                    assert g[row] is None, f"{name}.{c}: garbage {m[4]} read as {g[row]}"


def _raw_numeric(tm: M.TableMap) -> set[str]:
    return {n for n, alts in tm.columns.items() if alts and alts[0].decode == "raw"}


def pq_is_numeric(t) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t)


def test_fuzz_mutated_exports(base, tmp_path_factory):
    counter = {"n": 0, "ok": 0, "err": 0}

    @FUZZ
    @given(m=mutations(base["cols"], base["rows"]))
    def run_one(m):
        counter["n"] += 1
        d = base["dir"] / f"ex{counter['n']}"
        d.mkdir()
        p = d / "mutated.sqlite"
        shutil.copyfile(base["path"], p)
        mutate(p, m, base["cols"])
        try:
            out = convert([p], d / "run")
        except InputError as exc:
            counter["err"] += 1
            msg = str(exc)
            assert "\n" not in msg.strip() and str(p) in msg
            assert not (d / "run").exists()
            assert not [x for x in d.iterdir() if ".tmp-" in x.name]
            return
        counter["ok"] += 1
        check(_read_run(out), base["ref"], m)
        shutil.rmtree(d, ignore_errors=True)

    run_one()
    assert counter["ok"] and counter["err"], counter


@pytest.mark.parametrize("m", [
    ("garbage", "CUPTI_ACTIVITY_KIND_KERNEL", "deviceId", 0, "'abc'"),
    ("garbage", "CUPTI_ACTIVITY_KIND_KERNEL", "gridX", 1, "X'00ff'"),
    ("garbage", "CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId", 2, "1e30"),
    ("null", "CUPTI_ACTIVITY_KIND_MEMCPY", "bytes", 0),
    ("drop_column", "CUPTI_ACTIVITY_KIND_KERNEL", "demangledName"),
    ("drop_table", "NVTX_EVENTS"),
])
def test_known_mutations(m, base, tmp_path):
    """A few mutations pinned so the exact outcome is visible in the test log."""
    p = tmp_path / "m.sqlite"
    shutil.copyfile(base["path"], p)
    mutate(p, m, base["cols"])
    out = convert([p], tmp_path / "run")
    check(_read_run(out), base["ref"], m)
