"""Local workers (issue 27, items 2 and 3): a retried part replaces the old one, a lost worker is
retried once then a clean error, and no worker outlives a parent killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES

from tracekit.convert.job import convert_part
from tracekit.errors import InputError, RunFolderError
from tracekit.workers import run_parts

ALEXNET = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"


def die_once(marker: str, value: int) -> int:
    """Killed (SIGKILL) the first time it runs for ``marker``; ``value * 10`` after."""
    if not os.path.exists(marker):
        Path(marker).write_text("x")
        os.kill(os.getpid(), signal.SIGKILL)
    return value * 10


def die_always(value: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return value


def sleep_long(value: int) -> int:
    time.sleep(120)
    return value


def test_part_written_twice_is_replaced_not_refused(tmp_path):
    """What a retry does after the first worker finished the part and was lost: before, the
    second attempt failed with `.parts/00000: already exists (use --force to replace it)`."""
    part = tmp_path / "00000"
    first = convert_part(str(ALEXNET), str(part))
    second = convert_part(str(ALEXNET), str(part))
    assert first["manifest"]["tables"]["kernels"] == second["manifest"]["tables"]["kernels"]
    assert json.loads((part / "manifest.json").read_text())["tables"]["kernels"]["rows"] == 79
    assert [p.name for p in tmp_path.iterdir()] == ["00000"]  # no temporary folder left


def test_part_never_makes_a_removed_staging_folder_again(tmp_path):
    """A worker still converting after its job failed (the job's temporary folder, and so its
    `.parts` staging folder, removed) used to make the folders again for its part, leaving a
    `.run.tmp-*` folder behind the failed command (CI, test_worker_loss). Now it fails instead."""
    staging = tmp_path / ".run.tmp-0123456789ab" / ".parts"
    with pytest.raises(RunFolderError, match="cannot create the run folder: No such file"):
        convert_part(str(ALEXNET), str(staging / "00000"))
    assert list(tmp_path.iterdir()) == []


def test_lost_local_worker_is_retried_once(tmp_path):
    tasks = [(str(tmp_path / "m0"), 1), (str(tmp_path / "m1"), 2), (str(tmp_path / "m2"), 3)]
    (tmp_path / "m0").write_text("x")  # tasks 0 and 2 do not die
    (tmp_path / "m2").write_text("x")
    assert run_parts(die_once, tasks, jobs=2) == [10, 20, 30]


def test_worker_lost_twice_is_a_clean_error():
    with pytest.raises(InputError, match="a local worker process died twice"):
        run_parts(die_always, [(1,), (2,)], jobs=2)


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_no_worker_outlives_a_killed_parent(tmp_path):
    here = str(Path(__file__).parent)
    code = (f"import sys; sys.path.insert(0, {here!r}); "
            "from tracekit.workers import run_parts; "
            "from test_workers import sleep_long; run_parts(sleep_long, [(1,), (2,)], jobs=2)")
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline:
            kids = _children(parent.pid)  # the resource tracker and the two workers
            if len(kids) >= 3:
                time.sleep(1.0)
                workers = _children(parent.pid)
                break
            time.sleep(0.2)
        assert len(workers) >= 3, workers
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.2)
        assert not [w for w in workers if _alive(w)]
    finally:
        parent.kill()
