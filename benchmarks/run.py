"""tracekit's benchmark: every figure of docs/performance.md, measured in one run.

    python benchmarks/run.py [--copies 300] [--big-copies 2500] [--out docs/performance.md]

One run, one machine, every figure measured here (tracekit byte-compiled first, as ``pip
install`` does):

1. builds the large export by replicating a real fixture (benchmarks/make_big_export.py);
2. floors: reading the file once (`cat` to /dev/null, warm cache) and SQLite itself scanning every
   event row, decoding every value tracekit reads (max() of each, no values handed out);
3. `tracekit convert` (time, rows/s, peak RSS) against nsys-ai's Parquet cache build plus its NVTX
   kernel map (benchmarks/setup_baselines.sh makes its environment), the two floors and the
   conversion alternating ``--repeat`` times (medians); where the conversion's CPU time goes
   (benchmarks/convert_profile.py, when py-spy is installed);
4. named queries (`tracekit query`) against the `nsys stats` report that computes the same thing
   on the same SQLite (`kernel_summary` and `nvtx_summary` alternating with theirs ``--repeat``
   times);
5. start-up: `tracekit --help` and a small query against importing what they must
   (benchmarks/startup.py);
6. `tracekit whatif BIG -s baseline -s launch=0` and `critical_path_summary` on the converted
   export, against its conversion;
7. many run folders against one of the same rows, and jobs of many ranks (benchmarks/multi.py);
8. large Kineto traces: `tracekit convert` against HTA's (traceinsight) parser, when installed;
9. optionally (``--big-copies``), last, the conversion of a multi-GB export.

Each command runs in its own process; time is wall-clock and peak RSS is the process's own
(``os.wait4`` rusage). The results go to WORK/results.json and the whole of docs/performance.md
is written from them (benchmarks/render.py), with ratios computed from this run only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FIXTURE, HERE, ROOT, TRACEKIT, machine, measure  # noqa: E402
from versions import versions_line  # noqa: E402

KINETO_FIXTURE = ROOT.parent / "shared" / "fixtures" / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"
EVENT_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS",
                "OSRT_API", "SCHED_EVENTS")

# (tracekit named query, nsys stats report computing the same quantity or None)
QUERIES = [
    ("kernel_summary", "gpukernsum"),
    ("cuda_api_summary", "cudaapisum"),
    ("nvtx_summary", "nvtxsum"),
    ("nvtx_gpu_projection", "nvtxgpuproj"),
    ("launch_overhead", "kernexecsum"),
    ("gpu_idle", None),
    ("launch_latency", None),
]


def sqlite_scan(path: Path) -> dict:
    """Two SQLite-only references, one statement per event table on one connection: ``count``
    (count(*) and max(start): SQLite walks every row but decodes one column) and ``values``
    (max() of every expression tracekit reads from that table, in the same FROM and WHERE:
    SQLite decodes every value tracekit converts, and hands none of them out)."""
    from adbc_scan import table_plans

    from tracekit.collectors.nsys.export import Export

    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    t0 = time.perf_counter()
    rows = 0
    for t in EVENT_TABLES:
        if t in tables:
            n, _ = con.execute(f'SELECT count(*), max("start") FROM "{t}"').fetchone()
            rows += n
    count_s = time.perf_counter() - t0
    stmts = []
    with Export(path) as ex:
        for plan, where in table_plans(ex):
            if plan.source in EVENT_TABLES:
                cols = ", ".join(f"max({expr})" for _alias, expr, _kind in plan.read_select(strict=True))
                stmts.append(f'SELECT {cols} FROM "{plan.source}" AS t{where}')
    t0 = time.perf_counter()
    for sql in stmts:
        con.execute(sql).fetchall()
    return {"seconds": time.perf_counter() - t0, "count_seconds": count_s, "rows": rows}


def engine_query(run_dir: Path, name: str) -> float:
    """Seconds of one named query in a running Python process (Engine already open; the
    process start-up and imports of `tracekit query` excluded); best of three when a run takes
    under 2 s."""
    code = ("import sys, time; from tracekit.query.engine import Engine; e = Engine([sys.argv[1]]); b = []\n"
            "e.con.execute('SET enable_progress_bar = false')\n"
            "for _ in range(3):\n"
            " t = time.perf_counter(); e.query(sys.argv[2]); b.append(time.perf_counter() - t)\n"
            " if b[-1] > 2: break\n"
            "print(min(b))")
    out = subprocess.run([sys.executable, "-c", code, str(run_dir), name], capture_output=True, text=True)
    try:
        return float(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else float("nan")
    except (ValueError, IndexError):
        return float("nan")


def adbc_floor(path: Path) -> dict:
    """Every column tracekit reads, through ADBC into Arrow, without decoding or writing."""
    return measure([sys.executable, str(HERE / "adbc_scan.py"), str(path)])


def cat_floor(path: Path) -> dict:
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    return measure(["cat", str(path)])


def _arguments(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=300)
    ap.add_argument("--big-copies", type=int, default=0,
                    help="also convert an export this many copies large (peak RSS check; 2500 copies = 5 GB); "
                         "the export is deleted afterwards")
    ap.add_argument("--kineto-copies", default="20,60",
                    help="comma-separated sizes of the Kineto benchmark traces, in copies of the fixture "
                         "(20 = 174 MB, 60 = 523 MB of JSON)")
    ap.add_argument("--work", type=Path, default=HERE / "data")
    ap.add_argument("--export", type=Path, help="use this export instead of building WORK/h100xN.sqlite")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    ap.add_argument("--nsys-ai-python", type=Path, default=HERE / ".venv-nsys-ai" / "bin" / "python")
    ap.add_argument("--hta-python", type=Path, default=HERE / ".venv-hta" / "bin" / "python")
    ap.add_argument("--skip-baselines", action="store_true")
    ap.add_argument("--stats-timeout", type=float, default=300,
                    help="seconds after which an nsys stats report is killed (nvtxgpuproj is quadratic)")
    ap.add_argument("--no-single-thread", action="store_true",
                    help="skip the extra TRACEKIT_THREADS=1 conversion")
    ap.add_argument("--repeat", type=int, default=3,
                    help="times the conversion alternates with nsys-ai's build and the floors, and "
                         "kernel_summary and nvtx_summary with their nsys stats reports (medians)")
    ap.add_argument("--startup-repeat", type=int, default=15, help="runs of each start-up pair (median)")
    ap.add_argument("--folders", type=int, default=300, help="run folders of the many-folders case (0: skip)")
    ap.add_argument("--ranks", default="8,64,256", help="job sizes of the many-ranks case ('' to skip)")
    ap.add_argument("--py-spy", type=Path, default=HERE / ".venv-tools" / "bin" / "py-spy",
                    help="py-spy for the conversion's sampling profile (skipped when missing)")
    ap.add_argument("--render-only", action="store_true",
                    help="measure nothing: write --out again from WORK/results.json of the last run "
                         "(after editing benchmarks/notes.md)")
    return ap.parse_args(argv)


def _export(args, build) -> tuple[Path, dict]:
    """The export to measure (built from the fixture unless there) and its rows and bytes."""
    export = args.export or args.work / f"h100x{args.copies}.sqlite"
    if not export.exists():
        return export, build(FIXTURE, args.copies, export)
    from make_big_export import EVENT_TABLES as COPIED  # the rows build() reports

    con = sqlite3.connect(f"file:{export}?mode=ro&immutable=1", uri=True)
    info = {"rows": {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                     for t in COPIED
                     if con.execute("SELECT 1 FROM sqlite_master WHERE name=?", (t,)).fetchone()},
            "bytes": export.stat().st_size}
    con.close()
    return export, info


PAIRED = ("kernel_summary", "nvtx_summary")


def _median(ms: list[dict]) -> dict:
    """Median time and CPU and largest peak RSS of the runs that succeeded (all runs' worst exit
    status when none did); ``left_out`` counts the failed runs, ``error`` names the first."""
    ok = [m for m in ms if m.get("rc") == 0]
    use = ok or ms
    return {"seconds": statistics.median(m["seconds"] for m in use),
            "cpu_s": statistics.median(m["cpu_s"] for m in use),
            "rss_mib": max(m["rss_mib"] for m in use),
            "rc": 0 if ok else next((m["rc"] for m in ms if m.get("rc")), 0),
            "left_out": len(ms) - len(ok) if ok else 0,
            "error": next((m["error"] for m in ms if m.get("error")), ""), "runs": ms}


def _queries(args, run_dir: Path, export: Path) -> list[dict]:
    """Each named query of QUERIES timed, and the nsys stats report computing the same; the
    queries of PAIRED alternate with their report ``--repeat`` times (medians)."""
    out = []
    for q, report in QUERIES:
        stats = report and shutil.which("nsys") and not args.skip_baselines
        n = args.repeat if q in PAIRED else 1
        tk, ns = [], []
        for _ in range(n):
            tk.append(measure(TRACEKIT + ["query", q, str(run_dir), "-f", "csv", "-o", os.devnull]))
            if stats:
                ns.append(measure(["nsys", "stats", "-q", "--report", report, "--format", "csv",
                                   "--output", "-", str(export)], timeout=args.stats_timeout))
        entry = {"query": q, "tracekit": _median(tk), "engine_s": engine_query(run_dir, q)}
        if stats:
            entry["nsys_stats"], entry["report"] = _median(ns), report
        out.append(entry)
        print(q, entry["tracekit"]["seconds"], entry.get("nsys_stats", {}).get("seconds"), flush=True)
    return out


def _whatif(run_dir: Path) -> dict:
    """What-if (baseline and one scenario) and the critical path of the converted export."""
    return {
        "whatif": measure(TRACEKIT + ["whatif", str(run_dir), "-s", "baseline", "-s", "launch=0",
                                      "-f", "csv", "-o", os.devnull]),
        "critical_path_summary": measure(TRACEKIT + ["query", "critical_path_summary", str(run_dir),
                                                     "-f", "csv", "-o", os.devnull]),
    }


def _profile(args, export: Path) -> dict | None:
    """benchmarks/convert_profile.py on the export: shares of the conversion's sampled CPU time
    per phase (py-spy, every thread), or None when py-spy is not installed."""
    spy = args.py_spy if args.py_spy.exists() else shutil.which("py-spy")
    if not spy:
        return None
    out = args.work / "profile.json"
    env = {**os.environ, "PATH": f"{Path(spy).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run([sys.executable, str(HERE / "convert_profile.py"), "--export", str(export),
                        "--json", str(out)], env=env, capture_output=True, text=True)
    print(r.stdout, r.stderr, flush=True)
    return json.loads(out.read_text()) if r.returncode == 0 and out.exists() else None


def _multi(args) -> dict:
    """benchmarks/multi.py's two cases, in this run."""
    import multi

    ns = argparse.Namespace(work=args.work, folders=args.folders, ranks=args.ranks, timeout=900)
    res: dict = {"started": _now()}
    if args.folders:
        res["folders"] = multi.folders_case(ns)
    if args.ranks:
        res["ranks"] = multi.ranks_case(ns)
    res["finished"] = _now()
    return res


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _big(args, build) -> dict:
    """Conversion of an export ``--big-copies`` copies large (deleted afterwards if built here)."""
    big = args.work / f"h100x{args.big_copies}.sqlite"
    made = not big.exists()
    if made:
        build(FIXTURE, args.big_copies, big)
    big_run = args.work / "run_big"
    shutil.rmtree(big_run, ignore_errors=True)
    out = {"bytes": big.stat().st_size, "copies": args.big_copies,
           "convert": measure(TRACEKIT + ["convert", str(big), "-o", str(big_run), "--force"])}
    bm = big_run / "manifest.json"
    if bm.exists():
        out["rows"] = {k: v["rows"] for k, v in json.loads(bm.read_text())["tables"].items()}
    shutil.rmtree(big_run, ignore_errors=True)
    if made:
        big.unlink()
    print("big", out, flush=True)
    return out


