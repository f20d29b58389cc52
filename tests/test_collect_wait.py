"""The wait for nsys to exit after the workload (issue 36, item 11): it scales with what the
workload took, so a slow machine's slow nsys shutdown is not killed and profiled again."""

from __future__ import annotations

import sys

import pytest

from tracekit.collect import process


def _job(tmp_path, write_after: float, exit_after: float):
    done = tmp_path / "result.json"
    code = (f"import time, pathlib; time.sleep({write_after}); pathlib.Path({str(done)!r}).write_text('{{}}'); "
            f"time.sleep({exit_after})")
    return [sys.executable, "-c", code], done


def test_the_wait_scales_with_the_workload(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "NSYS_STALL_S", 0.5)
    monkeypatch.setattr(process, "importing", lambda: False)
    # the workload took 1.5 s; its "nsys" exits 1.2 s later: more than 0.5 s, less than 1.5 s
    cmd, done = _job(tmp_path, 1.5, 1.2)
    process.run_logged(cmd, "nsys", tmp_path / "log", timeout=30, stall=[done])
    # one that never exits is still killed, after the workload's time
    (tmp_path / "b").mkdir()
    cmd, done = _job(tmp_path / "b", 0.6, 30)
    with pytest.raises(process.Stalled, match=r"did not exit \d+ s after the workload had finished \(it ran \d+ s\)"):
        process.run_logged(cmd, "nsys", tmp_path / "log2", timeout=30, stall=[done])
