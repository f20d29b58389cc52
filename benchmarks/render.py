"""docs/performance.md from the results of one run of benchmarks/run.py (WORK/results.json).

Every figure on the page comes from that run and every ratio is between two commands measured in
it; the prose of benchmarks/notes.md follows the tables (edit it, then ``run.py --render-only``).
What earlier rounds measured for each change is in docs/performance-history.md, other scripts'
benchmarks in docs/benchmarks.md: neither is written here.
"""

from __future__ import annotations

from pathlib import Path

from common import HERE, fmt, machine
from multi import tables as multi_tables


def _failed(m: dict) -> str:
    if m.get("rc", 0) != 0:
        return f" (failed: {m.get('error', '')})"
    if m.get("left_out"):
        return f" ({m['left_out']} of {len(m['runs'])} runs failed and left out: {m.get('error', '')})"
    return ""


def _ok(m: dict | None) -> bool:
    return bool(m) and m.get("rc") == 0


def _yes(met: bool | None) -> str:
    return "yes" if met else "**no**"


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


def _query(res: dict, name: str) -> dict | None:
    return next((e for e in res.get("queries", []) if e["query"] == name), None)


def _conversion_targets(res: dict) -> list[tuple[str, str, bool]]:
    out = []
    conv, ai, scan = res["convert"], res.get("nsys_ai"), res["sqlite_scan"]
    if _ok(conv) and _ok(ai):
        r = ai["seconds"] / conv["seconds"]
        out.append(("conversion >= 3x faster than nsys-ai's cache build", f"{r:.1f}x", r >= 3))
    if _ok(conv):
        r = conv["seconds"] / scan["seconds"]
        out.append(("conversion within 2x of SQLite's own scan (every value tracekit reads)", f"{r:.2f}x", r <= 2))
        out.append(("conversion peak RSS < 1 GB (1,024 MiB)", fmt(conv["rss_mib"], " MiB"), conv["rss_mib"] < 1024))
    big = res.get("big")
    if big:
        c = big["convert"]
        out.append((f"peak RSS < 1.5 GB (1,536 MiB) converting a {big['bytes'] / 1e9:.1f} GB export",
                    fmt(c["rss_mib"], " MiB") + _failed(c), _ok(c) and c["rss_mib"] < 1536))
    return out


def _query_targets(res: dict) -> list[tuple[str, str, bool]]:
    out = []
    for q in ("kernel_summary", "nvtx_summary"):
        e = _query(res, q)
        if e and _ok(e["tracekit"]) and _ok(e.get("nsys_stats")):
            r = e["nsys_stats"]["seconds"] / e["tracekit"]["seconds"]
            out.append((f"`{q}` >= 10x faster than `nsys stats --report {e['report']}` (process start "
                        "included)", f"{r:.1f}x", r >= 10))
    for p in res.get("startup", {}).get("pairs", []):
        if "pyarrow" in p["baseline"]:
            continue
        out.append((f"`{p['command']}` within 1.5x of `{p['baseline']}`",
                    f"{p['ratio']:.2f}x ({p['cpu_ratio']:.2f}x in CPU time)", p["ratio"] <= 1.5))
    conv = res["convert"]
    for key, what in (("whatif", "`tracekit whatif BIG -s baseline -s launch=0`"),
                      ("critical_path_summary", "`tracekit query critical_path_summary BIG`")):
        m = res.get(key)
        if m and _ok(conv):
            r = m["seconds"] / conv["seconds"]
            out.append((f"{what} within 2x of the conversion's time", f"{r:.2f}x" + _failed(m), _ok(m) and r <= 2))
    f = res.get("multi", {}).get("folders")
    if f:
        for e in f["queries"]:
            one, many = e["one"], e["many"]
            r = many["seconds"] / one["seconds"] if _ok(one) and _ok(many) else float("nan")
            out.append((f"`{e['query']}` over {f['folders']} run folders within 2x of one folder of the "
                        "same rows", f"{r:.2f}x", r <= 2))
    return out


def targets(res: dict) -> list[tuple[str, str, bool]]:
    """(target, measured, met) for every target of issues 8 and 39 this run measured."""
    out = _conversion_targets(res) + _query_targets(res)
    for k in _kineto_list(res):
        if _ok(k["convert"]) and _ok(k.get("hta")):
            size = f"{k['bytes'] / 1e6:,.0f} MB trace"
            r = k["hta"]["seconds"] / k["convert"]["seconds"]
            out.append((f"Kineto conversion >= 3x faster than HTA ({size})", f"{r:.1f}x", r >= 3))
            m = k["convert"]["rss_mib"] / k["hta"]["rss_mib"]
            out.append((f"Kineto conversion peak RSS <= 1/3 of HTA's ({size})", f"{m:.2f} of HTA's", m <= 1 / 3))
    return out