def _conversions(args, export: Path, run_dir: Path) -> dict:
    """Floors, tracekit's conversion and nsys-ai's cache build alternating ``--repeat`` times
    (medians), then the conversion one table at a time (once)."""
    res: dict = {"cat": cat_floor(export)}
    scans, adbc, convs, ai, ai_incomplete = [], [], [], [], []
    baseline = not args.skip_baselines and args.nsys_ai_python.exists()
    for _ in range(args.repeat):
        scans.append(sqlite_scan(export))
        adbc.append(adbc_floor(export))
        shutil.rmtree(run_dir, ignore_errors=True)
        convs.append(measure(TRACEKIT + ["convert", str(export), "-o", str(run_dir), "--force"]))
        if baseline:  # only complete builds count (nsys_ai_build.py: exit 3 for an incomplete cache)
            for _attempt in range(4):
                m = measure([str(args.nsys_ai_python), str(HERE / "nsys_ai_build.py"), str(export)])
                shutil.rmtree(export.with_suffix(".nsys-cache"), ignore_errors=True)
                (ai if m["rc"] == 0 else ai_incomplete).append(m)
                if m["rc"] == 0:
                    break
        print("floors", scans[-1]["seconds"], adbc[-1]["seconds"], "convert", convs[-1]["seconds"],
              "nsys-ai", ai[-1]["seconds"] if ai else None, flush=True)
    res["sqlite_scan"] = {"seconds": statistics.median(x["seconds"] for x in scans),
                          "count_seconds": statistics.median(x["count_seconds"] for x in scans),
                          "rows": scans[0]["rows"], "runs": scans}
    res["adbc_scan"], res["convert"] = _median(adbc), _median(convs)
    if ai:
        res["nsys_ai"] = _median(ai)
    if baseline:
        res["nsys_ai_incomplete"] = [{"seconds": m["seconds"], "error": m["error"]} for m in ai_incomplete]
    manifest = json.loads((run_dir / "manifest.json").read_text()) if (run_dir / "manifest.json").exists() else {}
    res["converted_rows"] = sum(t["rows"] for t in manifest.get("tables", {}).values())
    if not args.no_single_thread:
        one = args.work / "run_1thread"
        res["convert_1thread"] = measure(TRACEKIT + ["convert", str(export), "-o", str(one), "--force"],
                                         env={**os.environ, "TRACEKIT_THREADS": "1"})
        shutil.rmtree(one, ignore_errors=True)
        print("convert 1 thread", res["convert_1thread"], flush=True)
    return res


