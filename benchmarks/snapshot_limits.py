"""Time and peak RSS of `tracekit convert` on hostile allocator snapshots, against a plain one.

    python benchmarks/snapshot_limits.py [--entries 200000]

Baseline: one device trace of N entries (alloc / free_requested / free_completed, a 7-frame
stack each, as torch records). Against it: the same N entries as N device traces of one entry
each, and as N/4 of them (cost must grow with the entries, not the number of device lists); a
427-byte snapshot whose entry's action is a tuple DAG of 2^40 leaves (refused at once; before
issue 37 it was hashed for hours). Each conversion is its own process (wall time, ``os.wait4``
peak RSS of the convert and its snapshot child). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

T0 = 1_790_000_000_000_000


def _entries(n: int) -> list[dict]:
    acts = ("alloc", "free_requested", "free_completed")
    out = []
    for i in range(n):
        frames = [{"filename": f"/usr/lib/python3/site-packages/torch/nn/modules/m{j}.py", "line": 100 + j,
                   "name": "forward"} for j in range(6)]
        frames.append({"filename": "/work/train.py", "line": i % 500, "name": "step"})
        out.append({"action": acts[i % 3], "addr": 4096 * (i // 3), "size": 512, "stream": 0,
                    "time_us": T0 + i, "frames": frames})
    return out


def _dag(depth: int = 40):
    x = ("alloc",)
    for _ in range(depth):
        x = (x, x)
    return x


def _convert(src: Path, out: Path) -> tuple[float, float, int]:
    t = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "convert", str(src), "-o", str(out), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.monotonic() - t, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


CASES = ("one device trace of N entries (baseline)", "N device traces of one entry",
         "N/4 device traces of one entry", "a 2^40-leaf tuple DAG as an entry's action")


def make(n: int, folder: Path) -> None:
    """The inputs of :data:`CASES` as ``folder/s0.pickle`` ... (in a process of its own: a
    convert started from a process holding them would inherit its peak RSS)."""
    entries = _entries(n)
    traces = [[entries], [[e] for e in entries], [[e] for e in entries[: n // 4]],
              [[{**entries[0], "frames": [], "action": _dag()}]]]
    for i, t in enumerate(traces):
        (folder / f"s{i}.pickle").write_bytes(pickle.dumps({"segments": [], "device_traces": t}, protocol=4))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--make", help=argparse.SUPPRESS)
    args = ap.parse_args()
    n = args.entries
    if args.make:
        make(n, Path(args.make))
        return
    print(f"N = {n:,}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
    print("| input | size | time | peak RSS | exit | ratio |\n|---|---|---|---|---|---|")
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, __file__, "--entries", str(n), "--make", tmp], check=True)
        for i, label in enumerate(CASES):
            src = Path(tmp) / f"s{i}.pickle"
            secs, rss, rc = _convert(src, Path(tmp) / f"run{i}")
            base = base or secs
            size = src.stat().st_size
            shown = f"{size / 2**20:.1f} MiB" if size > 2**20 else f"{size:,} B"
            print(f"| {label} | {shown} | {secs:.2f} s | {rss:.0f} MiB | {rc} | {secs / base:.2f}x the time |")


if __name__ == "__main__":
    main()
