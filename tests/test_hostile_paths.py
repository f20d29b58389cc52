"""Hostile paths (issue 37, items 9 and 10): ``convert -o MOUNTPOINT --force`` is one line, exit 2,
nothing changed; a run folder named ``*`` is a literal in the sql sandbox (its glob never lists
a sibling folder's files)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess

import pytest

from tests.conftest import SMALL_EXPORT, one_error_line
from tracekit.cli import run as cli


def _mount(*args: str) -> bool:
    return shutil.which("mount") is not None and os.geteuid() == 0 and \
        subprocess.run(["mount", *args], capture_output=True, check=False).returncode == 0


def _snapshot(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _force_fails(target, tmp_path, capsys, reason: str):
    before = _snapshot(target)
    assert cli(["convert", str(SMALL_EXPORT), "-o", str(target), "--force", "-q"]) == 2
    one_error_line(capsys, str(target), "cannot replace it", reason, "nothing was changed")
    assert _snapshot(target) == before
    assert not [p.name for p in target.parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


@pytest.mark.parametrize("read_only", [False, True])
def test_force_onto_a_bind_mount_is_one_line_exit_2(small_run, tmp_path, capsys, read_only):
    """Item 9, with a real bind mount (root only): was exit 1 `OSError: [Errno 16] Device or
    resource busy` from the rename of the old folder aside."""
    src, target = tmp_path / "src", tmp_path / "mnt"
    shutil.copytree(small_run, src)
    target.mkdir()
    if not _mount("--bind", str(src), str(target)):
        pytest.skip("mount --bind needs root here")
    try:
        if read_only and not _mount("-o", "remount,bind,ro", str(target)):
            pytest.skip("cannot remount read-only here")
        _force_fails(target, tmp_path, capsys, "Device or resource busy")
    finally:
        subprocess.run(["umount", str(target)], check=False)


def test_force_when_the_old_folder_cannot_be_moved_aside(small_run, tmp_path, capsys, monkeypatch):
    """Item 9 without root: the same error from the errno (EBUSY) of the rename."""
    import tracekit.runfolder as rf

    target = tmp_path / "run"
    shutil.copytree(small_run, target)
    real = os.rename

    def rename(a, b):
        if os.fspath(a) == os.fspath(target):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), os.fspath(a))
        return real(a, b)

    monkeypatch.setattr(rf.os, "rename", rename)
    _force_fails(target, tmp_path, capsys, "Device or resource busy")


def test_run_folder_named_star_is_a_literal_in_the_sql_sandbox(small_run, tmp_path, capsys):
    """Item 10: with a run folder named `*`, read_text('tkro://.../g/*/kernels.parquet') listed
    the table files of sibling folders."""
    g = tmp_path / "g"
    for name in ("*", "other", "x[1]"):
        shutil.copytree(small_run, g / name)
    star = f"tkro://{os.path.realpath(g)}/*"
    for sql, out in ((f"SELECT filename FROM read_text('{star}/kernels.parquet')", [f"{star}/kernels.parquet"]),
                     (f"SELECT file FROM glob('{star}/kernels.parquet')", [f"{star}/kernels.parquet"]),
                     ("SELECT count(*) AS n FROM kernels", ["3"])):
        rc = cli(["sql", sql, str(g / "*"), "-f", "json"])
        res = capsys.readouterr()
        assert rc == 0, res.err
        rows = [str(v) for r in json.loads(res.out) for v in r.values()]
        assert rows == out, rows
    # a pattern that is no table file's path is refused as before
    assert cli(["sql", f"SELECT count(*) FROM glob('{star}/*.parquet')", str(g / "*")]) == 2
    one_error_line(capsys, "Permission Error", "file system operations are disabled")
