"""Where `tracekit convert` runs on one core: every thread's Python stack sampled every 10 ms
(``sys._current_frames()``, no py-spy needed) with the process's CPU time, printed per window.

    python benchmarks/convert_timeline.py [--export benchmarks/data/h100x60.sqlite] [--window 1.0]

Each line: the window's start, the CPU cores used in it (2.0 = both cores of this machine
busy), and the most sampled (thread: caller > callee) pairs of the threads not waiting. A
thread inside C code (SQLite, Arrow, NumPy, DuckDB) shows as the Python call that entered it.
"""

from __future__ import annotations

import argparse
import collections
import os
import runpy
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WAITING = ("wait", "_worker", "acquire", "_wait_for_tstate_lock", "get", "join")


def record(argv: list[str], every: float = 0.01) -> list[tuple[float, float, dict[str, list[str]]]]:
    """Run ``tracekit ARGV`` in this process while sampling; returns (seconds, CPU, stacks)."""
    samples: list[tuple[float, float, dict[str, list[str]]]] = []
    stop = threading.Event()

    def sampler() -> None:
        t0, me = time.perf_counter(), threading.get_ident()
        while not stop.is_set():
            names = {t.ident: t.name for t in threading.enumerate()}
            snap = {}
            for ident, f in sys._current_frames().items():
                if ident == me:
                    continue
                stack = []
                while f is not None:
                    stack.append(f"{os.path.basename(f.f_code.co_filename)}:{f.f_code.co_name}")
                    f = f.f_back
                snap[names.get(ident, str(ident))] = stack[::-1]
            samples.append((time.perf_counter() - t0, time.process_time(), snap))
            time.sleep(every)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    sys.argv = ["tracekit", *argv]
    try:
        runpy.run_module("tracekit", run_name="__main__")
    except SystemExit:
        pass
    finally:
        stop.set()
        thread.join()
    return samples


def windows(samples, width: float) -> list[str]:
    busy: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    cpu: dict[int, float] = {}
    for t, c, snap in samples:
        w = int(t / width)
        cpu.setdefault(w, c)
        for name, stack in snap.items():
            if stack and stack[-1].split(":")[-1] not in WAITING:
                busy[w][f"{name}: {' > '.join(stack[-2:])}"] += 1
    lines = []
    for w in sorted(cpu):
        cores = (cpu.get(w + 1, samples[-1][1]) - cpu[w]) / width
        top = " ; ".join(f"{k} x{n}" for k, n in busy[w].most_common(4))
        lines.append(f"{w * width:6.1f} s  {cores:4.2f} cores | {top}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", type=Path, default=HERE / "data" / "h100x60.sqlite")
    ap.add_argument("--window", type=float, default=1.0, help="seconds per line")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="tk-convert-timeline-"))
    try:
        load = os.getloadavg()[0]
        samples = record(["convert", str(args.export), "-o", str(tmp / "run"), "-q"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(windows(samples, args.window)))
    print(f"load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
