"""Checksums of every table file in the manifest (issue 27, items 2 and 8).

A real fixture is converted; then a bit is flipped, a file cut, swapped or listed twice, and the
manifest's row count or file list edited. Every query and ``tracekit verify`` must then fail with
one line naming the file (exit 2), never give other numbers.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from conftest import FIXTURES, one_error_line

from tracekit import schema
from tracekit.cli import run

KINETO = FIXTURES / "kineto"


def _manifest(run_dir, edit=None) -> dict:
    m = json.loads((run_dir / "manifest.json").read_text())
    if edit:
        edit(m)
        (run_dir / "manifest.json").write_text(json.dumps(m))
    return m


def test_manifest_records_size_and_sha256_of_every_file(small_run, capsys):
    pristine = small_run
    m = _manifest(pristine)
    for name, info in m["tables"].items():
        data = (pristine / info["file"]).read_bytes()
        assert info["bytes"] == len(data), name
        assert info["sha256"] == hashlib.sha256(data).hexdigest(), name
    capsys.readouterr()
    assert run(["verify", str(pristine)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{pristine}: 8 table(s) match their checksums"
    assert f"  kernels: 1 file(s), {m['tables']['kernels']['bytes']} bytes, 3 rows: ok" in out


def test_job_records_one_checksum_per_rank_file(tmp_path, capsys):
    a, b = tmp_path / "w_rank0.json.gz", tmp_path / "w_rank1.json.gz"
    shutil.copyfile(KINETO / "kineto_a100_nccl_2ranks_rank0.json.gz", a)
    shutil.copyfile(KINETO / "kineto_a100_alexnet.json.gz", b)
    job = tmp_path / "job"
    # two different traces (the point is one digest per rank file): not one job, merged on purpose
    assert run(["convert", str(a), str(b), "-o", str(job), "-q", "--rank-pattern", r"rank(\d)",
                "--merge-unrelated"]) == 0
    info = _manifest(job)["tables"]["kernels"]
    assert len(info["sha256"]) == len(info["files"]) == len(info["bytes"]) == 2
    for f, sha in zip(info["files"], info["sha256"]):
        assert hashlib.sha256((job / f).read_bytes()).hexdigest() == sha
    capsys.readouterr()
    assert run(["verify", str(job)]) == 0
    f = job / info["files"][1]
    data = bytearray(f.read_bytes())
    data[len(data) // 4] ^= 0x01  # in the data pages
    f.write_bytes(bytes(data))
    capsys.readouterr()
    assert run(["query", "kernel_summary", str(job)]) == 2
    assert "kernels/rank-00001.parquet (table kernels) does not match its checksum" in one_error_line(capsys)


@pytest.mark.parametrize("read_whole", [True, False])  # a file read once (<= 8 MiB), or its digest deferred
def test_every_bit_flip_is_an_error_never_other_numbers(small_run_copy, capsys, monkeypatch, read_whole):
    """30 bit flips spread over the kernels file (header, pages, footer): each one is exit 2,
    from `verify` and from a query; also where the query hashes the file while DuckDB reads it
    (files over 8 MiB; the limit lowered here)."""
    if not read_whole:
        monkeypatch.setattr("tracekit.runfolder.tablefiles.SMALL_FILE", 0)
    f = small_run_copy / "kernels.parquet"
    good = f.read_bytes()
    for i in range(30):
        pos = (len(good) - 1) * i // 29
        data = bytearray(good)
        data[pos] ^= 1 << (i % 8)
        f.write_bytes(bytes(data))
        for cmd in (["verify", str(small_run_copy)], ["query", "kernel_summary", str(small_run_copy), "-f", "csv"]):
            capsys.readouterr()
            assert run(cmd) == 2, (pos, cmd)
            err = one_error_line(capsys)
            assert "kernels.parquet" in err, err
    f.write_bytes(good)
    assert run(["verify", str(small_run_copy)]) == 0


@pytest.mark.parametrize("how, needle", [
    ("swap", "has {swapped} bytes, the manifest records"),  # cuda_api.parquet's size
    ("cut", "kernels.parquet is not readable Parquet"),
    ("swap-no-sums", "is listed as table kernels but holds the columns of table cuda_api"),
    ("twice", "lists 'kernels.parquet' twice for table kernels"),
    ("no-files", "table kernels has 0 rows in its files, the manifest records 3"),
    ("rows", "table kernels has 3 rows in its files, the manifest records 4"),
])
@pytest.mark.parametrize("read_whole", [True, False])  # a file read once (<= 8 MiB), or twice
def test_damaged_folder_is_one_line_exit_2(small_run_copy, capsys, monkeypatch, how, needle, read_whole):
    if not read_whole:
        monkeypatch.setattr("tracekit.runfolder.tablefiles.SMALL_FILE", 0)
    k = small_run_copy / "kernels.parquet"
    needle = needle.format(swapped=(small_run_copy / "cuda_api.parquet").stat().st_size)
    if how == "swap":
        shutil.copyfile(small_run_copy / "cuda_api.parquet", k)
    elif how == "cut":
        k.write_bytes(k.read_bytes()[:-100])
    elif how == "swap-no-sums":
        shutil.copyfile(small_run_copy / "cuda_api.parquet", k)
        _manifest(small_run_copy, lambda m: [m["tables"]["kernels"].pop(x) for x in ("sha256", "bytes")]
                  and m["tables"]["kernels"].update(rows=33))
    elif how == "twice":
        _manifest(small_run_copy, lambda m: m["tables"]["kernels"].update(
            files=["kernels.parquet", "kernels.parquet"], rows=6))
    elif how == "no-files":
        _manifest(small_run_copy, lambda m: m["tables"]["kernels"].update(files=[]))
    elif how == "rows":
        _manifest(small_run_copy, lambda m: m["tables"]["kernels"].update(rows=4))
    for cmd in (["sql", "SELECT count(*) FROM kernels"], ["query", "kernel_summary"], ["verify"]):
        capsys.readouterr()
        assert run([*cmd, str(small_run_copy)]) == 2, cmd
        assert needle in one_error_line(capsys), cmd


def test_deferred_checksum_holds_back_a_result_duckdb_reads(small_run_copy, monkeypatch):
    """A changed byte DuckDB does not notice (in the writer's name in the Parquet footer): the
    digest, computed in a helper thread while the query runs, fails the query before its rows
    leave the engine; the same Run then fails every later read of the table."""
    from tracekit.errors import RunFolderError
    from tracekit.query import Session
    from tracekit.runfolder import open_run

    monkeypatch.setattr("tracekit.runfolder.tablefiles.SMALL_FILE", 0)
    f = small_run_copy / "kernels.parquet"
    data = bytearray(f.read_bytes())
    pos = data.find(b"parquet-cpp")
    assert pos > 0
    data[pos] = ord("P")
    f.write_bytes(bytes(data))
    r = open_run(small_run_copy)
    with pytest.raises(RunFolderError, match="kernels.parquet .table kernels. does not match its checksum"):
        Session([r]).query("kernel_summary")
    with pytest.raises(RunFolderError, match="does not match its checksum"):
        r.table_files("kernels")
    data[pos] = ord("p")
    f.write_bytes(bytes(data))
    good = open_run(small_run_copy)
    assert Session([good]).query("kernel_summary").num_rows == 1


def test_folder_without_checksums_reads_but_does_not_verify(small_run_copy, capsys):
    def strip(m):
        for info in m["tables"].values():
            info.pop("sha256"), info.pop("bytes")
    _manifest(small_run_copy, strip)
    capsys.readouterr()
    assert run(["sql", "SELECT count(*) AS n FROM kernels", str(small_run_copy), "-f", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"n"', "3"]
    assert run(["verify", str(small_run_copy)]) == 2
    assert "records no checksums" in one_error_line(capsys)


def test_columns_listed_in_the_manifest_are_held_to_the_footer(small_run_copy, capsys):
    """A query takes a file's columns and rows from the manifest (no footer read before DuckDB
    runs) and checks them against the footer with the checksum: an edited list of columns fails
    the query; a manifest without the list (older tracekit) or with a malformed one reads the
    footer first, with the same result."""
    m = _manifest(small_run_copy)
    assert m["tables"]["kernels"]["columns"] == list(schema.table("kernels").column_names)

    def csv(*args):
        capsys.readouterr()
        code = run(["query", "kernel_summary", str(small_run_copy), "-f", "csv", *args])
        return code, capsys.readouterr()

    code, good = csv()
    assert code == 0 and good.out.count("\n") > 1
    listed = m["tables"]["kernels"]["columns"]
    for edit in (lambda e: e.pop("columns"), lambda e: e.update(columns="start_ns"),
                 lambda e: e.update(columns=[1, 2])):
        _manifest(small_run_copy, lambda m, edit=edit: edit(m["tables"]["kernels"]))
        assert csv() == (0, good)
        _manifest(small_run_copy, lambda m: m["tables"]["kernels"].update(columns=listed))
    _manifest(small_run_copy, lambda m: m["tables"]["kernels"].update(
        columns=[c for c in schema.table("kernels").column_names if c != "grid_x"]))
    code, out = csv("-p", "by=grid")
    assert code == 2 and out.out == ""
    assert ("kernels.parquet (table kernels) holds other columns than the manifest lists (25 against "
            "24): the manifest was edited or damaged") in out.err
    assert run(["verify", str(small_run_copy)]) == 2  # verify reads the footer first: the same check
    assert "holds other columns than the manifest lists (25 against 24)" in one_error_line(capsys)
