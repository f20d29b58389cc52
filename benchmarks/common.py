"""What the benchmark scripts share: paths, the tracekit command, measuring a command (wall,
CPU, peak RSS), the machine's description and number formatting. benchmarks/run.py and
benchmarks/multi.py both import it (neither imports the other)."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURE = ROOT.parent / "shared" / "fixtures" / "nsys" / "nsys2026_h100_2gpu_pytorch_slice.sqlite"
TRACEKIT = [sys.executable, "-m", "tracekit"]


def measure(cmd: list[str], timeout: float | None = None, **kw) -> dict:
    """Run ``cmd``; return wall seconds, CPU seconds, peak RSS (MiB) and exit status. After
    ``timeout`` seconds the command (its whole process group) is killed and marked timed out."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as errf:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, start_new_session=True, **kw)
        timer = None
        if timeout:
            timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
            timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        if timer is not None:
            timer.cancel()
        wall = time.perf_counter() - t0
        errf.seek(0)
        err = errf.read().decode(errors="replace").strip().splitlines()
    rc = os.waitstatus_to_exitcode(status)
    if timeout and wall >= timeout:
        err = [f"did not finish in {timeout:.0f} s; killed"]
    return {"cmd": " ".join(cmd), "seconds": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_mib": usage.ru_maxrss / 1024, "rc": rc, "error": err[-1] if rc and err else "",
            "load_before": load}


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}")


def fmt(x: float, unit: str = "") -> str:
    return f"{x:,.2f}{unit}" if x < 100 else f"{x:,.0f}{unit}"
