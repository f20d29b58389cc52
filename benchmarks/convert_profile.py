"""Where `tracekit convert` of an nsys export spends its CPU: a sampling profile (py-spy, every
thread) split into phases, as shares of the samples (shares hold up under load; seconds do not).

    python benchmarks/convert_profile.py [--export benchmarks/data/h100x60.sqlite] [--rate 50]
    python benchmarks/convert_profile.py --raw PROFILE.txt      # classify an existing profile

Needs ``py-spy`` (``pip install py-spy``; not a tracekit dependency). Each sample's stack is read
from the innermost frame outwards and given to the first phase whose pattern a frame matches
(PHASES, in that order of precedence per frame), so an import inside a reading thread counts as
start-up and a pyarrow.compute call inside the NVTX nesting counts as nesting. Samples of threads
waiting for work (the thread pools' queues, locks) are counted apart and left out of the shares.
The export is built by make_big_export.py (60 copies of the H100 fixture) when missing.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import FIXTURE, TRACEKIT  # noqa: E402

# (phase, substrings of a frame "function (file:line)"); the first frame from the leaf that
# matches any pattern decides the sample's phase
PHASES = (
    ("waiting (thread pools, locks)", ("concurrent/futures/thread.py:81)", "Condition.wait", "Event.wait",
                                       "Thread.join", "_wait_for_tstate_lock")),
    ("start-up: interpreter, imports", ("<frozen importlib", "<frozen runpy>", "importlib/__init__")),
    ("SQLite read into Arrow (ADBC scans)", ("Export.scan (", "Cursor.execute", "adbc_driver")),
    ("SQLite metadata queries (sqlite3: counts, lookups, rowid bounds)", ("Export.rows", "Export.count",
                                                                          "Export.__init__")),
    ("PyTorch NVTX operator arguments", ("pytorch_nvtx.py",)),
    ("NVTX push/pop nesting (sort-and-sweep, IPC spill)", ("nvtx_nesting", "nest (collectors/common.py",
                                                           "thread_key", "release_free_memory",
                                                           "post_steps.py")),
    ("Parquet encoding", ("ParquetWriter", "parquet/core.py")),
    ("checksums (SHA-256)", ("sha256", "checksums.py")),
    ("run-folder checks (integrity: duplicates, durations)", ("integrity.py",)),
    ("Arrow decoding (string IDs, enums, UTF-8, schema casts)", ("decode.py", "export.py", "schema/core.py",
                                                                 "_Stats.watch")),
)


def classify(raw: Path) -> dict:
    counts: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rstrip().rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        frames = stack.split(";")[1:]  # the first entry names the thread
        phase = "other (CLI, manifest, thread set-up)"
        for frame in reversed(frames):
            hit = next((p for p, pats in PHASES if any(s in frame for s in pats)), None)
            if hit:
                phase = hit
                break
        counts[phase] += int(n)
    waiting = counts.pop(PHASES[0][0], 0)
    busy = total - waiting
    shares = {p: counts[p] / busy for p, _ in PHASES[1:] if counts[p]}
    shares.update({p: n / busy for p, n in counts.items() if p not in shares})
    return {"samples": total, "waiting_samples": waiting,
            "shares": dict(sorted(shares.items(), key=lambda kv: -kv[1]))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", type=Path, default=HERE / "data" / "h100x60.sqlite")
    ap.add_argument("--copies", type=int, default=60, help="copies when the export is built")
    ap.add_argument("--rate", type=int, default=50, help="samples per second per thread")
    ap.add_argument("--raw", type=Path, help="classify this py-spy raw profile instead of recording")
    ap.add_argument("--save-raw", type=Path, help="keep the recorded profile here")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    res: dict = {}
    if args.raw:
        raw = args.raw
    else:
        if not shutil.which("py-spy"):
            print("py-spy not found: pip install py-spy", file=sys.stderr)
            return 2
        if not args.export.exists():
            from make_big_export import build

            args.export.parent.mkdir(parents=True, exist_ok=True)
            build(FIXTURE, args.copies, args.export)
        tmp = Path(tempfile.mkdtemp(prefix="tk-convert-profile-"))
        raw = tmp / "profile.txt"
        load = os.getloadavg()
        t0 = time.perf_counter()
        subprocess.run(["py-spy", "record", "--threads", "-r", str(args.rate), "-f", "raw", "-o", str(raw),
                        "--", *TRACEKIT, "convert", str(args.export), "-o", str(tmp / "run"), "-q"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        res.update({"export": str(args.export), "wall_s": time.perf_counter() - t0,
                    "load_start": load, "load_end": os.getloadavg()})
    res.update(classify(raw))
    if args.save_raw and not args.raw:
        shutil.copyfile(raw, args.save_raw)
    if not args.raw:
        shutil.rmtree(raw.parent, ignore_errors=True)
    for phase, share in res["shares"].items():
        print(f"{share:6.1%}  {phase}")
    print(f"{res['samples']} samples, {res['waiting_samples']} of waiting threads left out")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
