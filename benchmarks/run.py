"""tracekit's conversion and query benchmark, against what users would run instead.

    python benchmarks/run.py [--copies 300] [--big-copies 0] [--out docs/performance.md]

One run, one machine, every figure measured here:

1. builds the large export by replicating a real fixture (benchmarks/make_big_export.py);
2. floors: reading the file once (`cat` to /dev/null, warm cache) and SQLite itself scanning every
   event row, decoding every value tracekit reads (max() of each, no values handed out);
3. `tracekit convert` (time, rows/s, peak RSS) against nsys-ai's Parquet cache build plus its NVTX
   kernel map (benchmarks/setup_baselines.sh makes its environment);
4. named queries (`tracekit query`) against the `nsys stats` report that computes the same thing
   on the same SQLite;
5. optionally (``--big-copies``) the peak RSS of converting a multi-GB export;
6. a large Kineto trace: `tracekit convert` against HTA's (traceinsight) parser, when installed.

Each command runs in its own process; time is wall-clock and peak RSS is the process's own
(``os.wait4`` rusage). Results go to a Markdown file (docs/performance.md) with ratios computed
from this run only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FIXTURE, HERE, ROOT, TRACEKIT, fmt, machine, measure  # noqa: E402
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
                cols = ", ".join(f"max({expr})" for _alias, expr, _kind in plan.select)
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
    ap.add_argument("--render-only", action="store_true",
                    help="measure nothing: write --out again from WORK/results.json of the last run "
                         "(after editing benchmarks/notes.md)")
    return ap.parse_args(argv)


def _export(args, build) -> tuple[Path, dict]:
    """The export to measure (built from the fixture unless there) and its rows and bytes."""
    export = args.export or args.work / f"h100x{args.copies}.sqlite"
    if not export.exists():
        return export, build(FIXTURE, args.copies, export)
    con = sqlite3.connect(f"file:{export}?mode=ro&immutable=1", uri=True)
    info = {"rows": {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                     for t in EVENT_TABLES
                     if con.execute("SELECT 1 FROM sqlite_master WHERE name=?", (t,)).fetchone()},
            "bytes": export.stat().st_size}
    con.close()
    return export, info


def _queries(args, run_dir: Path, export: Path) -> list[dict]:
    """Each named query of QUERIES timed, and the nsys stats report computing the same."""
    out = []
    for q, report in QUERIES:
        entry = {"query": q, "tracekit": measure(TRACEKIT + ["query", q, str(run_dir), "-f", "csv", "-o", os.devnull]),
                 "engine_s": engine_query(run_dir, q)}
        if report and shutil.which("nsys") and not args.skip_baselines:
            entry["nsys_stats"] = measure(["nsys", "stats", "-q", "--report", report, "--format", "csv",
                                           "--output", "-", str(export)], timeout=args.stats_timeout)
            entry["report"] = report
        out.append(entry)
        print(entry, flush=True)
    return out


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


def main(argv=None) -> int:
    args = _arguments(argv)
    if args.render_only:
        res = json.loads((args.work / "results.json").read_text())
        _write_page(args.out, render(res, args))
        print(f"wrote {args.out} from {args.work / 'results.json'}")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    from make_big_export import build

    export, info = _export(args, build)
    res: dict = {"export": str(export), "export_bytes": export.stat().st_size, "rows": info["rows"],
                 "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                 "load_start": os.getloadavg(), "versions": versions_line()}
    print(f"export {export} ({res['export_bytes'] / 1e6:.0f} MB)", flush=True)

    res["cat"] = cat_floor(export)
    res["sqlite_scan"] = sqlite_scan(export)
    res["adbc_scan"] = adbc_floor(export)
    print("floors", res["cat"]["seconds"], res["sqlite_scan"]["seconds"], res["adbc_scan"]["seconds"], flush=True)
    run_dir = args.work / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    res["convert"] = measure(TRACEKIT + ["convert", str(export), "-o", str(run_dir), "--force"])
    print("convert", res["convert"], flush=True)
    manifest = json.loads((run_dir / "manifest.json").read_text()) if (run_dir / "manifest.json").exists() else {}
    res["converted_rows"] = sum(t["rows"] for t in manifest.get("tables", {}).values())
    if not args.no_single_thread:
        one = args.work / "run_1thread"
        res["convert_1thread"] = measure(TRACEKIT + ["convert", str(export), "-o", str(one), "--force"],
                                         env={**os.environ, "TRACEKIT_THREADS": "1"})
        shutil.rmtree(one, ignore_errors=True)
        print("convert 1 thread", res["convert_1thread"], flush=True)

    if not args.skip_baselines and args.nsys_ai_python.exists():
        res["nsys_ai"] = measure([str(args.nsys_ai_python), str(HERE / "nsys_ai_build.py"), str(export)])
        shutil.rmtree(export.with_suffix(".nsys-cache"), ignore_errors=True)
        print("nsys-ai", res["nsys_ai"], flush=True)

    res["queries"] = _queries(args, run_dir, export)
    if args.big_copies:
        res["big"] = _big(args, build)

    res["kineto"] = [k for k in (kineto_bench(args, int(c)) for c in str(args.kineto_copies).split(",") if c)
                     if k is not None]
    res["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    res["load_end"] = os.getloadavg()
    (args.work / "results.json").write_text(json.dumps(res, indent=1))
    _write_page(args.out, render(res, args))
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


def _failed(m: dict) -> str:
    return "" if m.get("rc", 0) == 0 else f" (failed: {m.get('error', '')})"


def _row(name, m, base=None, base_name=""):
    ratio = ""
    if base and m.get("rc") == 0 and base.get("rc", 0) == 0:
        ratio = f"{base['seconds'] / m['seconds']:.1f}x faster than {base_name}" if base["seconds"] >= m["seconds"] \
            else f"{m['seconds'] / base['seconds']:.2f}x the time of {base_name}"
    rss = fmt(m["rss_mib"], " MiB") if "rss_mib" in m else ""
    cpu = fmt(m["cpu_s"], " s") if "cpu_s" in m else ""
    return f"| {name}{_failed(m)} | {fmt(m['seconds'], ' s')} | {cpu} | {rss} | {ratio} |"


def _kineto_list(res: dict) -> list[dict]:
    k = res.get("kineto")
    return [] if not k else [k] if isinstance(k, dict) else k


def _ok(m: dict | None) -> bool:
    return bool(m) and m.get("rc") == 0


def targets(res: dict) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for each target of issue 8."""
    out = []
    conv, ai, scan = res["convert"], res.get("nsys_ai"), res["sqlite_scan"]
    if _ok(conv) and _ok(ai):
        r = ai["seconds"] / conv["seconds"]
        out.append(("conversion >= 3x faster than nsys-ai's cache build", f"{r:.1f}x", r >= 3))
    if _ok(conv):
        r = conv["seconds"] / scan["seconds"]
        out.append(("conversion within 3.5x of SQLite's own scan (every value tracekit reads)", f"{r:.1f}x", r <= 3.5))
        out.append(("conversion peak RSS < 1 GB (1,024 MiB)", fmt(conv["rss_mib"], " MiB"), conv["rss_mib"] < 1024))
    for q in ("kernel_summary", "nvtx_summary"):
        e = next((e for e in res["queries"] if e["query"] == q), None)
        if e and _ok(e["tracekit"]) and _ok(e.get("nsys_stats")):
            r = e["nsys_stats"]["seconds"] / e["tracekit"]["seconds"]
            out.append((f"`{q}` >= 10x faster than `nsys stats --report {e['report']}`", f"{r:.1f}x", r >= 10))
    big = res.get("big")
    if big:
        c = big["convert"]
        out.append((f"peak RSS < 1.5 GB (1,536 MiB) converting a {big['bytes'] / 1e9:.1f} GB export",
                    fmt(c["rss_mib"], " MiB") + _failed(c), _ok(c) and c["rss_mib"] < 1536))
    for k in _kineto_list(res):
        if _ok(k["convert"]) and _ok(k.get("hta")):
            size = f"{k['bytes'] / 1e6:,.0f} MB trace"
            r = k["hta"]["seconds"] / k["convert"]["seconds"]
            out.append((f"Kineto conversion >= 3x faster than HTA ({size})", f"{r:.1f}x", r >= 3))
            m = k["convert"]["rss_mib"] / k["hta"]["rss_mib"]
            out.append((f"Kineto conversion peak RSS <= 1/3 of HTA's ({size})", f"{m:.2f} of HTA's", m <= 1 / 3))
    return out


