"""The corpus of broken inputs (tests/data/bad/cases.json) and the nsys schema registry.

Every case of the corpus is one failure class: a committed file, or a ``recipe`` below that builds
it from a fixture (fixtures are not copied into the repository). Each must end with its exact
one-line message and exit status, and leave no run folder behind.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import FIXTURES, NSYS_FIXTURES

from tracekit.cli import run
from tracekit.collectors.nsys import versions as V
from tracekit.collectors.nsys.export import Export

BAD = Path(__file__).parent / "data" / "bad"
CASES = json.loads((BAD / "cases.json").read_text())
SMALL = FIXTURES / "nsys" / "nsys2025.5_cuda_graph.sqlite"  # schema 3.24.0, 3 kernels


def copy_export(src: Path, dst: Path, *sql: str) -> Path:
    """Copy an export and apply SQL statements to the copy."""
    shutil.copyfile(src, dst)
    dst.chmod(0o644)
    with sqlite3.connect(dst) as c:
        for s in sql:
            c.executescript(s)
    return dst


def unconstrained(table: str) -> str:
    """SQL that rebuilds ``table`` without its NOT NULL constraints (so tests can store NULLs)."""
    return (f'CREATE TABLE "_tmp" AS SELECT * FROM "{table}"; DROP TABLE "{table}"; '
            f'ALTER TABLE "_tmp" RENAME TO "{table}";')


def _nsys_truncated(dst: Path) -> None:
    dst.write_bytes(SMALL.read_bytes()[: SMALL.stat().st_size // 3])


def _foreign_sqlite(dst: Path) -> None:
    with sqlite3.connect(dst) as c:
        c.execute("CREATE TABLE measurements (t INTEGER, value REAL)")
        c.execute("INSERT INTO measurements VALUES (1, 2.5)")


def _kineto_truncated(dst: Path) -> None:
    with gzip.open(FIXTURES / "kineto" / "kineto_a100_triton.json.gz", "rb") as f:
        dst.write_bytes(f.read()[:3000])


def _kineto_doc(name: str = "kineto_a100_alexnet.json.gz") -> dict:
    return json.loads(gzip.open(FIXTURES / "kineto" / name).read())


def _kineto_deep(dst: Path) -> None:  # issue 17: 20,000 nested arrays in one event's args
    text = json.dumps(_kineto_doc())
    dst.write_text(text.replace('"args": {', '"args": {"x": ' + "[" * 20000 + "]" * 20000 + ", ", 1))


def _kineto_gz_truncated(dst: Path) -> None:
    dst.write_bytes((FIXTURES / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz").read_bytes()[:5000])


def _kineto_base_time(dst: Path) -> None:
    doc = _kineto_doc()
    doc["baseTimeNanoseconds"] = 2 ** 70
    dst.write_text(json.dumps(doc))


def _ncu_no_units(dst: Path) -> None:
    lines = (FIXTURES / "ncu" / "ncu2022.3_rtx2080ti_two_kernels.raw.csv").read_text().splitlines(keepends=True)
    dst.write_text(lines[0] + "".join(lines[2:]))


RECIPES = {
    "kineto_deep": _kineto_deep,
    "kineto_gz_truncated": _kineto_gz_truncated,
    "kineto_base_time": _kineto_base_time,
    "ncu_no_units": _ncu_no_units,
    "nsys_truncated": _nsys_truncated,
    "foreign_sqlite": _foreign_sqlite,
    "nsys_kernel_without_start": lambda d: copy_export(
        SMALL, d, 'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN start TO "startTime"'),
    "nsys_kernel_null_end": lambda d: copy_export(
        SMALL, d, unconstrained("CUPTI_ACTIVITY_KIND_KERNEL"),
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = NULL WHERE rowid = 2'),
    "nsys_kernel_text_start": lambda d: copy_export(
        SMALL, d, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'not a time' WHERE rowid = 1"),
    "nsys_stringids_broken": lambda d: copy_export(
        SMALL, d, "DROP TABLE StringIds; CREATE TABLE StringIds (x INTEGER)"),
    "nsys_newer_schema": lambda d: copy_export(
        SMALL, d,
        "UPDATE META_DATA_EXPORT SET value = '9.0.0' WHERE name = 'EXPORT_SCHEMA_VERSION'",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN futureColumn INTEGER",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN gridId"),
    "kineto_truncated": _kineto_truncated,
}


def build_case(case: dict, folder: Path) -> Path:
    if "recipe" in case:
        path = folder / case["file"]
        RECIPES[case["recipe"]](path)
        return path
    return BAD / case["file"]


def test_every_case_has_a_builder_or_file():
    for case in CASES:
        assert ("recipe" in case and case["recipe"] in RECIPES) or (BAD / case["file"]).is_file(), case
    assert len({c["class"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["class"] for c in CASES])
def test_bad_input_case(case, tmp_path, capsys):
    src = build_case(case, tmp_path)
    out = tmp_path / "out" / "run"
    rc = run(["convert", str(src), "-o", str(out)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("tracekit: ")]
    assert rc == case["exit"], err
    if case["exit"] == 0:
        assert err == [f"tracekit: warning: {case['warning']}"]
        manifest = json.loads((out / "manifest.json").read_text())
        assert case["warning"] in manifest["warnings"]
        return
    assert len(err) == 1, err
    assert err[0].startswith("tracekit: error: ")
    msg = err[0][len("tracekit: error: "):]
    # the message names the file (full path as given) and then says what is wrong
    name, expected = case["message"].split(": ", 1)
    assert msg.startswith(str(src.parent / name) + ": " + expected) or \
        msg.startswith(str(src) + ": " + expected), (msg, case["message"])
    assert not out.exists()
    assert not (out.parent.exists() and any(out.parent.iterdir()))


def test_newer_schema_is_read_best_effort(tmp_path):
    """Rows all there, the dropped column NULL and listed, the run usable."""
    import pyarrow.parquet as pq

    from tracekit.convert import convert
    from tracekit.runfolder import open_run

    src = tmp_path / "newer.sqlite"
    RECIPES["nsys_newer_schema"](src)
    out = convert([src], tmp_path / "run")
    run_ = open_run(out)
    reg = run_.manifest["sources"]["nsys"]["schema_registry"]
    assert reg["status"] == "newer" and reg["version"] == "9.0.0" and reg["newest_known"] == "3.25.0"
    assert reg["unknown_columns"] == {"CUPTI_ACTIVITY_KIND_KERNEL": ["futureColumn"]}
    assert reg["missing_columns"] == {"CUPTI_ACTIVITY_KIND_KERNEL": ["gridId"]}
    k = pq.read_table(run_.table_path("kernels"))
    assert k.num_rows == 3 and k.column("grid_id").null_count == 3
    assert k.column("start_ns").null_count == 0
    assert "grid_id" in run_.manifest["sources"]["nsys"]["missing_columns"]["kernels"]


# -- schema registry -----------------------------------------------------------------------------

def _version(path: Path) -> str:
    from tracekit.collectors.nsys.pipeline import _metadata

    with Export(path) as ex:
        return V.version_key(_metadata(ex)["export_schema_version"])


@pytest.mark.parametrize("path", NSYS_FIXTURES, ids=[p.stem for p in NSYS_FIXTURES])
def test_registry_matches_fixture(path):
    reg = V.registry()["versions"]
    key = _version(path)
    assert key in reg, f"{path.name}: schema {key} not registered; regenerate collectors/nsys/schemas.json"
    entry = reg[key]
    assert path.name in entry["fixtures"]
    with Export(path) as ex:
        tables = V.table_columns(ex.columns)
    assert set(tables) <= set(entry["tables"])
    for t, cols in tables.items():
        if key == V.PRE_3:  # two pre-3.0 exports of different nsys releases: their union
            assert set(cols) <= set(entry["tables"][t]), t
        else:
            assert cols == entry["tables"][t], t
    assert V.compare(None if key == V.PRE_3 else key, ex.columns)["status"] == "known"


def test_registry_covers_every_table_read():
    assert V.registry()["read_tables"] == list(V.READ_TABLES), \
        "tables read changed: regenerate collectors/nsys/schemas.json"
    from tracekit.collectors.nsys import mapping as M

    for tmap in M.TABLE_MAPS.values():
        assert set(tmap.sources) <= set(V.READ_TABLES)


def test_registry_versions_seen_in_fixtures():
    assert V.known_versions() == ["pre-3.0", "3.0.0", "3.1.2", "3.4.0", "3.16.1", "3.17.1",
                                  "3.23.3", "3.24.0", "3.25.0"]


def test_compare_statuses():
    cols = {"CUPTI_ACTIVITY_KIND_KERNEL": V.registry()["versions"]["3.25.0"]["tables"]
            ["CUPTI_ACTIVITY_KIND_KERNEL"]}
    assert V.compare("3.25.0", cols)["status"] == "known"
    assert V.compare("3.5.0", cols)["status"] == "unlisted"
    newer = V.compare("3.26.0", cols)
    assert newer["status"] == "newer" and newer["unknown_columns"] == {} \
        and newer["missing_columns"] == {}
    assert V.compare("10.0", cols)["status"] == "newer"


def test_every_fixture_converts_without_registry_warning(nsys_run):
    for p in NSYS_FIXTURES[:3]:
        m = json.loads((nsys_run(p.stem) / "manifest.json").read_text())
        assert m["sources"]["nsys"]["schema_registry"]["status"] == "known"
        assert not [w for w in m["warnings"] if "newer than any" in w]


# -- semantics of broken but readable data -------------------------------------------------------

SEM_SRC = FIXTURES / "nsys" / "nsys2023.1_rtx3090_conv_fp16.sqlite"  # 36 kernels, 59 NVTX ranges
# CUPTI_ACTIVITY_KIND_KERNEL rowids: 1 unknown string ID, 2 zero and 3 negative duration,
# 4 no API row, 5 duplicated. NVTX_EVENTS: the first two push/pop ranges never closed, and one
# start/end range opened on one thread and closed on another is added.
SEM_SQL = [
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = 999999 WHERE rowid = 1",
    'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start WHERE rowid = 2',
    'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 100 WHERE rowid = 3',
    "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = "
    "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 4)",
    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 5",
    'UPDATE NVTX_EVENTS SET "end" = NULL WHERE rowid IN '
    "(SELECT rowid FROM NVTX_EVENTS WHERE eventType = 59 ORDER BY rowid LIMIT 2)",
    'INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, endGlobalTid) '
    "SELECT min(start) + 10, min(start) + 510, 60, 'crossing', "
    "min(globalTid), min(globalTid) + 1 FROM NVTX_EVENTS WHERE eventType = 59",
]


@pytest.fixture(scope="module")
def sem_run(tmp_path_factory):
    from tracekit.convert import convert

    d = tmp_path_factory.mktemp("sem")
    src = copy_export(SEM_SRC, d / "broken.sqlite", *SEM_SQL)
    with sqlite3.connect(src) as c:
        first = c.execute("SELECT rowid, start, globalTid FROM NVTX_EVENTS WHERE eventType = 59 "
                          "ORDER BY rowid LIMIT 2").fetchall()
        k = {r[0]: r[1:] for r in c.execute(
            'SELECT rowid, start, "end", correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL')}
    return convert([src], d / "run"), {"open": first, "kernels": k}


def _table(run_dir, name):
    import pyarrow.parquet as pq

    return pq.read_table(run_dir / f"{name}.parquet")


def _manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


def test_open_nvtx_ranges_reported_not_dropped_nor_stretched(sem_run):
    run_dir, info = sem_run
    r = _table(run_dir, "nvtx_ranges").to_pylist()
    assert len(r) == 60  # 59 push/pop + the added start/end range
    open_ = [x for x in r if x["is_open"]]
    assert sorted(x["start_ns"] for x in open_) == sorted(s for _, s, _ in info["open"])
    assert all(x["end_ns"] is None and x["duration_ns"] is None for x in open_)
    m = _manifest(run_dir)
    assert m["sources"]["nsys"]["stats"]["nvtx_open_ranges"] == 2
    assert any(w.startswith("2 NVTX range(s) were never closed") for w in m["warnings"])


def test_start_end_range_closed_on_another_thread_is_matched(sem_run):
    run_dir, _ = sem_run
    r = [x for x in _table(run_dir, "nvtx_ranges").to_pylist() if x["name"] == "crossing"]
    assert len(r) == 1
    x = r[0]
    assert x["style"] == "start/end" and not x["is_open"]
    assert x["duration_ns"] == 500 and x["end_ns"] - x["start_ns"] == 500
    assert x["end_tid"] == x["tid"] + 1


def test_unknown_string_id_is_an_explicit_name(sem_run):
    run_dir, _ = sem_run
    k = _table(run_dir, "kernels")
    assert k.num_rows == 37  # 36 + the duplicate: no row dropped
    assert k.column("short_name").to_pylist().count("<unknown string 999999>") == 1
    assert k.column("short_name").null_count == 0


def test_kernel_without_api_row_is_kept_and_flagged(sem_run):
    from tracekit.query.engine import Engine

    run_dir, info = sem_run
    start, _end, corr = info["kernels"][4]
    k = _table(run_dir, "kernels").to_pylist()
    assert [x["start_ns"] for x in k if x["correlation_id"] == corr] == [start]
    rows = Engine([run_dir]).query("launch_latency", {}).to_pylist()
    no_api = [x for x in rows if not x["has_api"]]
    assert [(x["correlation_id"], x["kernel_start_ns"]) for x in no_api] == [(corr, start)]
    assert no_api[0]["api_name"] is None and no_api[0]["launch_latency_ns"] is None


def test_nonpositive_durations_counted_kept_in_summaries_excluded_from_time(sem_run):
    """Rule (docs/robustness.md): rows with duration <= 0 are kept and counted in the manifest;
    summary queries (nsys stats equivalents) include them as nsys stats does; time metrics (busy,
    idle, utilization: tk_gpu_activity) leave them out."""
    from tracekit.query.engine import Engine

    run_dir, info = sem_run
    m = _manifest(run_dir)
    assert m["sources"]["nsys"]["stats"]["nonpositive_duration_rows"]["kernels"] == 2
    assert m["nonpositive_duration_rows"] == {"kernels": 2}
    assert m["zero_duration_rows"] == {"kernels": 1}
    assert m["warnings"].count("1 row(s) of kernels end before they start (negative duration); "
                               "kept, time metrics leave them out") == 1
    k = _table(run_dir, "kernels").to_pylist()
    assert sorted(x["duration_ns"] for x in k)[:2] == [-100, 0]
    e = Engine([run_dir])
    summ = e.query("kernel_summary", {})
    assert sum(summ.column("instances").to_pylist()) == 37
    assert sum(summ.column("total_ns").to_pylist()) == sum(x["end_ns"] - x["start_ns"] for x in k)
    busy = e.sql("SELECT count(*) AS n FROM tk_gpu_activity() WHERE activity = 'kernel'")
    assert busy.column("n").to_pylist() == [35]


def test_duplicate_rows_detected(sem_run):
    run_dir, _ = sem_run
    m = _manifest(run_dir)
    assert m["duplicate_rows"] == {"kernels": 1}
    assert not any("duplicate" in w for w in m["warnings"])  # said once at convert, not repeated
    from tracekit.runfolder.integrity import notes

    assert any(n.startswith("1 duplicate row(s) in kernels") for n in notes(m))


def test_nonpositive_durations_counted_for_kineto_too(tmp_path):
    from tracekit.convert import convert

    ev = [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": ts, "dur": d,
           "args": {"device": 0, "stream": 7, "correlation": i}}
          for i, (n, ts, d) in enumerate([("a", 10, 5), ("b", 20, 0), ("c", 30, -2), ("d", 40, 1)])]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    m = _manifest(convert([p], tmp_path / "run"))
    assert m["nonpositive_duration_rows"] == {"kernels": 2}
    assert m["warnings"][-1:] == ["1 row(s) of kernels end before they start (negative duration); kept, "
                                  "time metrics leave them out"]
    assert m["zero_duration_rows"] == {"kernels": 1} and m["microsecond_tables"] == ["kernels"]
    assert m["tables"]["kernels"]["rows"] == 4
