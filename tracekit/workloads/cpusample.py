"""Host CPU time of this process's threads, sampled by the runner while the torch profiler records
(``tracekit collect --profiler torch``), for ``cpu_thread_state``-compatible rows.

The PyTorch profiler records no OS scheduling, so without nsys ``host_cpu_utilization`` had no
input. A background thread reads every ``interval_s`` seconds, for each thread of the process,
its on-CPU time from ``/proc/self/task/TID/schedstat`` (nanoseconds; the first field) or, where
the kernel has no schedstat, ``utime + stime`` from ``/proc/self/task/TID/stat`` (clock ticks),
and the CPU it last ran on (``stat`` field 39). Each sample interval [t0, t1) of a thread that
ran becomes one row: start_ns = t0, end_ns = t0 + (the on-CPU time it gained, at most t1 - t0),
cpu = its last CPU, out_state 'Sampled'. The rows are not the thread's real switch-in times, but
per interval they hold exactly the CPU time the kernel accounted, so busy time over any window
made of whole sample intervals is exact and a step window is off by at most one interval at each
edge. Timestamps are ``time.time_ns()`` (Unix epoch ns, the clock of Kineto's traces).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

COLUMNS = ("pid", "tid", "cpu", "start_ns", "end_ns")


def _tick_ns() -> float:
    try:
        return 1e9 / os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 1e7


class CpuSampler:
    """``start()`` / ``stop()`` around the measured steps; ``rows()`` then gives the columns of
    :data:`COLUMNS` as lists, ``source`` says which /proc file was read (None: no /proc)."""

    def __init__(self, interval_s: float = 0.02):
        self.interval_s = interval_s
        self.pid = os.getpid()
        self._task = Path(f"/proc/{self.pid}/task")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cols: dict[str, list[int]] = {c: [] for c in COLUMNS}
        self._last: dict[int, int] = {}
        self._t_prev = 0
        self._tick = _tick_ns()
        self.source: str | None = None
        self.samples = 0

    def _read(self) -> dict[int, tuple[int, int]]:
        """{tid: (on-CPU ns so far, last CPU)} for every thread of the process now."""
        out = {}
        try:
            tids = os.listdir(self._task)
        except OSError:
            return out
        for name in tids:
            try:
                tid = int(name)
                stat = (self._task / name / "stat").read_text()
            except (OSError, ValueError):
                continue  # the thread ended meanwhile
            # fields after the command name, which is in parentheses and may hold spaces
            f = stat[stat.rfind(")") + 2:].split()
            try:
                cpu = int(f[36])  # field 39 (processor), counted from field 3
                ticks = int(f[11]) + int(f[12])  # utime + stime (fields 14, 15)
            except (IndexError, ValueError):
                continue
            ns = None
            if self.source != "stat":
                try:
                    ns = int((self._task / name / "schedstat").read_text().split()[0])
                    self.source = "schedstat"
                except (OSError, ValueError, IndexError):
                    if self.source is None:
                        self.source = "stat"
            out[tid] = (ns if ns is not None else int(ticks * self._tick), cpu)
        return out

    def _sample(self) -> None:
        now = time.time_ns()
        span = now - self._t_prev
        for tid, (ns, cpu) in self._read().items():
            prev = self._last.get(tid)
            self._last[tid] = ns
            if prev is None or ns <= prev or span <= 0:
                continue
            self._cols["pid"].append(self.pid)
            self._cols["tid"].append(tid)
            self._cols["cpu"].append(cpu)
            self._cols["start_ns"].append(self._t_prev)
            self._cols["end_ns"].append(self._t_prev + min(ns - prev, span))
        self._t_prev = now
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> CpuSampler:
        if not self._task.is_dir():
            return self
        self._t_prev = time.time_ns()
        for tid, (ns, _) in self._read().items():
            self._last[tid] = ns
        self._thread = threading.Thread(target=self._loop, name="tracekit-cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._sample()  # the last partial interval
        self._thread = None

    def rows(self) -> dict:
        return {"source": self.source, "interval_ms": self.interval_s * 1e3, **self._cols}
