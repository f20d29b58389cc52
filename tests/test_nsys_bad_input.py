"""Bad nsys input through the CLI: exit status 2, one line on stderr naming the file and the
problem, and nothing left behind (no run folder, no hidden temporary folder)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import FIXTURES

from tracekit.cli import run as cli

SMALL = FIXTURES / "nsys" / "nsys2024.6_h200_nvfuser_bench.sqlite"


def copy_fixture(tmp_path: Path, name: str = "export.sqlite") -> Path:
    dst = tmp_path / "in" / name
    dst.parent.mkdir(exist_ok=True)
    shutil.copyfile(SMALL, dst)
    dst.chmod(0o644)
    return dst


def edit(path: Path, sql: str) -> Path:
    con = sqlite3.connect(path)
    con.executescript(sql)
    con.commit()
    con.close()
    return path


def truncated(tmp_path):
    p = copy_fixture(tmp_path)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    return p, ("truncated", "corrupt")


def corrupt(tmp_path):
    p = copy_fixture(tmp_path)
    data = bytearray(p.read_bytes())
    page = 4096
    for off in range(page, len(data), page * 3):  # garbage in every third page after the header
        data[off:off + page] = bytes((i * 37 + 11) % 256 for i in range(page))
    p.write_bytes(bytes(data))
    return p, ("corrupt", "truncated", "malformed", "cannot read")


def non_nsys(tmp_path):
    p = tmp_path / "in" / "other.sqlite"
    p.parent.mkdir(exist_ok=True)
    edit(p, "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ada');")
    return p, ("not an Nsight Systems",)


def empty(tmp_path):
    p = tmp_path / "in" / "empty.sqlite"
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(b"")
    return p, ("empty",)


def no_stringids(tmp_path):
    return edit(copy_fixture(tmp_path), "DROP TABLE StringIds;"), ("StringIds",)


def missing_column(tmp_path):
    p = edit(copy_fixture(tmp_path), 'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN "start";')
    return p, ("CUPTI_ACTIVITY_KIND_KERNEL", "start")


def not_sqlite(tmp_path):
    p = tmp_path / "in" / "notes.sqlite"
    p.parent.mkdir(exist_ok=True)
    p.write_text("this is not a database\n")
    return p, ("not a format tracekit reads", "not an SQLite")


@pytest.mark.parametrize("make", [truncated, corrupt, non_nsys, empty, no_stringids, missing_column, not_sqlite])
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path, capsys, make):
    path, words = make(tmp_path)
    out_parent = tmp_path / "out"
    out_parent.mkdir()
    rc = cli(["convert", str(path), "-o", str(out_parent / "run")])
    captured = capsys.readouterr()
    assert rc == 2, captured.err
    assert captured.err.count("\n") == 1, captured.err
    assert str(path) in captured.err
    assert any(w.lower() in captured.err.lower() for w in words), captured.err
    assert "Traceback" not in captured.err + captured.out
    assert list(out_parent.iterdir()) == []  # no run folder, no .run.tmp-* folder


def test_existing_run_folder_needs_force(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli(["convert", str(SMALL), "-o", str(out)]) == 0
    capsys.readouterr()
    first = json.loads((out / "manifest.json").read_text())["created_utc"]
    (out / "marker").write_text("old")
    assert cli(["convert", str(SMALL), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already exists" in err and str(out) in err
    assert (out / "marker").exists()  # untouched
    assert cli(["convert", str(SMALL), "-o", str(out), "--force"]) == 0
    assert not (out / "marker").exists()
    m = json.loads((out / "manifest.json").read_text())
    assert m["tables"]["nvtx_ranges"]["rows"] == 652 and m["created_utc"] >= first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_failure_with_force_keeps_the_old_run(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli(["convert", str(SMALL), "-o", str(out)]) == 0
    bad, _ = no_stringids(tmp_path)
    assert cli(["convert", str(bad), "-o", str(out), "--force"]) == 2
    assert json.loads((out / "manifest.json").read_text())["tables"]["nvtx_ranges"]["rows"] == 652
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "run"]
