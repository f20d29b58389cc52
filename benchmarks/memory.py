"""Memory events at scale: conversion and the memory queries on a replicated real trace.

    python benchmarks/memory.py [--copies N] [--out DIR]

Source: a CPU training loop (the shape of tests/test_memory.py: MLP, Adam, 4 steps of data /
forward / backward / optimizer) recorded here by the installed torch with profile_memory=True,
then replicated N times (benchmarks/make_big_kineto.py). Baselines in the same run: the same
replicated trace with its [memory] events removed (what memory adds to `tracekit convert`),
and `step_summary` on the same run folder (what a memory query costs against a step query).
Prints one Markdown table (docs/benchmarks.md, "Memory events").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from make_big_kineto import build
from run import engine_query, measure


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    work = Path(a.out or tempfile.mkdtemp(prefix="tk-membench-"))
    work.mkdir(parents=True, exist_ok=True)
    from test_memory import _record

    src = _record(work / "src.json")
    doc = json.loads(src.read_text())
    plain = dict(doc, traceEvents=[e for e in doc["traceEvents"] if e.get("name") != "[memory]"])
    (work / "src_nomem.json").write_text(json.dumps(plain))
    big = build(src, a.copies, work / "big.json")
    small = build(work / "src_nomem.json", a.copies, work / "big_nomem.json")
    mem_events = sum(1 for e in doc["traceEvents"] if e.get("name") == "[memory]") * a.copies
    tk = [sys.executable, "-m", "tracekit", "-q", "convert"]
    base = measure(tk + [str(work / "big_nomem.json"), "-o", str(work / "run_nomem"), "--force"])
    full = measure(tk + [str(work / "big.json"), "-o", str(work / "run"), "--force"])
    rows = [("convert without [memory] (baseline)", base["seconds"], base["rss_mib"], 1.0),
            ("convert with [memory]", full["seconds"], full["rss_mib"], full["seconds"] / base["seconds"])]
    q0 = engine_query(work / "run", "step_summary")
    rows.append(("query step_summary (baseline)", q0, float("nan"), 1.0))
    for q in ("memory_summary", "memory_at_peak", "memory_timeline"):
        s = engine_query(work / "run", q)
        rows.append((f"query {q}", s, float("nan"), s / q0))
    print(f"{a.copies} copies: {big['events']:,} events ({big['bytes'] / 2**20:.0f} MiB JSON), "
          f"{mem_events:,} [memory] events; without them {small['events']:,} events")
    print("| step | seconds | peak RSS MiB | x baseline |\n|---|---|---|---|")
    for name, s, rss, ratio in rows:
        print(f"| {name} | {s:.2f} | {'' if math.isnan(rss) else f'{rss:.0f}'} | {ratio:.2f} |")
    return 0 if base["rc"] == 0 and full["rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
