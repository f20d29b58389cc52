"""Careless use of the CLI loses nothing and leaks nothing (issue 17, docs/robustness.md).

Each case runs a real fixture through ``tracekit`` (in process), with the run folder, output path
or manifest mutated by the test: --force never deletes what tracekit did not write, manifest
table files stay inside their run folder, ``-o`` behaves like a Unix tool's (devices, pipes,
``-``, symlinks, umask, write errors), query parameters are checked, and ``tracekit sql`` reads
only the run folders unless --allow-external.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import threading

import pyarrow.parquet as pq
import pytest
from conftest import SMALL_EXPORT, one_error_line

from tracekit.cli import run


def _sha(p) -> str:
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


# -- --force ------------------------------------------------------------------------------------
def test_force_never_replaces_the_folder_holding_the_input(tmp_path, capsys):
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copyfile(SMALL_EXPORT, proj / "trace.sqlite")
    (proj / "train.py").write_text("print('mine')\n")
    assert run(["convert", str(proj / "trace.sqlite"), "-o", str(proj), "--force"]) == 2
    assert "holds the input" in one_error_line(capsys)
    assert sorted(p.name for p in proj.iterdir()) == ["trace.sqlite", "train.py"]
    assert _sha(proj / "trace.sqlite") == _sha(SMALL_EXPORT)


def test_force_never_replaces_the_working_directory(tmp_path, capsys, monkeypatch):
    (tmp_path / "notes.txt").write_text("keep")
    monkeypatch.chdir(tmp_path)
    assert run(["convert", str(SMALL_EXPORT), "-o", ".", "--force"]) == 2
    assert "working directory" in one_error_line(capsys)
    assert (tmp_path / "notes.txt").read_text() == "keep"


def test_force_never_replaces_a_folder_tracekit_did_not_write(tmp_path, capsys):
    other = tmp_path / "src"
    other.mkdir()
    (other / "main.c").write_text("int main;")
    assert run(["convert", str(SMALL_EXPORT), "-o", str(other), "--force"]) == 2
    assert "not a run folder written by tracekit" in one_error_line(capsys)
    assert (other / "main.c").read_text() == "int main;"


def test_study_force_never_replaces_its_input_run(small_run_copy, capsys):
    before = {p.name: _sha(p) for p in small_run_copy.iterdir()}
    assert run(["study", str(small_run_copy), "-o", str(small_run_copy), "--force"]) == 2
    assert "is the input" in one_error_line(capsys)
    assert {p.name: _sha(p) for p in small_run_copy.iterdir()} == before
    # a run folder is not a study folder either, input or not
    capsys.readouterr()
    other = small_run_copy.parent / "other"
    assert run(["convert", str(SMALL_EXPORT), "-o", str(other)]) == 0
    capsys.readouterr()
    assert run(["study", str(small_run_copy), "-o", str(other), "--force"]) == 2
    assert "not a study folder written by tracekit" in one_error_line(capsys)
    assert (other / "manifest.json").is_file()


# -- manifest.json table files ----------------------------------------------------------------
def _edit_manifest(run_dir, edit):
    m = run_dir / "manifest.json"
    d = json.loads(m.read_text())
    edit(d)
    m.write_text(json.dumps(d))


@pytest.mark.parametrize("file", ["../other/kernels.parquet", "/etc/passwd", "/nonexistent/x.parquet",
                                  "link.parquet"])
def test_manifest_table_file_outside_the_run_folder_is_refused(small_run_copy, capsys, file):
    other = small_run_copy.parent / "other"
    assert run(["convert", str(SMALL_EXPORT), "-o", str(other)]) == 0
    (small_run_copy / "link.parquet").symlink_to(other / "kernels.parquet")  # a link leading out
    _edit_manifest(small_run_copy, lambda d: d["tables"]["kernels"].update(file=file))
    capsys.readouterr()
    assert run(["sql", "SELECT count(*) FROM kernels", str(small_run_copy)]) == 2
    line = one_error_line(capsys)
    assert "is not inside the run folder" in line and "kernels" in line
    assert "No such file" not in line  # whether /etc/passwd exists is not told


@pytest.mark.parametrize("tables, needle", [
    (None, '"tables" is null, not an object'),
    ([], '"tables" is [], not an object'),
    (5, '"tables" is 5, not an object'),
    ({"kernels": {"file": None, "rows": 3}}, "table 'kernels' has the file null"),
    ({"kernels": 7}, "table 'kernels' is 7, not an object"),
    ({"kernels": {"file": "kernels.parquet", "rows": "3"}}, "table 'kernels' has rows \"3\""),
])
def test_damaged_manifest_tables_exit_2(small_run_copy, capsys, tables, needle):
    _edit_manifest(small_run_copy, lambda d: d.update(tables=tables))
    capsys.readouterr()
    assert run(["query", "kernel_summary", str(small_run_copy)]) == 2
    line = one_error_line(capsys)
    assert "manifest.json is damaged" in line and needle in line, line


@pytest.mark.parametrize("kind", ["directory", "/dev/zero"])
def test_table_file_that_is_not_a_regular_file_exit_2(small_run_copy, capsys, kind):
    k = small_run_copy / "kernels.parquet"
    k.unlink()
    if kind == "directory":
        k.mkdir()
    else:
        k.symlink_to("/dev/zero")  # resolves outside the run folder
    capsys.readouterr()
    assert run(["sql", "SELECT count(*) FROM kernels", str(small_run_copy)]) == 2
    line = one_error_line(capsys)
    assert "not a regular file" in line or "not inside the run folder" in line


# -- -o ---------------------------------------------------------------------------------------
def test_output_inside_the_run_folder_read_is_refused(small_run_copy, capsys):
    k = small_run_copy / "kernels.parquet"
    before = _sha(k)
    assert run(["query", "kernel_summary", str(small_run_copy), "-f", "parquet", "-o", str(k)]) == 2
    assert "inside the run folder" in one_error_line(capsys)
    assert _sha(k) == before
    assert run(["sql", "SELECT 1", str(small_run_copy), "-f", "csv", "-o", str(small_run_copy / "x.csv")]) == 2
    assert not (small_run_copy / "x.csv").exists()


def test_output_writes_through_devices_and_reports_write_errors(small_run_copy, capsys):
    if not (stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISCHR(os.stat("/dev/full").st_mode)):
        pytest.skip("this machine's /dev/null or /dev/full is not a device (replaced by some other program)")
    assert run(["query", "kernel_summary", str(small_run_copy), "-f", "csv", "-o", "/dev/null"]) == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    capsys.readouterr()
    assert run(["query", "kernel_summary", str(small_run_copy), "-f", "csv", "-o", "/dev/full"]) == 2
    assert "/dev/full: cannot write: No space left on device" in one_error_line(capsys)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_output_dash_is_stdout(small_run_copy, capsys):
    assert run(["sql", "SELECT count(*) AS n, sum(end_ns - start_ns) AS t FROM kernels",
                str(small_run_copy), "-f", "csv", "-o", "-"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"n","t"', "3,3840"]  # 1440 + 1184 + 1216


def test_output_into_a_fifo_is_written_through(small_run_copy, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    assert run(["sql", "SELECT count(*) AS n FROM kernels", str(small_run_copy), "-f", "csv", "-o", str(fifo)]) == 0
    reader.join(30)
    assert got == [b'"n"\n3\n'] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_output_follows_symlinks_and_gets_the_umask_mode(small_run_copy, tmp_path):
    old = os.umask(0o022)
    try:
        target = tmp_path / "real.csv"
        link = tmp_path / "link.csv"
        link.symlink_to(target)
        assert run(["sql", "SELECT 7 AS x", str(small_run_copy), "-f", "csv", "-o", str(link)]) == 0
        assert link.is_symlink() and target.read_text() == '"x"\n7\n'
        assert stat.S_IMODE(target.stat().st_mode) == 0o644
        target.chmod(0o640)  # a replaced file keeps its mode
        assert run(["sql", "SELECT 8 AS x", str(small_run_copy), "-f", "csv", "-o", str(target)]) == 0
        assert target.read_text() == '"x"\n8\n' and stat.S_IMODE(target.stat().st_mode) == 0o640
        odd = tmp_path / "what?"
        assert run(["sql", "SELECT 9 AS x", str(small_run_copy), "-f", "csv", "-o", str(odd)]) == 0
        assert odd.read_text() == '"x"\n9\n'
    finally:
        os.umask(old)


@pytest.mark.parametrize("cmd", ["query", "sql", "compare"])
@pytest.mark.parametrize("out, needle", [
    ("DIR", "is a directory"), ("DIR/missing/x.csv", "does not exist"), ("", "is a directory"),
])
def test_bad_output_paths_exit_2_before_any_work(small_run_copy, tmp_path, capsys, cmd, out, needle):
    out = out.replace("DIR", str(tmp_path))
    argv = {"query": ["query", "kernel_summary", str(small_run_copy)],
            "sql": ["sql", "SELECT 1", str(small_run_copy)],
            "compare": ["compare", str(small_run_copy), str(small_run_copy)]}[cmd]
    capsys.readouterr()
    assert run(argv + ["-f", "csv", "-o", out]) == 2
    assert needle in one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_study_output_empty_or_missing_parent_exit_2(small_run_copy, capsys):
    capsys.readouterr()
    assert run(["study", str(small_run_copy), "-o", ""]) == 2
    one_error_line(capsys)


# -- query parameters -----------------------------------------------------------------------------
@pytest.mark.parametrize("query, param, needle", [
    ("kernel_summary", "top=-5", "parameter top='-5' must be at least 0"),
    ("kernel_summary", "top=3.7", "parameter top='3.7' is not a whole number (BIGINT)"),
    ("kernel_summary", "top=1e3", "is not a whole number"),
    ("kernel_summary", "top=99999999999999999999", "out of range for BIGINT"),
    ("roofline", "per=bogus", "parameter per='bogus' is not one of kernel, launch"),
    ("roofline", "min_roof_pct=1,5", "is not a number (write 1.5, not 1,5)"),
    ("roofline", "min_roof_pct=150", "must be between 0 and 100"),
    ("kernel_summary", "top=yes", "is not a whole number"),
    ("memcpy_summary", "include_memset=maybe", "is not true or false"),
])
def test_invalid_parameter_values_exit_2(small_run_copy, capsys, query, param, needle):
    capsys.readouterr()
    assert run(["query", query, str(small_run_copy), "-p", param]) == 2
    assert needle in one_error_line(capsys)


def test_valid_parameter_values_still_work(small_run_copy, capsys):
    capsys.readouterr()
    assert run(["query", "kernel_summary", str(small_run_copy), "-p", "top=1", "-f", "csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    # grid and block (NULL without -p by=grid) follow the name
    assert len(rows) == 2 and rows[1].startswith('"run","add_one(const float *, float *, int)",,,3,3840,')


# -- tracekit sql: external access ------------------------------------------------------------------
@pytest.mark.parametrize("statement, needle", [
    ("SELECT * FROM read_text('/etc/passwd')", "file system operations are disabled"),
    ("SELECT * FROM glob('/etc/*')", "file system operations are disabled"),
    ("COPY (SELECT 1) TO 'OUT'", "COPY statements are not allowed"),
    ("ATTACH 'OUT' AS x", "ATTACH statements are not allowed"),
    ("SET enable_external_access = true", "SET statements are not allowed"),
    ("SELECT 1; COPY kernels TO 'OUT'", "COPY statements are not allowed"),
    ("INSTALL httpfs", "statements are not allowed"),
])
def test_sql_reads_only_the_run_folders(small_run_copy, tmp_path, capsys, statement, needle):
    out = tmp_path / "leak.csv"
    statement = statement.replace("OUT", str(out))
    capsys.readouterr()
    assert run(["sql", statement, str(small_run_copy)]) == 2
    assert needle in one_error_line(capsys)
    assert not out.exists()


def test_sql_allow_external_lifts_the_limit(small_run_copy, tmp_path, capsys):
    out = tmp_path / "k.csv"
    assert run(["sql", f"COPY (SELECT count(*) AS n FROM kernels) TO '{out}'", str(small_run_copy),
                "--allow-external"]) == 0
    assert out.read_text() == "n\n3\n"
    # without it the run's tables are read through their views only (read-only, issue 27)
    capsys.readouterr()
    k = small_run_copy / "kernels.parquet"
    assert run(["sql", f"SELECT count(*) AS n FROM read_parquet('{k}')", str(small_run_copy), "-f", "csv",
                "--allow-external"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"n"', "3"]
    assert run(["sql", f"SELECT count(*) AS n FROM read_parquet('{k}')", str(small_run_copy)]) == 2
    assert "through the views kernels" in one_error_line(capsys)
    assert pq.read_metadata(k).num_rows == 3


# -- DuckDB globs in run-folder paths (the engine's literal file lists) ------------------------------
def test_run_folder_path_with_glob_characters_is_literal(tmp_path, capsys):
    a, b = tmp_path / "run1", tmp_path / "run2"
    for d in (a, b):
        assert run(["convert", str(SMALL_EXPORT), "-o", str(d)]) == 0
    os.rename(b, tmp_path / "run[12]")  # a name that, as a glob, matches run1 and run2
    capsys.readouterr()
    assert run(["sql", "SELECT count(*) AS n FROM kernels", str(tmp_path / "run[12]"), "-f", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"n"', "3"]


@pytest.mark.parametrize("parent", ["what?", "it's", "a[1]*"])
def test_nsys_convert_under_a_folder_with_odd_characters(tmp_path, parent):
    """DuckDB reads '?' in a database path as URL parameters and ' ends an SQL literal: the nsys
    collector's work database under such a folder must still convert, with the same rows."""
    folder = tmp_path / parent
    folder.mkdir()
    assert run(["convert", str(SMALL_EXPORT), "-o", str(folder / "run")]) == 0
    assert run(["convert", str(SMALL_EXPORT), "-o", str(tmp_path / "plain")]) == 0
    tables = json.loads((tmp_path / "plain" / "manifest.json").read_text())["tables"]
    assert json.loads((folder / "run" / "manifest.json").read_text())["tables"].keys() == tables.keys()
    for table, info in tables.items():
        odd = pq.read_table(folder / "run" / info["file"])
        plain = pq.read_table(tmp_path / "plain" / info["file"])
        assert odd.equals(plain), table
    durations = pq.read_table(folder / "run" / tables["kernels"]["file"]).column("duration_ns")
    import sqlite3

    with sqlite3.connect(SMALL_EXPORT) as con:  # the raw export: end - start of its three kernels
        raw = sorted(r[0] for r in con.execute('SELECT "end" - start FROM CUPTI_ACTIVITY_KIND_KERNEL'))
    assert sorted(durations.to_pylist()) == raw == [1056, 1344, 1440]