def main(argv=None) -> int:
    args = _arguments(argv)
    from render import write_page

    if args.render_only:
        write_page(args.out, json.loads((args.work / "results.json").read_text()))
        print(f"wrote {args.out} from {args.work / 'results.json'}")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    import startup
    from make_big_export import build

    startup.compile_sources()
    export, info = _export(args, build)
    res: dict = {"export": str(export), "export_bytes": export.stat().st_size, "rows": info["rows"],
                 "copies": args.copies, "repeat": args.repeat, "started": _now(),
                 "load_start": os.getloadavg(), "versions": versions_line(), "machine": machine()}
    print(f"export {export} ({res['export_bytes'] / 1e6:.0f} MB)", flush=True)
    run_dir = args.work / f"run_x{args.copies}"  # shared with multi.py's many-folders case
    res.update(_conversions(args, export, run_dir))
    res["queries"] = _queries(args, run_dir, export)
    res.update(_whatif(run_dir))
    print("whatif", res["whatif"]["seconds"], "critical path", res["critical_path_summary"]["seconds"], flush=True)
    res["profile"] = _profile(args, export)
    res["startup"] = startup.measure_small(args.startup_repeat)
    res["multi"] = _multi(args)
    res["kineto"] = [k for k in (kineto_bench(args, int(c)) for c in str(args.kineto_copies).split(",") if c)
                     if k is not None]
    if args.big_copies:  # last: writing and deleting 5 GB leaves the disk busy for a while
        res["big"] = _big(args, build)
    res["finished"] = _now()
    res["load_end"] = os.getloadavg()
    (args.work / "results.json").write_text(json.dumps(res, indent=1))
    write_page(args.out, res)
    print(f"wrote {args.out}")
    return 0


def kineto_bench(args, copies: int) -> dict | None:
    try:
        from make_big_kineto import build as build_kineto
    except ImportError:
        return None
    trace = args.work / f"kineto_x{copies}.json"
    if not trace.exists():
        build_kineto(KINETO_FIXTURE, copies, trace)
    out = {"bytes": trace.stat().st_size, "copies": copies}
    run_dir = args.work / "run_kineto"
    shutil.rmtree(run_dir, ignore_errors=True)
    out["convert"] = measure(TRACEKIT + ["convert", str(trace), "-o", str(run_dir), "--force"])
    m = run_dir / "manifest.json"
    if m.exists():
        out["rows"] = sum(v["rows"] for v in json.loads(m.read_text())["tables"].values())
    shutil.rmtree(run_dir, ignore_errors=True)
    if args.hta_python.exists() and not args.skip_baselines:
        out["hta"] = measure([str(args.hta_python), str(HERE / "hta_parse.py"), str(trace)])
    print("kineto", out, flush=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
