"""Paths that exited 1 (an internal error) where bad input or careless use is exit 2 with one line
(issue 27, items 8 and 9), each on a converted real fixture."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, one_error_line

from tracekit.cli import run


@pytest.mark.parametrize("args, needle", [
    (["select INTERVAL 1 DAY AS i", "-f", "parquet", "-o", "OUT"], "column 'i' has the type month_day_nano_interval"),
    (["select 1 a, 2 a", "-f", "json"], "more than one column named 'a'"),
    (["select 1 a, 2 a", "-f", "parquet", "-o", "OUT"], "more than one column named 'a'"),
    (["select 1 a, 2 a", "--columns", "a"], "--columns: the result has 2 columns named 'a'"),
])
def test_sql_results_that_cannot_be_written(small_run_copy, tmp_path, capsys, args, needle):
    out = tmp_path / "o.parquet"
    args = [a.replace("OUT", str(out)) for a in args]
    capsys.readouterr()
    assert run(["sql", args[0], str(small_run_copy), *args[1:]]) == 2
    assert needle in one_error_line(capsys)
    assert not out.exists()


def test_stdout_on_a_full_disk(small_run_copy, capsys, monkeypatch):
    class Full:
        def write(self, s):
            raise OSError(28, "No space left on device")

        def flush(self):
            raise OSError(28, "No space left on device")

    capsys.readouterr()
    monkeypatch.setattr("sys.stdout", Full())
    assert run(["query", "kernel_summary", str(small_run_copy), "-f", "csv"]) == 2
    monkeypatch.undo()
    assert one_error_line(capsys) == "tracekit: error: cannot write the output: No space left on device"


@pytest.mark.parametrize("damage, needle", [
    ("deep", "manifest.json is nested too deep"),
    ("nul", "a file name that cannot be one (16 characters, a NUL)"),
    ("long", "a file name that cannot be one (5008 characters)"),
])
def test_damaged_manifest_exit_2(small_run_copy, capsys, damage, needle):
    p = small_run_copy / "manifest.json"
    m = json.loads(p.read_text())
    if damage == "deep":
        p.write_text(json.dumps(m)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        m["tables"]["kernels"]["file"] = "ker\x00nels.parquet" if damage == "nul" else "k" * 5000 + ".parquet"
        p.write_text(json.dumps(m))
    capsys.readouterr()
    assert run(["sql", "SELECT count(*) FROM kernels", str(small_run_copy)]) == 2
    assert needle in one_error_line(capsys)


def test_kineto_lone_surrogate_is_replaced_and_counted(tmp_path, capsys):
    """A lone surrogate escape ended the whole file (UnicodeDecodeError in the reader, later a
    one-line exit 2): now the event is kept, the half character becomes U+FFFD, with a count."""
    p = tmp_path / "u.json"
    p.write_text('{"traceEvents":[{"ph":"X","cat":"kernel","name":"k\\udfff","ts":1,"dur":2,'
                 '"pid":1,"tid":1,"args":{"device":0}},'
                 '{"ph":"X","cat":"kernel","name":"\\ud83d\\ude00 \\\\udfff \\ud800","ts":4,'
                 '"dur":2,"pid":1,"tid":1,"args":{"device":0}}]}')
    out = tmp_path / "run"
    assert run(["convert", str(p), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("u.json: 2 lone UTF-16 surrogate escape(s) (such as \\udfff, half of a character) in "
            "text values were replaced by U+FFFD") in err
    names = pq.read_table(out / "kernels.parquet").column("name").to_pylist()
    # the pair is one character, an escaped backslash before 'udfff' is text
    assert names == ["k\ufffd", "\U0001f600 \\udfff \ufffd"]
    m = json.loads((out / "manifest.json").read_text())
    assert m["sources"]["kineto"]["files"][0]["surrogates_replaced"] == 2


def test_kineto_kernels_dropped_or_damaged_are_counted(tmp_path, capsys):
    """Kernels with an unknown ph, a category that is not text, or a text args.device were
    dropped (or given a NULL device) without a word: kernels table short, exit 0."""
    import gzip

    d = json.loads(gzip.decompress((FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz").read_bytes()))
    kernels = [e for e in d["traceEvents"] if e.get("cat") == "kernel"]
    for i, e in enumerate(kernels):  # 79 kernels: 27, 26, 26
        if i % 3 == 0:
            e["ph"] = "Q"
        elif i % 3 == 1:
            e["cat"] = 7
        else:
            e["args"]["device"] = "cuda:0"
    p = tmp_path / "t.json"
    p.write_text(json.dumps(d))
    out = tmp_path / "run"
    assert run(["convert", str(p), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "t.json: 27 event(s) with ph 'Q', not a Chrome trace event type, were dropped" in err
    assert "t.json: 26 complete event(s) whose cat is not text ('7') were dropped" in err
    assert "t.json: 26 GPU event(s) have an args.device that is not a number" in err
    m = json.loads((out / "manifest.json").read_text())
    assert m["tables"]["kernels"]["rows"] == 26
    assert sum("were dropped" in w for w in m["warnings"]) == 2


@pytest.mark.parametrize("column, bad", [(b"name", b"n\xffme"), (b"start_ns", b"start\xc3_s"),
                                         (b"short_name", b"short\xed\xa0\x80me")])
@pytest.mark.parametrize("sealed", [True, False], ids=["resealed", "checksums"])
def test_parquet_footer_column_name_not_utf8(small_run_copy, capsys, column, bad, sealed):
    """A column name in a table file's Parquet footer that is not UTF-8 (0xff, a cut sequence,
    an encoded surrogate): exit 2 naming the file from every reader, also when the manifest's
    checksums were recomputed for the damaged file (so the footer itself is what fails)."""
    import struct

    from tracekit.runfolder.checksums import reseal

    f = small_run_copy / "kernels.parquet"
    data = bytearray(f.read_bytes())
    start = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
    footer = bytes(data[start:-8])
    assert footer.count(column) >= 2  # the schema and the column chunk's path
    data[start:-8] = footer.replace(column, bad)
    f.write_bytes(bytes(data))
    if sealed:
        reseal(small_run_copy)
    # the footer is read before the checksum is compared: the same line either way
    want = "kernels.parquet is not readable Parquet ('utf-8' codec can't decode byte 0x"
    for args in (["query", "kernel_summary", str(small_run_copy)],
                 ["sql", "SELECT count(*) FROM kernels", str(small_run_copy)], ["verify", str(small_run_copy)]):
        assert run(args) == 2, args
        assert want in one_error_line(capsys), args