def _head(res: dict) -> list[str]:
    """The page's title, machine, load and targets table."""
    load = res["load_start"]
    L = [
        "# Performance",
        "",
        "<!-- Written by `python benchmarks/run.py`; rerun it to refresh every figure. -->",
        "",
        f"Measured {res['started'][:16].replace('T', ' ')} to {res['finished'][11:16]} UTC on "
        f"{res.get('machine') or machine()}.",
        res.get("versions", "Packages: not recorded (a run before benchmarks/versions.py)."),
        f"Load average when the run started: {load[0]:.1f} (1 min), {load[1]:.1f} (5 min); at its end "
        f"{res['load_end'][0]:.1f}. A load above the core count means other processes shared the cores "
        "and wall-clock times are inflated (CPU times much less so).",
        "",
        "All figures come from one run of `benchmarks/run.py` on this machine; ratios are between "
        "commands measured in that run. *time* is the wall-clock time of the whole command (process start "
        "included), *CPU* its user + system time (all threads and child processes), *peak RSS* the "
        "largest resident set size of the process (`os.wait4`). tracekit's modules are byte-compiled "
        "first, as `pip install` does. Earlier rounds' profiles and before/after comparisons of each "
        "change: docs/performance-history.md; other benchmarks: docs/benchmarks.md.",
        "",
        "Rerun: `bash benchmarks/setup_baselines.sh` (once: nsys-ai, HTA and py-spy in their own "
        "virtual environments), then `python benchmarks/run.py --big-copies 2500` (about 15 minutes "
        "here; the 5 GB export is built and deleted again).",
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    L += [f"| {name} | {got} | {_yes(met)} |" for name, got, met in targets(res)]
    return L


def _conversion(res: dict) -> list[str]:
    """The input and the conversion section."""
    rows = res["rows"]
    L = [
        "",
        f"## Input: the 2-GPU H100 fixture export replicated {res.get('copies', 300)} times",
        "",
        f"{res['export_bytes'] / 1e6:,.0f} MB; " + ", ".join(f"{t} {n:,}" for t, n in rows.items() if n) + ".",
        "Built by `benchmarks/make_big_export.py` (timestamps, correlation IDs and NVTX range IDs shifted per copy).",
        "",
        "## Conversion",
        "",
        *([f"SQLite's scan, the ADBC read, `tracekit convert` and nsys-ai's build alternate {n} times "
           "(median time and CPU, largest peak RSS); the others run once.", ""]
          if (n := len(res["convert"].get("runs", []))) > 1 else []),
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
    if res.get("nsys_ai_incomplete"):
        bad = res["nsys_ai_incomplete"]
        L += ["", f"nsys-ai published an incomplete cache in {len(bad)} further build(s) "
              f"({', '.join(fmt(m['seconds'], ' s') for m in bad)}; {bad[0]['error'] or 'exit 3'}): "
              "not counted, built again (`benchmarks/nsys_ai_build.py` checks the cache's tables)."]
    if conv.get("rc") == 0:
        L += ["", f"`tracekit convert` wrote {res['converted_rows']:,} rows: "
              f"{res['converted_rows'] / conv['seconds']:,.0f} rows/s; "
              f"{conv['seconds'] / res['sqlite_scan']['seconds']:.2f}x SQLite's own scan, "
              f"{conv['seconds'] / res['adbc_scan']['seconds']:.2f}x the ADBC read of the same columns, "
              f"{conv['seconds'] / res['cat']['seconds']:.1f}x reading the file once."]
    L += _profile(res)
    if "big" in res:
        b = res["big"]
        c = b["convert"]
        rows_b = b.get("rows", {})
        L += ["", f"### A {b['bytes'] / 1e9:.1f} GB export ({b['copies']} copies)", "",
              f"`tracekit convert`: {fmt(c['seconds'], ' s')} wall, {fmt(c['cpu_s'], ' s')} CPU, peak RSS "
              f"{fmt(c['rss_mib'], ' MiB')}{_failed(c)}"
              + (f"; {rows_b.get('kernels', 0):,} kernels, {rows_b.get('cuda_api', 0):,} runtime calls, "
                 f"{rows_b.get('nvtx_ranges', 0):,} NVTX ranges" if rows_b else "")
              + (f"; {c['seconds'] / conv['seconds']:.1f}x the time and {c['rss_mib'] / conv['rss_mib']:.2f}x "
                 f"the peak RSS of the {res['export_bytes'] / 1e6:,.0f} MB export's conversion."
                 if _ok(c) and _ok(conv) else ".")]
    return L


def _profile(res: dict) -> list[str]:
    """Where the conversion's CPU time goes (benchmarks/convert_profile.py), when measured."""
    p = res.get("profile")
    if not p:
        return []
    busy = p["samples"] - p["waiting_samples"]
    L = ["", "### Where the conversion's CPU time goes", "",
         "`benchmarks/convert_profile.py`: `py-spy record --threads` of the same `tracekit convert` "
         f"(a separate run, {fmt(p['wall_s'], ' s')} under the sampler), each sample given to the phase "
         f"of its innermost recognised frame; shares of the {busy:,} samples of busy threads "
         f"({p['waiting_samples']:,} samples of threads waiting for work left out).", "",
         "| phase | share of the CPU samples |", "|---|---|"]
    L += [f"| {phase} | {share:.1%} |" for phase, share in p["shares"].items()]
    return L


def _query_rows(res: dict) -> list[str]:
    """The queries against nsys stats section."""
    L = ["", "## Queries against `nsys stats` on the same data", "",
         "`tracekit query NAME RUN -f csv` on the converted run folder; `nsys stats --report R --format csv` "
         "on the SQLite export. The two queries with a target alternate with their report "
         f"{res.get('repeat', 1)} times (median time and CPU, largest peak RSS); the others run once.", "",
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


def _startup(res: dict) -> list[str]:
    st = res.get("startup")
    if not st:
        return []
    L = ["", "## Start-up", "",
         "A command and what it must import, alternating in one loop (`benchmarks/startup.py`), "
         f"median of {len(st['pairs'][0]['runs'])}; the small run folder is the 3-kernel CUDA graph "
         f"fixture, converted. Load average {st['load_start'][0]:.1f} at the start, "
         f"{st['load_end'][0]:.1f} at the end.", "",
         "| command | time | CPU | baseline | time | CPU | ratio (time) | ratio (CPU) |",
         "|---|---|---|---|---|---|---|---|"]
    for p in st["pairs"]:
        L.append(f"| `{p['command']}` | {fmt(p['median_s'], ' s')} | {fmt(p['median_cpu_s'], ' s')} | "
                 f"`{p['baseline']}` | {fmt(p['baseline_median_s'], ' s')} | "
                 f"{fmt(p['baseline_median_cpu_s'], ' s')} | {p['ratio']:.2f}x | {p['cpu_ratio']:.2f}x |")
    return L


def _whatif(res: dict) -> list[str]:
    conv = res["convert"]
    rows = [(k, w) for k, w in (("whatif", "`tracekit whatif BIG -s baseline -s launch=0 -f csv`"),
                                ("critical_path_summary", "`tracekit query critical_path_summary BIG -f csv`"))
            if k in res]
    if not rows or not _ok(conv):
        return []
    L = ["", "## What-if and critical path at export size", "",
         "On the run folder the conversion above wrote (BIG), against that conversion.", "",
         "| command | time | CPU | peak RSS | against the conversion |", "|---|---|---|---|---|"]
    for key, what in rows:
        m = res[key]
        L.append(f"| {what}{_failed(m)} | {fmt(m['seconds'], ' s')} | {fmt(m['cpu_s'], ' s')} | "
                 f"{fmt(m['rss_mib'], ' MiB')} | {m['seconds'] / conv['seconds']:.2f}x its time, "
                 f"{m['rss_mib'] / conv['rss_mib']:.2f}x its peak RSS |")
    return L


def _kineto(res: dict) -> list[str]:
    ks = _kineto_list(res)
    if not ks:
        return []
    L = ["", "## Kineto traces", "",
         "The 2-rank A100 NCCL fixture (rank 0) replicated N times (`benchmarks/make_big_kineto.py`). "
         "HTA parses the whole JSON in memory, so its time and memory grow faster than the trace; "
         "tracekit streams it in chunks, so its memory stays flat.", "",
         "| trace | command | time | CPU | peak RSS | ratio |", "|---|---|---|---|---|---|"]
    for k in ks:
        size = (f"{k['bytes'] / 1e6:,.0f} MB ({k['copies']} cop{'y' if k['copies'] == 1 else 'ies'}"
                + (f"; tracekit wrote {k['rows']:,} rows)" if k.get("rows") else ")"))
        L.append(f"| {size} " + _row("`tracekit convert`", k["convert"], k.get("hta"), "HTA"))
        if "hta" in k:
            L.append(f"| {size} " + _row("HTA (traceinsight) `TraceAnalysis` parse", k["hta"]))
    return L


def render(res: dict) -> str:
    """The whole page."""
    L = _head(res) + _conversion(res) + _query_rows(res) + _startup(res) + _whatif(res)
    multi = res.get("multi")
    if multi:
        L += ["", "## Many run folders, many ranks", ""] + multi_tables(multi, "###")
    L += _kineto(res)
    notes = HERE / "notes.md"
    if notes.exists():
        L += ["", notes.read_text().rstrip()]
    return "\n".join(L).rstrip("\n") + "\n"


def write_page(out: Path, res: dict) -> None:
    out.write_text(render(res))