_SECTION = re.compile(r"<!-- (\w+):(?:begin|start) -->.*?<!-- \1:end -->\n?", re.S)


def _write_page(out: Path, text: str) -> None:
    """Write the page, keeping the sections other benchmarks own (between their ``<!-- NAME:begin
    -->`` / ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` markers: benchmarks/limits.py,
    benchmarks/multi.py) at the end, as they were."""
    kept = [m.group(0) for m in _SECTION.finditer(out.read_text()) if m.group(0) not in text] \
        if out.exists() else []
    out.write_text(text.rstrip("\n") + "\n" + "".join("\n" + s for s in kept))


def _head(res: dict) -> list[str]:
    """The page's title, machine, load and targets table."""
    load = res["load_start"]
    L = [
        "# Performance",
        "",
        "<!-- Written by `python benchmarks/run.py`; rerun it to refresh every figure. -->",
        "",
        f"Measured {res['started'][:16].replace('T', ' ')} to {res['finished'][11:16]} UTC on {machine()}.",
        res.get("versions", "Packages: not recorded (a run before benchmarks/versions.py)."),
        f"Load average when the run started: {load[0]:.1f} (1 min), {load[1]:.1f} (5 min); at its end "
        f"{res['load_end'][0]:.1f}. A load above the core count means other processes shared the cores "
        "and wall-clock times are inflated (CPU times much less so).",
        "",
        "All figures come from one run of `benchmarks/run.py` on this machine; ratios are between "
        "commands measured in that run. *time* is the wall-clock time of the whole command (process start "
        "included), *CPU* its user + system time (all threads and child processes), *peak RSS* the "
        "largest resident set size of the process (`os.wait4`).",
        "",
        "Rerun: `bash benchmarks/setup_baselines.sh` (once: nsys-ai and HTA in their own virtual "
        "environments), then `python benchmarks/run.py --big-copies 2500`.",
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for name, got, met in targets(res):
        L.append(f"| {name} | {got} | {'yes' if met else '**no**'} |")
    return L


def _conversion(res: dict, args) -> list[str]:
    """The input and the conversion section."""
    rows = res["rows"]
    L = [
        "",
        f"## Input: the 2-GPU H100 fixture export replicated {args.copies} times",
        "",
        f"{res['export_bytes'] / 1e6:,.0f} MB; " + ", ".join(f"{t} {n:,}" for t, n in rows.items() if n) + ".",
        "Built by `benchmarks/make_big_export.py` (timestamps, correlation IDs and NVTX range IDs shifted per copy).",
        "",
        "## Conversion",
        "",
        "| command | time | CPU | peak RSS | ratio |",
        "|---|---|---|---|---|",
        f"| read the file once (`cat` > /dev/null, warm cache) | {fmt(res['cat']['seconds'], ' s')} | | | floor |",
        f"| SQLite walks every event row ({res['sqlite_scan']['rows']:,} rows: count(*) and max(start)) | "
        f"{fmt(res['sqlite_scan']['count_seconds'], ' s')} | | | |",
        f"| SQLite scans every event row, decoding every value tracekit reads (max() of each) | "
        f"{fmt(res['sqlite_scan']['seconds'], ' s')} | | | floor |",
        _row("SQLite + ADBC read every column tracekit reads into Arrow, no decoding (`benchmarks/adbc_scan.py`)",
             res["adbc_scan"]),
    ]
    conv = res["convert"]
    L.append(_row("`tracekit convert`", conv, res.get("nsys_ai"), "nsys-ai"))
    if "convert_1thread" in res:
        L.append(_row("`tracekit convert`, one table at a time (`TRACEKIT_THREADS=1`)", res["convert_1thread"]))
    if "nsys_ai" in res:
        L.append(_row("nsys-ai 0.3.0 Parquet cache + NVTX kernel map", res["nsys_ai"]))
    if conv.get("rc") == 0:
        L += ["", f"`tracekit convert` wrote {res['converted_rows']:,} rows: "
              f"{res['converted_rows'] / conv['seconds']:,.0f} rows/s; "
              f"{conv['seconds'] / res['sqlite_scan']['seconds']:.2f}x SQLite's own scan, "
              f"{conv['seconds'] / res['adbc_scan']['seconds']:.2f}x the ADBC read of the same columns, "
              f"{conv['seconds'] / res['cat']['seconds']:.1f}x reading the file once."]
    if "big" in res:
        b = res["big"]
        c = b["convert"]
        rows_b = b.get("rows", {})
        L += ["", f"### A {b['bytes'] / 1e9:.1f} GB export ({b['copies']} copies)", "",
              f"`tracekit convert`: {fmt(c['seconds'], ' s')} wall, {fmt(c['cpu_s'], ' s')} CPU, peak RSS "
              f"{fmt(c['rss_mib'], ' MiB')}{_failed(c)}"
              + (f"; {rows_b.get('kernels', 0):,} kernels, {rows_b.get('cuda_api', 0):,} runtime calls, "
                 f"{rows_b.get('nvtx_ranges', 0):,} NVTX ranges." if rows_b else ".")]
    return L


def _query_rows(res: dict) -> list[str]:
    """The queries against nsys stats section."""
    L = ["", "## Queries against `nsys stats` on the same data", "",
          "`tracekit query NAME RUN -f csv` on the converted run folder; `nsys stats --report R --format csv` "
          "on the SQLite export.", "",
          "*in Engine*: the same query in a running Python process (`tracekit.query.engine.Engine` open, best "
          "of 3), without the start-up and imports each `tracekit query` command pays.", "",
          "| query | tracekit | CPU | peak RSS | in Engine | nsys stats report | nsys stats | CPU "
          "| peak RSS | ratio | ratio in Engine |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in res["queries"]:
        t = e["tracekit"]
        s = e.get("nsys_stats")
        eng = e.get("engine_s", float("nan"))
        tk = (f"{fmt(t['seconds'], ' s')}{_failed(t)} | {fmt(t['cpu_s'], ' s')} | {fmt(t['rss_mib'], ' MiB')} | "
              + ("" if eng != eng else fmt(eng, " s")))
        if s:
            ratio = f"{s['seconds'] / t['seconds']:.1f}x faster" if _ok(s) and _ok(t) else ""
            ratio_e = f"{s['seconds'] / eng:.0f}x faster" if _ok(s) and eng == eng and eng > 0 else ""
            if "did not finish" in s.get("error", "") and _ok(t):
                ratio = f"more than {s['seconds'] / t['seconds']:.0f}x faster"
                ratio_e = f"more than {s['seconds'] / eng:.0f}x faster" if eng == eng and eng > 0 else ""
            L.append(f"| `{e['query']}` | {tk} | {e['report']} | {fmt(s['seconds'], ' s')}{_failed(s)} | "
                     f"{fmt(s['cpu_s'], ' s')} | {fmt(s['rss_mib'], ' MiB')} | {ratio} | {ratio_e} |")
        else:
            L.append(f"| `{e['query']}` | {tk} | (none) | | | | | |")
    return L


def render(res: dict, args) -> str:
    L = _head(res) + _conversion(res, args) + _query_rows(res)
    ks = _kineto_list(res)
    if ks:
        L += ["", "## Kineto traces", "",
              "The 2-rank A100 NCCL fixture (rank 0) replicated N times (`benchmarks/make_big_kineto.py`). "
              "HTA parses the whole JSON in memory, so its time and memory grow faster than the trace; "
              "tracekit streams it in chunks, so its memory stays flat.", "",
              "| trace | command | time | CPU | peak RSS | ratio |", "|---|---|---|---|---|---|"]
        for k in ks:
            size = (f"{k['bytes'] / 1e6:,.0f} MB ({k['copies']} copies"
                    + (f"; tracekit wrote {k['rows']:,} rows)" if k.get("rows") else ")"))
            L.append(f"| {size} " + _row("`tracekit convert`", k["convert"], k.get("hta"), "HTA"))
            if "hta" in k:
                L.append(f"| {size} " + _row("HTA (traceinsight) `TraceAnalysis` parse", k["hta"]))
    notes = HERE / "notes.md"
    if notes.exists():
        L += ["", notes.read_text().rstrip()]
    multi = args.work / "results_multi.json"
    if multi.exists():  # benchmarks/multi.py's section, measured in its own run
        from multi import render_section

        L += ["", render_section(json.loads(multi.read_text()))]
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
