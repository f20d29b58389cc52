"""`tracekit convert` of one export with this tree's collectors against another commit's,
alternating, in CPU time (robust to load) and wall time.

    python benchmarks/convert_ab.py [--commit main] [--export benchmarks/data/h100x60.sqlite] [--repeat 3]

The other commit's ``collectors/`` is unpacked (``git archive``) into a temporary folder and put
in place of tracekit.collectors' path in the measured process, so the rest of tracekit is this
tree's: the difference is the collectors' alone. Both conversions' Parquet files are compared
byte for byte after the first pair. Medians, spread (min-max) and the ratio of the medians go to
stdout and ``--json``.
"""

from __future__ import annotations

import argparse
import compileall
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import ROOT, TRACEKIT, measure  # noqa: E402

RUNNER = """import runpy, sys
import tracekit.collectors as c
c.__path__[:] = [sys.argv.pop(1)]
sys.argv[0] = 'tracekit'
runpy.run_module('tracekit', run_name='__main__')
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", default="main")
    ap.add_argument("--export", type=Path, default=HERE / "data" / "h100x60.sqlite")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="tk-convert-ab-"))
    try:
        tree = tmp / "tree"
        tree.mkdir()
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", args.commit, "collectors"],
                              check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=arch, check=True)
        for d in (tree / "collectors", ROOT / "collectors", ROOT / "tracekit"):
            compileall.compile_dir(d, quiet=1)
        old_cmd = [sys.executable, "-c", RUNNER, str(tree / "collectors")]
        res: dict = {"export": str(args.export), "commit": args.commit, "load_start": os.getloadavg(),
                     "this": [], "other": []}
        for i in range(args.repeat):
            for key, cmd in (("other", old_cmd), ("this", TRACEKIT)):
                out = tmp / f"run_{key}"
                shutil.rmtree(out, ignore_errors=True)
                m = measure(cmd + ["convert", str(args.export), "-o", str(out), "-q"])
                if m["rc"]:
                    print(f"failed: {m['cmd']}: {m['error']}", file=sys.stderr)
                    return 1
                res[key].append(m)
                print(f"{key}: {m['seconds']:.2f} s, {m['cpu_s']:.2f} s CPU, {m['rss_mib']:.0f} MiB", flush=True)
            if i == 0:
                names = sorted(p.name for p in (tmp / "run_this").glob("*.parquet"))
                _m, diff, err = filecmp.cmpfiles(tmp / "run_this", tmp / "run_other", names, shallow=False)
                res["parquet_files"] = len(names)
                res["parquet_differ"] = diff + err
                print(f"{len(names)} Parquet files, differing: {diff + err or 'none'}", flush=True)
        for key in ("seconds", "cpu_s", "rss_mib"):
            a = [m[key] for m in res["this"]]
            b = [m[key] for m in res["other"]]
            res[key] = {"this": statistics.median(a), "other": statistics.median(b),
                        "this_range": [min(a), max(a)], "other_range": [min(b), max(b)],
                        "ratio_other_to_this": statistics.median(b) / statistics.median(a)}
            print(f"{key}: this {statistics.median(a):.2f} ({min(a):.2f}-{max(a):.2f}), {args.commit} "
                  f"{statistics.median(b):.2f} ({min(b):.2f}-{max(b):.2f})")
        res["load_end"] = os.getloadavg()
        if args.json:
            args.json.write_text(json.dumps(res, indent=1))
        print(f"load {res['load_start'][0]:.1f} -> {res['load_end'][0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
