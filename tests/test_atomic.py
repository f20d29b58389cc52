"""A run folder appears whole or not at all.

Interrupting a real ``python -m tracekit convert`` (SIGTERM, SIGINT) leaves neither the run folder
nor the hidden ``.NAME.tmp-*`` folder; a full disk leaves nothing and says so in one line; of two
converts into the same folder one wins (complete folder) and the other exits 2.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, ROOT, one_error_line

from tracekit.cli import run
from tracekit.errors import RunFolderError
from tracekit.runfolder import RunWriter, open_run

BASE = FIXTURES / "nsys" / "nsys2023.1_rtx3090_conv_fp16.sqlite"


@pytest.fixture(scope="module")
def big_export(tmp_path_factory) -> Path:
    """The fixture with CUPTI_ACTIVITY_KIND_RUNTIME doubled 8 times (1.45 M rows) and KERNEL 10
    times, so a conversion takes a couple of seconds: long enough to interrupt."""
    path = tmp_path_factory.mktemp("big") / "big.sqlite"
    shutil.copyfile(BASE, path)
    os.chmod(path, 0o644)
    with sqlite3.connect(path) as c:
        for _ in range(8):
            c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME")
        for _ in range(10):
            c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    return path


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def _popen(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tracekit", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_tmp(parent: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(".tmp-" in p.name for p in parent.iterdir()):
            return
        if proc.poll() is not None:
            raise AssertionError(f"convert ended before writing: {proc.returncode} {proc.stderr.read()}")
        time.sleep(0.005)
    raise AssertionError("no temporary folder appeared")


def _assert_complete(run_dir: Path, export: Path) -> None:
    run = open_run(run_dir)
    with sqlite3.connect(f"file:{export}?mode=ro", uri=True) as c:
        n_api = c.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        n_k = c.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert run.manifest["tables"]["cuda_api"]["rows"] == n_api
    assert run.manifest["tables"]["kernels"]["rows"] == n_k
    assert pq.ParquetFile(run.table_path("cuda_api")).metadata.num_rows == n_api
    assert pq.ParquetFile(run.table_path("kernels")).metadata.num_rows == n_k


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("delay_s", [0.0, 0.5])
def test_signal_mid_convert_leaves_nothing(sig, delay_s, big_export, tmp_path):
    out = tmp_path / "run"
    proc = _popen("convert", big_export, "-o", out)
    _wait_for_tmp(tmp_path, proc)
    time.sleep(delay_s)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err
    if proc.returncode == 0:  # the signal came after the rename: then the folder is whole
        _assert_complete(out, big_export)
        pytest.skip("conversion finished before the signal")
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "tracekit: error: interrupted"
    assert not out.exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
def test_sigkill_never_leaves_a_partial_run_folder(big_export, tmp_path):
    """SIGKILL cannot be caught: the hidden temporary folder may stay, the run folder never
    appears half-written (and a later convert into the same name works)."""
    out = tmp_path / "run"
    proc = _popen("convert", big_export, "-o", out)
    _wait_for_tmp(tmp_path, proc)
    time.sleep(0.3)
    proc.kill()
    proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("conversion finished before the signal")
    assert not out.exists()
    assert all(n.startswith(".run.tmp-") for n in _leftovers(tmp_path))
    assert run(["convert", str(BASE), "-o", str(out)]) == 0
    assert (out / "manifest.json").is_file()


def test_full_disk_leaves_nothing_and_one_line(monkeypatch, tmp_path, capsys):
    import pyarrow.parquet as pq

    real = pq.ParquetWriter
    calls = {"n": 0}

    class FullDiskWriter(real):
        def write_batch(self, *a, **k):
            calls["n"] += 1
            if calls["n"] >= 2:  # the first table goes through, the second hits a full disk
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return super().write_batch(*a, **k)

    monkeypatch.setattr(pq, "ParquetWriter", FullDiskWriter)
    out = tmp_path / "run"
    assert run(["convert", str(BASE), "-o", str(out)]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    # which table meets the full disk depends on the conversion order; the message names it
    assert len(lines) == 1
    assert re.fullmatch(rf"tracekit: error: {re.escape(str(out))}: cannot write [a-z_]+: No space left on device",
                        lines[0]), lines
    assert calls["n"] >= 2  # the full disk was met (table conversions may overlap)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_full_disk_writing_the_manifest(monkeypatch, tmp_path):
    import tracekit.runfolder as rf

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(rf.os, "fsync", no_space)
    out = tmp_path / "run"
    with pytest.raises(RunFolderError, match="cannot write manifest.json: No space left on device"):
        with RunWriter(out) as w:
            w.write_table("kernels", [])
    assert list(tmp_path.iterdir()) == []


def test_error_inside_collector_removes_temp(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ZeroDivisionError):
        with RunWriter(out) as w:
            w.write_table("kernels", [])
            assert w.path.is_dir() and w.path.name.startswith(".run.tmp-")
            1 / 0  # noqa: B018
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_two_concurrent_converts_one_wins(big_export, tmp_path):
    out = tmp_path / "run"
    procs = [_popen("convert", big_export, "-o", out) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    codes = sorted(rc for rc, _ in results)
    assert codes == [0, 2], results
    loser = next(err for rc, err in results if rc == 2)
    lines = loser.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tracekit: error: {out}: ")
    assert "already exists" in lines[0] or "another process" in lines[0]
    _assert_complete(out, big_export)
    assert _leftovers(tmp_path) == []
    m = json.loads((out / "manifest.json").read_text())
    assert set(m["tables"]) | set(m["not_captured"]) >= {"kernels", "cuda_api", "memcpy"}


def test_commit_refuses_a_folder_created_meanwhile(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(RunFolderError, match="created by another process meanwhile"):
        with RunWriter(out) as w:
            w.write_table("kernels", [])
            out.mkdir()
            (out / "other.txt").write_text("theirs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert [p.name for p in out.iterdir()] == ["other.txt"]


def test_full_disk_on_the_kineto_path_leaves_nothing_and_one_line(monkeypatch, tmp_path, capsys):
    """The Kineto collector writes temporary Parquet parts, then the tables: a full disk at any of
    those writes is one line and exit 2, and no folder is left behind."""
    import pyarrow.parquet as pq

    real = pq.ParquetWriter
    calls = {"n": 0}

    class FullDiskWriter(real):
        def write_batch(self, *a, **k):
            calls["n"] += 1
            if calls["n"] >= 3:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return super().write_batch(*a, **k)

        def write_table(self, *a, **k):
            calls["n"] += 1
            if calls["n"] >= 3:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return super().write_table(*a, **k)

    monkeypatch.setattr(pq, "ParquetWriter", FullDiskWriter)
    out = tmp_path / "run"
    trace = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"
    assert run(["convert", str(trace), "-o", str(out)]) == 2
    one_error_line(capsys, "No space left on device")
    assert calls["n"] >= 3  # the full disk was met
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["kineto/kineto_a100_alexnet.json.gz", "nsys/nsys2025.5_cuda_graph.sqlite"])
def test_input_deleted_during_convert_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys, name):
    """The input vanishes while it is converted (here: just before its SHA-256 is read, which runs
    beside the parse): exit 2 naming the file, no folder left, and the rest untouched."""
    from tracekit.collectors import common

    src = tmp_path / "in" / Path(name).name
    src.parent.mkdir()
    shutil.copyfile(FIXTURES / name, src)
    real = common.sha256_file

    def vanish(path, *a, **k):
        Path(path).unlink(missing_ok=True)
        return real(path, *a, **k)

    monkeypatch.setattr(common, "sha256_file", vanish)
    assert run(["convert", str(src), "-o", str(tmp_path / "run")]) == 2
    one_error_line(capsys, src.name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"] and not src.exists()


def test_export_deleted_before_its_bulk_scan_names_the_file(tmp_path):
    """The metadata connection is open, then the file goes before a scanning thread opens its
    ADBC connection (the race a loaded machine hit: the driver says "failed to allocate memory"
    for a missing file, which came out as an internal error, exit 1)."""
    from tracekit.collectors.nsys.export import Export
    from tracekit.errors import InputError

    src = tmp_path / "x.sqlite"
    shutil.copyfile(FIXTURES / "nsys" / "nsys2025.5_cuda_graph.sqlite", src)
    exp = Export(src)
    src.unlink()
    with pytest.raises(InputError, match=r"x\.sqlite: no longer exists \(deleted during the conversion\?\)"):
        next(exp.scan([("n", "count(*)", "int")], "StringIds"))
