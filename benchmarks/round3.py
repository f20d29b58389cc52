"""Issue 39's measurements of the 596 MB export in one run: conversion against SQLite's own scan,
`kernel_summary` / `nvtx_summary` against their `nsys stats` reports, and the what-if replay and
critical path of the same export against its conversion.

    python benchmarks/round3.py [--export benchmarks/data/h100x300.sqlite] [--repeat 2]
    python benchmarks/round3.py --render-only [--startup FILE.json] [--out docs/performance.md]

Each command is its own process (time: wall clock; CPU: user + system of it and its threads;
peak RSS: ``os.wait4``). A command and its baseline alternate (A B A B ...) so that the load of a
shared machine falls on both alike; the medians and their ratios are printed and written to
``--json`` (default: WORK/results_round3.json). The export is built by make_big_export.py when
missing; the run folder is converted here. ``--render-only`` writes the section between the
``round3`` markers of docs/performance.md from that file (and benchmarks/startup.py's ``--json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import FIXTURE, TRACEKIT, measure, sqlite_scan  # noqa: E402
from versions import versions_line  # noqa: E402

PAIRS = (("kernel_summary", "gpukernsum"), ("nvtx_summary", "nvtxsum"))


def median(ms: list[dict], key: str) -> float:
    return statistics.median(m[key] for m in ms)


def summary(ms: list[dict]) -> dict:
    return {"seconds": median(ms, "seconds"), "cpu_s": median(ms, "cpu_s"),
            "rss_mib": max(m["rss_mib"] for m in ms), "rc": max(abs(m["rc"]) for m in ms),
            "runs": ms}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=HERE / "data")
    ap.add_argument("--export", type=Path)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: convert,queries,whatif")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--startup", type=Path, help="benchmarks/startup.py --json output to include")
    ap.add_argument("--out", type=Path, default=HERE.parent / "docs" / "performance.md")
    args = ap.parse_args(argv)
    if args.render_only:
        from round3_render import write_section

        res = json.loads((args.json or args.work / "results_round3.json").read_text())
        startup = json.loads(args.startup.read_text()) if args.startup else None
        write_section(args.out, res, startup)
        print(f"wrote {args.out}")
        return 0
    skip = set(args.skip.split(","))
    args.work.mkdir(parents=True, exist_ok=True)
    export = args.export or args.work / "h100x300.sqlite"
    if not export.exists():
        from make_big_export import build

        build(FIXTURE, 300, export)
    run_dir = args.work / "run_x300"
    res: dict = {"export": str(export), "export_bytes": export.stat().st_size,
                 "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                 "load_start": os.getloadavg(), "versions": versions_line()}
    res["sqlite_scan"] = sqlite_scan(export)
    print("sqlite scan", res["sqlite_scan"], flush=True)
    if "convert" not in skip or not (run_dir / "manifest.json").exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        res["convert"] = measure(TRACEKIT + ["convert", str(export), "-o", str(run_dir), "-q"])
        print("convert", res["convert"], flush=True)
    if "queries" not in skip:
        res["queries"] = []
        for q, report in PAIRS:
            a, b = [], []
            for _ in range(args.repeat):
                a.append(measure(TRACEKIT + ["query", q, str(run_dir), "-f", "csv", "-o", os.devnull]))
                b.append(measure(["nsys", "stats", "-q", "--report", report, "--format", "csv",
                                  "--output", "-", str(export)], timeout=300))
            e = {"query": q, "report": report, "tracekit": summary(a), "nsys_stats": summary(b)}
            res["queries"].append(e)
            print(q, e["tracekit"]["seconds"], report, e["nsys_stats"]["seconds"], flush=True)
    if "whatif" not in skip:
        res["whatif"] = measure(TRACEKIT + ["whatif", str(run_dir), "-s", "baseline", "-s", "launch=0",
                                            "-f", "csv", "-o", os.devnull])
        print("whatif", res["whatif"], flush=True)
        res["critical_path_summary"] = measure(TRACEKIT + ["query", "critical_path_summary", str(run_dir),
                                                           "-f", "csv", "-o", os.devnull])
        print("critical_path_summary", res["critical_path_summary"], flush=True)
    res["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    res["load_end"] = os.getloadavg()
    out = args.json or args.work / "results_round3.json"
    out.write_text(json.dumps(res, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
