"""tracekit's conversion and query benchmark, against what users would run instead.

    python benchmarks/run.py [--copies 300] [--big-copies 0] [--out docs/performance.md]

One run, one machine, every figure measured here:

1. builds the large export by replicating a real fixture (benchmarks/make_big_export.py);
2. floors: reading the file once (`cat` to /dev/null, warm cache) and SQLite itself scanning every
   event row (max() of the end column of each event table);
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
import platform
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURE = ROOT.parent / "shared" / "fixtures" / "nsys" / "nsys2026_h100_2gpu_pytorch_slice.sqlite"
KINETO_FIXTURE = ROOT.parent / "shared" / "fixtures" / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"
EVENT_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS",
                "OSRT_API", "SCHED_EVENTS")
TRACEKIT = [sys.executable, "-m", "tracekit"]

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


def measure(cmd: list[str], **kw) -> dict:
    """Run ``cmd``; return wall seconds, peak RSS (MiB) and exit status."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace").strip().splitlines()
    proc.stderr.close()
    rc = os.waitstatus_to_exitcode(status)
    return {"cmd": " ".join(cmd), "seconds": wall, "rss_mib": usage.ru_maxrss / 1024, "rc": rc,
            "error": err[-1] if rc and err else ""}


def sqlite_scan(path: Path) -> dict:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    t0 = time.perf_counter()
    rows = 0
    for t in EVENT_TABLES:
        if t in tables:
            col = "start"
            n, _ = con.execute(f'SELECT count(*), max("{col}") FROM "{t}"').fetchone()
            rows += n
    return {"seconds": time.perf_counter() - t0, "rows": rows}


def cat_floor(path: Path) -> dict:
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    return measure(["cat", str(path)])


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def fmt(x: float, unit: str = "") -> str:
    return f"{x:,.2f}{unit}" if x < 100 else f"{x:,.0f}{unit}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=300)
    ap.add_argument("--big-copies", type=int, default=0, help="also convert an export this many copies large (RSS check)")
    ap.add_argument("--work", type=Path, default=HERE / "data")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    ap.add_argument("--skip-baselines", action="store_true")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    from make_big_export import build

    export = args.work / f"h100x{args.copies}.sqlite"
    if not export.exists():
        info = build(FIXTURE, args.copies, export)
    else:
        con = sqlite3.connect(export)
        info = {"rows": {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                         for t in EVENT_TABLES
                         if con.execute("SELECT 1 FROM sqlite_master WHERE name=?", (t,)).fetchone()},
                "bytes": export.stat().st_size}
    res: dict = {"export": str(export), "export_bytes": export.stat().st_size, "rows": info["rows"]}
    print(f"export {export} ({res['export_bytes'] / 1e6:.0f} MB)", flush=True)

    res["cat"] = cat_floor(export)
    res["sqlite_scan"] = sqlite_scan(export)
    run_dir = args.work / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    res["convert"] = measure(TRACEKIT + ["convert", str(export), "-o", str(run_dir), "--force"])
    print("convert", res["convert"], flush=True)
    manifest = json.loads((run_dir / "manifest.json").read_text()) if (run_dir / "manifest.json").exists() else {}
    res["converted_rows"] = sum(t["rows"] for t in manifest.get("tables", {}).values())

    nsys_ai_py = HERE / ".venv-nsys-ai" / "bin" / "python"
    if not args.skip_baselines and nsys_ai_py.exists():
        res["nsys_ai"] = measure([str(nsys_ai_py), str(HERE / "nsys_ai_build.py"), str(export)])
        shutil.rmtree(export.with_suffix(".nsys-cache"), ignore_errors=True)
        print("nsys-ai", res["nsys_ai"], flush=True)

    res["queries"] = []
    for q, report in QUERIES:
        entry = {"query": q, "tracekit": measure(TRACEKIT + ["query", q, str(run_dir), "-f", "csv", "-o", os.devnull])}
        if report and shutil.which("nsys") and not args.skip_baselines:
            entry["nsys_stats"] = measure(["nsys", "stats", "-q", "--report", report, "--format", "csv",
                                           "--output", "-", str(export)])
            entry["report"] = report
        res["queries"].append(entry)
        print(entry, flush=True)

    if args.big_copies:
        big = args.work / f"h100x{args.big_copies}.sqlite"
        if not big.exists():
            build(FIXTURE, args.big_copies, big)
        big_run = args.work / "run_big"
        shutil.rmtree(big_run, ignore_errors=True)
        res["big"] = {"bytes": big.stat().st_size,
                      "convert": measure(TRACEKIT + ["convert", str(big), "-o", str(big_run), "--force"])}
        shutil.rmtree(big_run, ignore_errors=True)
        print("big", res["big"], flush=True)

    res["kineto"] = kineto_bench(args)
    (args.work / "results.json").write_text(json.dumps(res, indent=1))
    args.out.write_text(render(res, args))
    print(f"wrote {args.out}")
    return 0


