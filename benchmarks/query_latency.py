"""`tracekit query kernel_summary` / `nvtx_summary` against `nsys stats -r gpukernsum` / `nvtxsum`
on the same export, process start included, and where the query's own time goes.

    python benchmarks/query_latency.py [--export benchmarks/data/h100x60.sqlite] [--repeat 3]

The export is built by make_big_export.py (60 copies of the H100 fixture) when missing, and
converted once (WORK/run_<export stem>). tracekit's modules are compiled to bytecode first
(``compileall``), as an installed wheel has them: with PYTHONDONTWRITEBYTECODE set (as on the
development machine) an editable install otherwise compiles every tracekit module from source in
every process. Each pair alternates (tracekit, nsys stats, tracekit, ...) ``--repeat`` times;
the medians, the spread (min-max) and the ratio of the medians are printed, in wall time and in
CPU time (user + system, all threads and children: robust to load), and written to ``--json``.

The phases of one query run inside one process (``--phases``; CPU time of each step, median of
``--repeat`` processes): the interpreter's start (``python -c pass``, its own process), importing
and building the CLI (typer, click, tracekit.cli), importing the query path (DuckDB, pyarrow with NumPy,
tracekit.query, tracekit.schema), opening the engine (run folder, file checks), the query itself
(views, SQL, the run's warnings), writing the CSV.
"""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import FIXTURE, ROOT, TRACEKIT, measure  # noqa: E402

PAIRS = (("kernel_summary", "gpukernsum"), ("nvtx_summary", "nvtxsum"))


def phases(name: str, run_dir: str) -> dict:
    """CPU seconds of each step of one query, in this process (see the module docstring)."""
    out: dict = {}
    t = time.process_time()

    def mark(key: str) -> None:
        nonlocal t
        now = time.process_time()
        out[key] = now - t
        t = now

    import typer

    import tracekit.cli

    typer.main.get_command(tracekit.cli.app)  # what every run does before parsing its arguments
    mark("import and build the CLI (typer, click, tracekit.cli)")
    from tracekit.cli.output import Format, render
    from tracekit.query import get_query, run
    from tracekit.query.engine import Engine
    get_query(name)
    mark("import query path (DuckDB, pyarrow, NumPy, tracekit.query, tracekit.schema)")
    eng = Engine([run_dir])
    mark("open the engine (run folder, manifest, file checks)")
    res = run(name, engine=eng)
    mark("the query (views, SQL, the run's warnings)")
    render(res.table, Format("csv"), Path(os.devnull), units=res.units)
    mark("write the CSV")
    eng.close()
    return out


def median_spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", type=Path, default=HERE / "data" / "h100x60.sqlite")
    ap.add_argument("--copies", type=int, default=60, help="copies when the export is built")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--phases", nargs=2, metavar=("QUERY", "RUN"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phases:
        print(json.dumps(phases(*args.phases)))
        return 0
    for pkg in ("tracekit", "collectors"):
        compileall.compile_dir(ROOT / pkg, quiet=1)
    if not args.export.exists():
        from make_big_export import build

        args.export.parent.mkdir(parents=True, exist_ok=True)
        build(FIXTURE, args.copies, args.export)
    run_dir = args.export.parent / f"run_{args.export.stem}"
    if not (run_dir / "manifest.json").exists():
        subprocess.run(TRACEKIT + ["convert", str(args.export), "-o", str(run_dir), "-q", "--force"], check=True)
    res: dict = {"export": str(args.export), "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                 "load_start": os.getloadavg(), "pairs": [], "phases": {}}
    for q, report in PAIRS:
        a, b = [], []
        for _ in range(args.repeat):
            a.append(measure(TRACEKIT + ["query", q, str(run_dir), "-f", "csv", "-o", os.devnull]))
            b.append(measure(["nsys", "stats", "-q", "--report", report, "--format", "csv", "--output", "-",
                              str(args.export)], timeout=600))
        bad = [m for m in a + b if m["rc"]]
        if bad:
            print(f"failed: {bad[0]['cmd']}: {bad[0]['error']}", file=sys.stderr)
            return 1
        e = {"query": q, "report": report}
        for key in ("seconds", "cpu_s"):
            e[f"tracekit_{key}"] = median_spread([m[key] for m in a])
            e[f"nsys_{key}"] = median_spread([m[key] for m in b])
            e[f"ratio_{key}"] = e[f"nsys_{key}"]["median"] / e[f"tracekit_{key}"]["median"]
            e[f"ratio_{key}_pairs"] = median_spread([y[key] / x[key] for x, y in zip(a, b)])
        res["pairs"].append(e)
        print(f"{q}: {e['tracekit_seconds']['median']:.2f} s ({e['tracekit_cpu_s']['median']:.2f} s CPU); "
              f"{report}: {e['nsys_seconds']['median']:.2f} s ({e['nsys_cpu_s']['median']:.2f} s CPU); "
              f"{e['ratio_seconds']:.1f}x wall (pairs {e['ratio_seconds_pairs']['min']:.1f}-"
              f"{e['ratio_seconds_pairs']['max']:.1f}), {e['ratio_cpu_s']:.1f}x CPU", flush=True)
    start = [measure([sys.executable, "-c", "pass"])["cpu_s"] for _ in range(args.repeat)]
    for q, _r in PAIRS:
        runs = []
        for _ in range(args.repeat):
            p = subprocess.run([sys.executable, __file__, "--phases", q, str(run_dir)], check=True,
                               capture_output=True, text=True)
            runs.append(json.loads(p.stdout))
        ph = {"interpreter start (python -c pass, its own process)": statistics.median(start)}
        ph.update({k: statistics.median(r[k] for r in runs) for k in runs[0]})
        res["phases"][q] = ph
        total = sum(ph.values())
        print(f"{q} phases (CPU s, median of {args.repeat}):")
        for k, v in ph.items():
            print(f"  {v:6.3f}  {v / total:6.1%}  {k}")
    res["load_end"] = os.getloadavg()
    res["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    out = args.json or args.export.parent / "results_query_latency.json"
    out.write_text(json.dumps(res, indent=1))
    print(f"load {res['load_start'][0]:.1f} -> {res['load_end'][0]:.1f}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
