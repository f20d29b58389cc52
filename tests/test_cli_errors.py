"""Errors end in one place: the CLI prints one line on stderr and exits 2 (bad input or usage),
1 (internal error) or 130 (interrupted); ``--debug`` adds the traceback.

Checked both in-process (``tracekit.cli.run``) and through a real ``python -m tracekit``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys

import pytest
from conftest import ROOT, SMALL_EXPORT, one_error_line

from tracekit import errors
from tracekit.cli import run


@pytest.fixture
def bad_inputs(tmp_path):
    """One small broken input per failure class handled before any table is read."""
    text = tmp_path / "notes.txt"
    text.write_text("not a profile\n")
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    trunc = tmp_path / "truncated.sqlite"
    trunc.write_bytes(SMALL_EXPORT.read_bytes()[:40_000])
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE t (x INTEGER)")
    return {"text": text, "empty": empty, "trunc": trunc, "other": other}


# -- in-process ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case, needles", [
    ("missing", ["nope.sqlite", "no such file"]),
    ("text", ["notes.txt", "not a format tracekit reads"]),
    ("empty", ["empty.sqlite", "file is empty"]),
    ("trunc", ["truncated.sqlite", "truncated or corrupt"]),
    ("other", ["other.sqlite", "StringIds"]),
])
def test_bad_input_is_one_line_exit_2(case, needles, bad_inputs, tmp_path, capsys):
    src = tmp_path / "nope.sqlite" if case == "missing" else bad_inputs[case]
    out = tmp_path / "run"
    assert run(["convert", str(src), "-o", str(out)]) == 2
    one_error_line(capsys, *needles)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_existing_run_folder_is_exit_2_and_untouched(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert run(["convert", str(SMALL_EXPORT), "-o", str(out)]) == 2
    one_error_line(capsys, str(out), "already exists", "--force")
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_force_replaces_existing_run_folder(tmp_path, capsys):
    out = tmp_path / "run"
    assert run(["convert", str(SMALL_EXPORT), "-o", str(out)]) == 0
    (out / "keep.txt").write_text("old")  # a file left in a run folder tracekit wrote
    assert run(["convert", str(SMALL_EXPORT), "-o", str(out), "--force"]) == 0
    assert (out / "manifest.json").is_file() and not (out / "keep.txt").exists()


@pytest.mark.parametrize("argv, needles", [
    (["query"], ["Missing argument", "tracekit query --help"]),
    (["bogus"], ["unknown command 'bogus'"]),
    (["quer"], ["unknown command 'quer' (did you mean 'query'?)"]),
    (["convert", "x.sqlite"], ["Missing option", "--output"]),
    (["convert", "x.sqlite", "-o", "r", "--nope"], ["unknown option '--nope'"]),
    (["query", "--formt", "json"], ["unknown option '--formt' (did you mean '--format'?)"]),
])
def test_usage_errors_are_one_line_exit_2(argv, needles, capsys):
    assert run(argv) == 2
    one_error_line(capsys, *needles)


def test_unknown_query_is_exit_2(run_factory, capsys):
    rd = run_factory({})
    assert run(["query", "no_such_query", str(rd)]) == 2
    one_error_line(capsys, "unknown query 'no_such_query'")


def test_query_on_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert run(["query", "kernel_summary", str(tmp_path)]) == 2
    one_error_line(capsys, str(tmp_path), "not a run folder", "manifest.json")


def test_no_arguments_shows_help_exit_2(capsys):
    assert run([]) == 2
    cap = capsys.readouterr()
    text = cap.out + cap.err
    assert "Usage" in text and "convert" in text and "Traceback" not in text


def test_help_exit_0(capsys):
    assert run(["--help"]) == 0
    assert "convert" in capsys.readouterr().out


def _boom(*a, **k):
    raise RuntimeError("boom\nsecond line")


def test_internal_error_is_one_line_exit_1(monkeypatch, tmp_path, capsys):
    import tracekit.convert

    monkeypatch.setattr(tracekit.convert, "convert", _boom)
    assert run(["convert", str(SMALL_EXPORT), "-o", str(tmp_path / "r")]) == 1
    line = one_error_line(capsys, "internal error: RuntimeError: boom second line", "--debug")
    assert "report" in line


def test_debug_shows_traceback(monkeypatch, tmp_path, capsys):
    import tracekit.convert

    monkeypatch.setattr(tracekit.convert, "convert", _boom)
    assert run(["--debug", "convert", str(SMALL_EXPORT), "-o", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "RuntimeError: boom" in err
    assert err.rstrip().splitlines()[-1].startswith("tracekit: error: internal error")


def test_debug_shows_traceback_for_input_errors_too(tmp_path, capsys):
    assert run(["--debug", "convert", str(tmp_path / "nope.sqlite"), "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "InputError" in err


def test_keyboard_interrupt_is_exit_130(monkeypatch, tmp_path, capsys):
    import tracekit.convert

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tracekit.convert, "convert", interrupted)
    assert run(["convert", str(SMALL_EXPORT), "-o", str(tmp_path / "r")]) == 130
    one_error_line(capsys, "interrupted")


def test_error_classes_exit_codes():
    for cls in (errors.InputError, errors.UnsupportedFormatError, errors.MissingTableError,
                errors.MissingColumnError, errors.RunFolderError, errors.QueryError,
                errors.ToolNotFoundError):
        assert issubclass(cls, errors.InputError) and cls.exit_code == 2
    assert errors.SchemaError.exit_code == 1 and errors.TracekitError.exit_code == 1
    assert str(errors.MissingColumnError("lacks x", path="/a/b.sqlite")) == "/a/b.sqlite: lacks x"


def test_multiline_library_message_becomes_one_line(monkeypatch, tmp_path, capsys):
    import tracekit.convert

    def bad(*a, **k):
        raise errors.MissingColumnError("table KERNEL\n  lacks column start", path="f.sqlite")

    monkeypatch.setattr(tracekit.convert, "convert", bad)
    assert run(["convert", str(SMALL_EXPORT), "-o", str(tmp_path / "r")]) == 2
    one_error_line(capsys, "f.sqlite: table KERNEL lacks column start")


# -- real subprocess ----------------------------------------------------------------------------

def _tk(*args, cwd=None) -> subprocess.CompletedProcess:
    # cwd=ROOT: `python -m` then imports this checkout's tracekit whatever is pip-installed
    return subprocess.run([sys.executable, "-m", "tracekit", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_subprocess_bad_inputs(bad_inputs, tmp_path):
    for case in ("text", "trunc", "other"):
        p = _tk("convert", bad_inputs[case], "-o", tmp_path / case, cwd=tmp_path)
        assert p.returncode == 2, (case, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tracekit: error: ")
        assert bad_inputs[case].name in lines[0] and "Traceback" not in p.stderr
        assert p.stdout == ""
        assert not (tmp_path / case).exists()


def test_subprocess_usage_error(tmp_path):
    p = _tk("bogus", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "bogus" in p.stderr


def test_subprocess_debug_traceback(bad_inputs, tmp_path):
    p = _tk("--debug", "convert", bad_inputs["trunc"], "-o", tmp_path / "r", cwd=tmp_path)
    assert p.returncode == 2
    assert "Traceback (most recent call last)" in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("tracekit: error: ")


def test_subprocess_internal_error(tmp_path):
    code = ("import sys, tracekit.convert as c\n"
            "def boom(*a, **k): raise ZeroDivisionError('division by zero')\n"
            "c.convert = boom\n"
            "from tracekit.cli import run\n"
            "sys.exit(run(sys.argv[1:]))\n")
    args = ["convert", str(SMALL_EXPORT), "-o", str(tmp_path / "r")]
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        "tracekit: error: internal error: ZeroDivisionError: division by zero "
        "(run with --debug for the traceback, and please report it)"]
    p = subprocess.run([sys.executable, "-c", code, "--debug", *args], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 1 and "Traceback" in p.stderr and "ZeroDivisionError" in p.stderr


def test_subprocess_success_is_quiet_on_stdout(tmp_path):
    p = _tk("convert", SMALL_EXPORT, "-o", tmp_path / "r", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and (tmp_path / "r" / "manifest.json").is_file()
    assert shutil.which(sys.executable)


# -- damaged run folders --------------------------------------------------------------------------

@pytest.fixture
def small_run(tmp_path):
    out = tmp_path / "run"
    assert run(["convert", str(SMALL_EXPORT), "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize("damage, needles", [
    ("missing_parquet", ["kernels.parquet is listed in manifest.json but missing"]),
    ("garbage_parquet", ["kernels.parquet is not readable Parquet"]),
    ("bad_manifest", ["manifest.json is not valid JSON"]),
    ("layout_version", ["run folder layout version 99 is not one this tracekit reads"]),
])
def test_damaged_run_folder_is_exit_2_never_zero_rows(damage, needles, small_run, capsys):
    capsys.readouterr()
    k = small_run / "kernels.parquet"
    m = small_run / "manifest.json"
    if damage == "missing_parquet":
        k.unlink()
    elif damage == "garbage_parquet":
        k.write_bytes(b"not parquet at all")
    elif damage == "bad_manifest":
        m.write_text("{broken")
    else:
        d = json.loads(m.read_text())
        d["layout_version"] = 99
        m.write_text(json.dumps(d))
    assert run(["query", "kernel_summary", str(small_run)]) == 2
    one_error_line(capsys, str(small_run), *needles)


def test_bad_query_parameters(small_run, capsys):
    capsys.readouterr()
    assert run(["query", "kernel_summary", str(small_run), "--param", "top=abc"]) == 2
    one_error_line(capsys, "parameter top='abc' is not a whole number (BIGINT)")
    assert run(["query", "kernel_summary", str(small_run), "--param", "nope=1"]) == 2
    one_error_line(capsys, "has no parameter 'nope'")


def test_bad_memory_limit(small_run, capsys, monkeypatch):
    capsys.readouterr()
    assert run(["query", "kernel_summary", str(small_run), "--memory-limit", "lots"]) == 2
    one_error_line(capsys, "memory limit 'lots'", "Memory must have a number")
    monkeypatch.setenv("TRACEKIT_MEMORY_LIMIT", "abc")
    assert run(["sql", "SELECT 1", str(small_run)]) == 2
    one_error_line(capsys, "memory limit 'abc'")