def kineto_bench(args) -> dict | None:
    try:
        from make_big_kineto import build as build_kineto
    except ImportError:
        return None
    trace = args.work / "kineto_big.json"
    if not trace.exists():
        build_kineto(KINETO_FIXTURE, 100, trace)
    out = {"bytes": trace.stat().st_size}
    run_dir = args.work / "run_kineto"
    shutil.rmtree(run_dir, ignore_errors=True)
    out["convert"] = measure(TRACEKIT + ["convert", str(trace), "-o", str(run_dir), "--force"])
    hta_py = HERE / ".venv-hta" / "bin" / "python"
    if hta_py.exists() and not args.skip_baselines:
        out["hta"] = measure([str(hta_py), str(HERE / "hta_parse.py"), str(trace)])
    print("kineto", out, flush=True)
    return out


def _row(name, m, base=None, base_name=""):
    ratio = ""
    if base and m.get("rc") == 0 and base.get("rc", 0) == 0:
        ratio = f"{base['seconds'] / m['seconds']:.1f}x faster than {base_name}" if base["seconds"] >= m["seconds"] \
            else f"{m['seconds'] / base['seconds']:.2f}x the time of {base_name}"
    status = "" if m.get("rc", 0) == 0 else f" (failed: {m.get('error', '')})"
    rss = fmt(m["rss_mib"], " MiB") if "rss_mib" in m else ""
    return f"| {name}{status} | {fmt(m['seconds'], ' s')} | {rss} | {ratio} |"


def render(res: dict, args) -> str:
    rows = res["rows"]
    L = [
        "# Performance",
        "",
        "<!-- Written by `python benchmarks/run.py`; rerun it to refresh every figure. -->",
        "",
        f"Measured {dt.date.today().isoformat()} on {machine()}.",
        "All figures of one table come from one run of `benchmarks/run.py` on this machine; ratios are "
        "between commands measured in that run. Time is wall-clock of the whole command (process "
        "start included); memory is the peak resident set size of that process.",
        "",
        f"## Input: the 2-GPU H100 fixture export replicated {args.copies} times",
        "",
        f"{res['export_bytes'] / 1e6:,.0f} MB; " + ", ".join(f"{t} {n:,}" for t, n in rows.items() if n) + ".",
        "Built by `benchmarks/make_big_export.py` (timestamps, correlation IDs and NVTX range IDs shifted per copy).",
        "",
        "## Conversion",
        "",
        "| command | time | peak RSS | ratio |",
        "|---|---|---|---|",
        f"| read the file once (`cat` > /dev/null, warm cache) | {fmt(res['cat']['seconds'], ' s')} | | floor |",
        f"| SQLite scans every event row ({res['sqlite_scan']['rows']:,} rows) | {fmt(res['sqlite_scan']['seconds'], ' s')} | | floor |",
    ]
    conv = res["convert"]
    L.append(_row("`tracekit convert`", conv, res.get("nsys_ai"), "nsys-ai"))
    if "nsys_ai" in res:
        L.append(_row("nsys-ai 0.3.0 Parquet cache + NVTX kernel map", res["nsys_ai"]))
    if conv.get("rc") == 0:
        L += ["", f"`tracekit convert` wrote {res['converted_rows']:,} rows: "
              f"{res['converted_rows'] / conv['seconds']:,.0f} rows/s; "
              f"{conv['seconds'] / res['sqlite_scan']['seconds']:.2f}x SQLite's own scan, "
              f"{conv['seconds'] / res['cat']['seconds']:.1f}x reading the file once."]
    if "big" in res:
        b = res["big"]
        L += ["", f"Converting a {b['bytes'] / 1e9:.1f} GB export ({args.big_copies} copies): "
              f"{fmt(b['convert']['seconds'], ' s')}, peak RSS {fmt(b['convert']['rss_mib'], ' MiB')}."]
    L += ["", "## Queries against `nsys stats` on the same data", "",
          "`tracekit query NAME RUN` on the converted run folder; `nsys stats --report R` on the SQLite export.", "",
          "| query | tracekit | peak RSS | nsys stats report | nsys stats | peak RSS | ratio |",
          "|---|---|---|---|---|---|---|"]
    for e in res["queries"]:
        t = e["tracekit"]
        s = e.get("nsys_stats")
        tk = fmt(t["seconds"], " s") + ("" if t["rc"] == 0 else f" (failed: {t['error']})")
        if s:
            ok = s["rc"] == 0 and t["rc"] == 0
            ratio = f"{s['seconds'] / t['seconds']:.1f}x faster" if ok else ""
            ns = fmt(s["seconds"], " s") + ("" if s["rc"] == 0 else f" (failed: {s['error']})")
            L.append(f"| `{e['query']}` | {tk} | {fmt(t['rss_mib'], ' MiB')} | {e['report']} | {ns} | "
                     f"{fmt(s['rss_mib'], ' MiB')} | {ratio} |")
        else:
            L.append(f"| `{e['query']}` | {tk} | {fmt(t['rss_mib'], ' MiB')} | (none) | | | |")
    k = res.get("kineto")
    if k:
        L += ["", "## Kineto trace", "", f"{k['bytes'] / 1e6:,.0f} MB of JSON (`benchmarks/make_big_kineto.py`).", "",
              "| command | time | peak RSS | ratio |", "|---|---|---|---|"]
        L.append(_row("`tracekit convert`", k["convert"], k.get("hta"), "HTA"))
        if "hta" in k:
            L.append(_row("HTA (traceinsight) TraceAnalysis parse", k["hta"]))
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
