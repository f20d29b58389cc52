"""Cost against the number of run folders and of ranks (issue 16), one run, one machine.

    python benchmarks/multi.py [--folders 300] [--ranks 8,64,256,1024] [--out docs/benchmarks.md]

1. *Many folders*: the 2-GPU H100 fixture converted once and copied into N run folders (each its
   own run_id) against the same rows in ONE run folder (the fixture replicated N times by
   benchmarks/make_big_export.py, converted); `tracekit query Q` over each, for kernel_summary,
   gpu_idle, nvtx_gpu_projection, step_summary and nccl. Target: the N folders cost at most 2x the
   one folder.
2. *Many ranks*: jobs of R ranks built from one real rank's Kineto trace with shifted clocks
   (benchmarks/make_rank_job.py): `tracekit convert` of the R traces into one run folder, then
   named queries over it; time, CPU and peak RSS, and the cost per rank.

Results go to WORK/results_multi.json and into the section between the `multi` markers of
docs/benchmarks.md. benchmarks/run.py measures both cases in its own run (its functions
:func:`folders_case`, :func:`ranks_case` and :func:`tables`) for docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import FIXTURE, ROOT, TRACEKIT, fmt, machine, measure  # noqa: E402
from versions import versions_line  # noqa: E402

RANK_FIXTURE = ROOT.parent / "shared" / "fixtures" / "kineto" / "kineto_a100_alexnet.json.gz"
FOLDER_QUERIES = ("kernel_summary", "gpu_idle", "nvtx_gpu_projection", "step_summary", "nccl")
RANK_QUERIES = ("kernel_summary", "gpu_idle", "step_summary")
START, END = "<!-- multi:start -->", "<!-- multi:end -->"


def copy_folders(src: Path, n: int, base: Path) -> list[Path]:
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    out = []
    for i in range(n):
        d = base / f"run{i:04d}"
        shutil.copytree(src, d)
        m = json.loads((d / "manifest.json").read_text())
        m["run_id"] = d.name
        (d / "manifest.json").write_text(json.dumps(m))
        out.append(d)
    return out


def folders_case(args) -> dict:
    from make_big_export import build

    work = args.work
    one_src = work / "fixture_run"
    shutil.rmtree(one_src, ignore_errors=True)
    measure(TRACEKIT + ["convert", str(FIXTURE), "-o", str(one_src)])
    folders = copy_folders(one_src, args.folders, work / "folders")
    export = work / f"h100x{args.folders}.sqlite"
    if not export.exists():
        build(FIXTURE, args.folders, export)
    big = work / f"run_x{args.folders}"  # converted again: the code measured may write it otherwise
    shutil.rmtree(big, ignore_errors=True)
    measure(TRACEKIT + ["convert", str(export), "-o", str(big)])
    res = {"folders": args.folders, "queries": []}
    for q in FOLDER_QUERIES:
        one = measure(TRACEKIT + ["query", q, str(big), "-f", "csv", "-o", os.devnull], timeout=args.timeout)
        many = measure(TRACEKIT + ["query", q, *map(str, folders), "-f", "csv", "-o", os.devnull],
                       timeout=args.timeout)
        res["queries"].append({"query": q, "one": one, "many": many})
        print(q, f"one {one['seconds']:.2f} s, {args.folders} folders {many['seconds']:.2f} s", flush=True)
    shutil.rmtree(work / "folders", ignore_errors=True)
    return res


def ranks_case(args) -> list[dict]:
    from make_rank_job import build

    out = []
    for r in [int(x) for x in args.ranks.split(",") if x]:
        src = args.work / f"ranks{r}"
        shutil.rmtree(src, ignore_errors=True)
        traces = build(RANK_FIXTURE, r, src)
        run = args.work / f"job{r}"
        shutil.rmtree(run, ignore_errors=True)
        entry = {"ranks": r, "input_bytes": sum(p.stat().st_size for p in traces)}
        entry["convert"] = measure(TRACEKIT + ["convert", *map(str, traces), "-o", str(run)],
                                   timeout=args.timeout)
        m = run / "manifest.json"
        if m.exists():
            man = json.loads(m.read_text())
            entry["rows"] = sum(t["rows"] for t in man["tables"].values())
            entry["files"] = sum(len(t.get("files", [1])) for t in man["tables"].values())
            entry["queries"] = {q: measure(TRACEKIT + ["query", q, str(run), "-f", "csv", "-o", os.devnull],
                                           timeout=args.timeout) for q in RANK_QUERIES}
        out.append(entry)
        print("ranks", r, entry["convert"]["seconds"], flush=True)
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)
    return out


def _cell(m: dict) -> str:
    if m.get("rc", 0) != 0:
        return f"failed ({m.get('error', '')})"
    return f"{fmt(m['seconds'], ' s')} | {fmt(m['cpu_s'], ' s')} | {fmt(m['rss_mib'], ' MiB')}"


def _window(res: dict, case: str) -> str:
    w = res.get(f"{case}_measured") or [res["started"], res["finished"]]
    return f"Measured {w[0][:16].replace('T', ' ')} to {w[1][11:16]} UTC."


def render_section(res: dict) -> str:
    """The section between the ``multi`` markers of docs/benchmarks.md (this script run alone)."""
    L = [START, "", "## Many run folders, many ranks", "",
         f"Measured {res['started'][:16].replace('T', ' ')} to {res['finished'][11:16]} UTC by "
         f"`python benchmarks/multi.py` on {res.get('machine', '')}; "
         f"load average {res['load_start'][0]:.1f} at the start, {res['load_end'][0]:.1f} at the end "
         "(2 cores: above 2, wall-clock times are inflated by other work; CPU times much less so). "
         + res.get("versions", "Packages: not recorded."), ""]
    L += tables(res, "###")
    L.append(END)
    return "\n".join(L)


def tables(res: dict, level: str) -> list[str]:
    """The many-folders and many-ranks tables of ``res`` (this script's results, or the ``multi``
    part of benchmarks/run.py's), under headings of ``level`` (``###``)."""
    L = []
    f = res.get("folders")
    if f:
        n = f["folders"]
        L += [f"{level} {n} run folders against one holding the same rows", "",
              _window(res, "folders"), "",
              f"The 2-GPU H100 fixture converted once and copied into {n} run folders, against the fixture "
              f"replicated {n} times in one export (`make_big_export.py`), converted into one run folder. "
              "`tracekit query Q FOLDERS... -f csv`; target: at most 2x the one folder.", "",
              f"| query | one folder: time | CPU | peak RSS | {n} folders: time | CPU | peak RSS "
              "| ratio (time) | ratio (CPU) | within 2x |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for e in f["queries"]:
            one, many = e["one"], e["many"]
            ok = one.get("rc") == 0 and many.get("rc") == 0
            r = many["seconds"] / one["seconds"] if ok else float("nan")
            rc = many["cpu_s"] / one["cpu_s"] if ok and one["cpu_s"] else float("nan")
            L.append(f"| `{e['query']}` | {_cell(one)} | {_cell(many)} | {r:.2f}x | {rc:.2f}x | "
                     f"{'yes' if ok and r <= 2 else '**no**'} |")
        L.append("")
    rk = res.get("ranks")
    if rk:
        L += [f"{level} Jobs of many ranks", "", _window(res, "ranks"), "",
              "One rank's real Kineto trace (the A100 AlexNet step, 79 kernels) replicated R times with "
              "shifted clocks and its own rank and pid (`make_rank_job.py`); `tracekit convert` of the R "
              "traces into one run folder (default `--jobs`: one worker process per core), then "
              "`tracekit query Q JOB -f csv`.", "",
              "| ranks | JSON in | rows written | files | convert: time | CPU | peak RSS | convert per rank | "
              + " | ".join(f"`{q}`" for q in RANK_QUERIES) + " |",
              "|---|---|---|---|---|---|---|---|" + "---|" * len(RANK_QUERIES)]
        for e in rk:
            c = e["convert"]
            per = f"{fmt(c['seconds'] / e['ranks'], ' s')} wall, {fmt(c['cpu_s'] / e['ranks'], ' s')} CPU" \
                if c.get("rc") == 0 else ""
            qs = " | ".join((fmt(m["seconds"], " s") + f" ({fmt(m['rss_mib'], ' MiB')})") if m.get("rc") == 0
                            else "failed" for m in (e.get("queries") or {}).values()) \
                or " | ".join("" for _ in RANK_QUERIES)
            L.append(f"| {e['ranks']:,} | {e['input_bytes'] / 1e6:,.1f} MB | {e.get('rows', 0):,} | "
                     f"{e.get('files', 0):,} | {_cell(c)} | {per} | {qs} |")
        L.append("")
    return L


def splice(page: str, section: str) -> str:
    """``page`` with its multi section replaced by ``section`` (appended when it has none)."""
    if START in page and END in page:
        a, b = page.index(START), page.index(END) + len(END)
        return page[:a] + section + page[b:]
    return page.rstrip("\n") + "\n\n" + section + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folders", type=int, default=300, help="run folders (0: skip that case)")
    ap.add_argument("--ranks", default="8,64,256,1024", help="comma-separated job sizes ('' to skip)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds after which a command is killed")
    ap.add_argument("--work", type=Path, default=HERE / "data")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--render-only", action="store_true", help="rewrite the section from WORK/results_multi.json")
    args = ap.parse_args(argv)
    path = args.work / "results_multi.json"
    if not args.render_only:
        args.work.mkdir(parents=True, exist_ok=True)
        old = json.loads(path.read_text()) if path.exists() else {}
        res = {"started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               "load_start": os.getloadavg(), "machine": machine(),
               "versions": versions_line()}
        if args.folders:
            res["folders"] = folders_case(args)
        if args.ranks:
            res["ranks"] = ranks_case(args)
        for case in ("folders", "ranks"):  # a case skipped this time keeps its last run's figures
            if case not in res and case in old:
                res[case] = old[case]
                res[f"{case}_measured"] = old.get(f"{case}_measured", [old["started"], old["finished"]])
        for case in ("folders", "ranks"):
            res.setdefault(f"{case}_measured", None)
        res["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        res["load_end"] = os.getloadavg()
        for case in ("folders", "ranks"):
            if res[f"{case}_measured"] is None and case in res:
                res[f"{case}_measured"] = [res["started"], res["finished"]]
        path.write_text(json.dumps(res, indent=1))
    res = json.loads(path.read_text())
    args.out.write_text(splice(args.out.read_text() if args.out.exists() else "# Performance\n",
                               render_section(res)))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
