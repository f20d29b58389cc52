"""`tracekit timeline` speed and memory, against floors measured in the same run.

    python benchmarks/timeline.py [--copies 10,40] [--work benchmarks/data]

For each size, a Kineto trace of N copies of the shared NCCL fixture (benchmarks/make_big_kineto.py)
is converted into a run folder; then, each in its own process (wall-clock, peak RSS from wait4):

- floor ``query``: DuckDB streaming the ``timeline_events`` named query to Arrow batches and
  dropping them (the SQL part of the timeline: selection, flows, sort, JSON members);
- floor ``json.load``: Python's json module reading the input Chrome trace (what a Python tool
  pays just to read a trace of that size);
- ``tracekit timeline`` to .json and to .json.gz.

Ratios are to the query floor of the same size. Peak RSS should not grow with the trace: the
events stream from DuckDB to the file.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import KINETO_FIXTURE, TRACEKIT, measure  # noqa: E402

FLOOR = """
import sys
from tracekit.query.engine import Engine
n = 0
with Engine([sys.argv[1]]) as eng:
    for b in eng.query_batches("timeline_events", {"origin_ns": "0"}):
        n += b.num_rows
print(n)
"""

LOAD = "import json, sys; json.load(open(sys.argv[1]))"


def bench(copies: int, work: Path) -> dict:
    from make_big_kineto import build

    trace = work / f"kineto_x{copies}.json"
    if not trace.exists():
        build(KINETO_FIXTURE, copies, trace)
    run = work / f"run_timeline_x{copies}"
    if not (run / "manifest.json").exists():
        shutil.rmtree(run, ignore_errors=True)
        measure(TRACEKIT + ["convert", str(trace), "-o", str(run), "--force"])
    out = {"copies": copies, "trace_bytes": trace.stat().st_size}
    out["query"] = measure([sys.executable, "-c", FLOOR, str(run)])
    out["json_load"] = measure([sys.executable, "-c", LOAD, str(trace)])
    for suffix in (".json", ".json.gz"):
        dst = work / f"timeline_x{copies}{suffix}"
        out[suffix] = measure(TRACEKIT + ["timeline", str(run), "-o", str(dst), "--force", "--max-events", "0"])
        out[suffix]["bytes"] = dst.stat().st_size if dst.exists() else None
        dst.unlink(missing_ok=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", default="10,40")
    ap.add_argument("--work", type=Path, default=HERE / "data")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    rows = [bench(int(c), args.work) for c in args.copies.split(",") if c]
    print(json.dumps(rows, indent=1))
    print("\n| copies | trace MB | query floor s | json.load s | timeline .json s (x floor) | peak RSS MiB "
          "| .json MB | timeline .json.gz s | .json.gz MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        q, j, g = r["query"]["seconds"], r[".json"], r[".json.gz"]
        print(f"| {r['copies']} | {r['trace_bytes'] / 1e6:,.0f} | {q:.1f} | {r['json_load']['seconds']:.1f} "
              f"| {j['seconds']:.1f} ({j['seconds'] / q:.1f}x) | {j['rss_mib']:,.0f} | {(j['bytes'] or 0) / 1e6:,.0f} "
              f"| {g['seconds']:.1f} | {(g['bytes'] or 0) / 1e6:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
