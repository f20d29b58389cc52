"""Host CPU time of this process's threads, sampled by the runner while the torch profiler records
(``tracekit collect --profiler torch``), for ``cpu_thread_state``-compatible rows.

The PyTorch profiler records no OS scheduling, so without nsys ``host_cpu_utilization`` had no
input. A background thread reads every ``interval_s`` seconds, for each thread of the process
(``/proc/self/task``), its CPU time so far and the CPU it last ran on (``/proc/self/task/TID/stat``
field 39). The CPU time comes from the thread's CPU-time clock (``clock_gettime`` on the Linux
per-thread clock id of TID, nanoseconds, exact up to the moment of the call; ``source``
'thread_clock'), else ``/proc/self/task/TID/schedstat`` (nanoseconds, but up to one scheduler tick
stale for a running thread; 'schedstat'), else ``utime + stime`` of ``stat`` (clock ticks; 'stat').

A thread's sample interval is [t0, t1), t0 and t1 the ``time.time_ns()`` taken right after its
previous and its current reading (the clock readings of all threads come back to back, before any
/proc file is read), so the CPU time it gained between the two readings lies inside (t0 - the
reading's own few microseconds, t1]. Each interval of a thread that ran becomes one row: start_ns =
t0, end_ns = t0 + min(credit, t1 - t0), where the credit is the CPU time gained plus what earlier
intervals could not hold (a reading that came late); cpu = its last CPU, out_state 'Sampled'. So
a thread's rows never overlap, never hold more than their interval, and add up to the CPU time the
kernel accounted to it between the sampler's first and last reading, less at most the last credit
left over (one late reading's worth). The rows are not the thread's real switch-in times: busy
time over a window made of whole sample intervals is exact, a step window is off by at most one
interval at each edge.
Timestamps are ``time.time_ns()`` (Unix epoch ns, the clock of Kineto's traces).
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


def _thread_clock(tid: int) -> int:
    """Linux's CPU-time clock id of thread ``tid`` of this process (what glibc's
    pthread_getcpuclockid makes: CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED over the inverted TID)."""
    return ((~tid) << 3) | 6


class CpuSampler:
    """``start()`` / ``stop()`` around the measured steps; ``rows()`` then gives the columns of
    :data:`COLUMNS` as lists, ``source`` says where the CPU time was read (None: no /proc)."""

    def __init__(self, interval_s: float = 0.02):
        self.interval_s = interval_s
        self.pid = os.getpid()
        self._task = Path(f"/proc/{self.pid}/task")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cols: dict[str, list[int]] = {c: [] for c in COLUMNS}
        # tid: (CPU ns, time.time_ns()) of its last reading
        self._last: dict[int, tuple[int, int]] = {}
        self._credit: dict[int, int] = {}
        self._tick = _tick_ns()
        self.source: str | None = None
        self.samples = 0

    def _clocks(self, names: list[str]) -> dict[int, tuple[int, int]]:
        """{tid: (CPU-time clock ns, time.time_ns() right after)}: the readings come first and
        back to back, before any /proc file is read, so no wait for the GIL falls between a
        thread's reading and its time stamp."""
        out = {}
        for name in names:
            try:
                tid = int(name)
                ns = time.clock_gettime_ns(_thread_clock(tid))
            except (OSError, ValueError, AttributeError, OverflowError):
                continue  # the thread ended meanwhile, or no such clock here
            out[tid] = (ns, time.time_ns())
        return out

    def _read(self) -> dict[int, tuple[int, int, int]]:
        """{tid: (on-CPU ns so far, time.time_ns() after the reading, last CPU)} for every
        thread of the process now."""
        out = {}
        try:
            names = os.listdir(self._task)
        except OSError:
            return out
        clocks = self._clocks(names) if self.source in (None, "thread_clock") else {}
        if clocks:
            self.source = "thread_clock"
        for name in names:
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
            if self.source == "thread_clock":
                if tid in clocks:
                    out[tid] = (*clocks[tid], cpu)
                continue
            ns = None
            if self.source in (None, "schedstat"):
                try:
                    ns = int((self._task / name / "schedstat").read_text().split()[0])
                    self.source = "schedstat"
                except (OSError, ValueError, IndexError):
                    if self.source == "schedstat":
                        continue
            if ns is None:
                self.source = "stat"
                ns = int(ticks * self._tick)
            out[tid] = (ns, time.time_ns(), cpu)
        return out

    def _sample(self) -> None:
        for tid, (ns, now, cpu) in self._read().items():
            last = self._last.get(tid)
            if last is None or now <= last[1]:
                if last is None:
                    self._last[tid] = (ns, now)
                continue
            prev, t_prev = last
            self._last[tid] = (ns, now)
            credit = self._credit.get(tid, 0) + max(ns - prev, 0)
            held = min(credit, now - t_prev)
            self._credit[tid] = credit - held
            if held <= 0:
                continue
            self._cols["pid"].append(self.pid)
            self._cols["tid"].append(tid)
            self._cols["cpu"].append(cpu)
            self._cols["start_ns"].append(t_prev)
            self._cols["end_ns"].append(t_prev + held)
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> CpuSampler:
        if not self._task.is_dir():
            return self
        for tid, (ns, now, _) in self._read().items():
            self._last[tid] = (ns, now)
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
