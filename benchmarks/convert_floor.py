"""`tracekit convert` of one export against SQLite's own scan of the same export (every value
tracekit reads decoded, none handed out: run.py's ``sqlite_scan``), alternating, ``--repeat``
times: medians, spread (min-max) and the ratio of the medians, in wall and CPU time.

    python benchmarks/convert_floor.py [--export benchmarks/data/h100x300.sqlite] [--repeat 3]

Each side is its own process (benchmarks/common.py ``measure``: wall, user + system CPU of all
threads, peak RSS). The scan runs on one thread; the conversion on several, so its wall-time
ratio is the one the issue's target (at most 2x) names, and its CPU ratio says how much work
beyond SQLite's decoding the conversion does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import TRACEKIT, measure  # noqa: E402

SCAN = "import sys; sys.path.insert(0, sys.argv[2]); from run import sqlite_scan; sqlite_scan(sys.argv[1])"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", type=Path, default=HERE / "data" / "h100x300.sqlite")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="tk-convert-floor-"))
    res: dict = {"export": str(args.export), "export_bytes": args.export.stat().st_size,
                 "load_start": os.getloadavg(), "convert": [], "floor": []}
    try:
        for _ in range(args.repeat):
            f = measure([sys.executable, "-c", SCAN, str(args.export), str(HERE)])
            shutil.rmtree(tmp / "run", ignore_errors=True)
            c = measure(TRACEKIT + ["convert", str(args.export), "-o", str(tmp / "run"), "-q"])
            for m in (f, c):
                if m["rc"]:
                    print(f"failed: {m['cmd']}: {m['error']}", file=sys.stderr)
                    return 1
            res["floor"].append(f)
            res["convert"].append(c)
            print(f"floor {f['seconds']:.2f} s ({f['cpu_s']:.2f} s CPU); convert {c['seconds']:.2f} s "
                  f"({c['cpu_s']:.2f} s CPU, {c['rss_mib']:.0f} MiB); {c['seconds'] / f['seconds']:.2f}x", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for key in ("seconds", "cpu_s", "rss_mib"):
        a = [m[key] for m in res["convert"]]
        b = [m[key] for m in res["floor"]]
        res[key] = {"convert": statistics.median(a), "floor": statistics.median(b),
                    "convert_range": [min(a), max(a)], "floor_range": [min(b), max(b)],
                    "ratio": statistics.median(a) / statistics.median(b),
                    "ratio_pairs": sorted(x / y for x, y in zip(a, b))}
        print(f"{key}: convert {res[key]['convert']:.2f} ({min(a):.2f}-{max(a):.2f}), floor "
              f"{res[key]['floor']:.2f} ({min(b):.2f}-{max(b):.2f}), ratio {res[key]['ratio']:.2f}x")
    res["load_end"] = os.getloadavg()
    print(f"load {res['load_start'][0]:.1f} -> {res['load_end'][0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
