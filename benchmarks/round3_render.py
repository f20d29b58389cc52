"""The ``round3`` section of docs/performance.md from benchmarks/round3.py's and
benchmarks/startup.py's JSON (issue 39): every figure a ratio between commands of one run."""

from __future__ import annotations

import re
from pathlib import Path

START, END = "<!-- round3:start -->", "<!-- round3:end -->"


def _s(x: float) -> str:
    return f"{x:,.2f} s" if x < 100 else f"{x:,.0f} s"


def _m(m: dict) -> str:
    failed = "" if m.get("rc", 0) == 0 else f" (failed: {m.get('error', '')})"
    return f"{_s(m['seconds'])}{failed} | {_s(m['cpu_s'])} | {m['rss_mib']:,.0f} MiB"


def _load(res: dict) -> str:
    return (f"load average {res['load_start'][0]:.1f} at the start, {res['load_end'][0]:.1f} at "
            "the end (2 cores: wall-clock times are inflated by other work, CPU times much less)")


def targets(res: dict, startup: dict | None) -> list[tuple[str, str, str]]:
    out = []
    conv, scan = res.get("convert"), res["sqlite_scan"]
    if conv:
        r = conv["seconds"] / scan["seconds"]
        out.append(("conversion within 2x of SQLite's own scan (every value tracekit reads)",
                    f"{r:.2f}x", "yes" if r <= 2 else "**no**"))
        out.append(("conversion peak RSS < 1 GB (1,024 MiB)", f"{conv['rss_mib']:,.0f} MiB",
                    "yes" if conv["rss_mib"] < 1024 else "**no**"))
    for e in res.get("queries", []):
        r = e["nsys_stats"]["seconds"] / e["tracekit"]["seconds"]
        out.append((f"`{e['query']}` >= 10x faster than `nsys stats --report {e['report']}` "
                    "(process start included)", f"{r:.1f}x", "yes" if r >= 10 else "**no**"))
    for key, what in (("whatif", "`tracekit whatif BIG -s baseline -s launch=0`"),
                      ("critical_path_summary", "`tracekit query critical_path_summary BIG`")):
        if conv and key in res:
            m = res[key]
            r = m["seconds"] / conv["seconds"]
            ok = m.get("rc", 0) == 0 and r <= 2
            out.append((f"{what} within 2x of the conversion", f"{r:.2f}x" + ("" if m.get("rc", 0) == 0
                        else " (failed)"), "yes" if ok else "**no**"))
    for p in (startup or {}).get("pairs", []):
        if "pyarrow" in p["baseline"]:
            continue
        out.append((f"{p['command']} within 1.5x of `{p['baseline']}`", f"{p['ratio']:.2f}x "
                    f"({p['cpu_ratio']:.2f}x in CPU time)", "yes" if p["ratio"] <= 1.5 else "**no**"))
    return out


def section(res: dict, startup: dict | None) -> str:
    L = [START, "", "## Round 3 (issue 39): start-up, queries against `nsys stats`, what-if at export size", "",
         f"Measured {res['started'][:16].replace('T', ' ')} to {res['finished'][11:16]} UTC by "
         f"`python benchmarks/round3.py` on the 596 MB export (300 copies); {_load(res)}. "
         + res.get("versions", ""), "",
         "| target | measured | met |", "|---|---|---|"]
    L += [f"| {a} | {b} | {c} |" for a, b, c in targets(res, startup)]
    scan = res["sqlite_scan"]
    L += ["", "| command | time | CPU | peak RSS | ratio |", "|---|---|---|---|---|",
          f"| SQLite scans every event row, decoding every value tracekit reads (max() of each) | "
          f"{_s(scan['seconds'])} | | | floor |"]
    conv = res.get("convert")
    if conv:
        L.append(f"| `tracekit convert` | {_m(conv)} | {conv['seconds'] / scan['seconds']:.2f}x the floor |")
    for e in res.get("queries", []):
        t, n = e["tracekit"], e["nsys_stats"]
        L.append(f"| `tracekit query {e['query']}` (median of {len(t['runs'])}) | {_m(t)} | "
                 f"{n['seconds'] / t['seconds']:.1f}x faster than {e['report']} |")
        L.append(f"| `nsys stats --report {e['report']}` (median of {len(n['runs'])}) | {_m(n)} | |")
    for key, what in (("whatif", "`tracekit whatif BIG -s baseline -s launch=0`"),
                      ("critical_path_summary", "`tracekit query critical_path_summary BIG`")):
        if key in res and conv:
            m = res[key]
            L.append(f"| {what} | {_m(m)} | {m['seconds'] / conv['seconds']:.2f}x the conversion's time, "
                     f"{m['rss_mib'] / conv['rss_mib']:.2f}x its peak RSS |")
    if startup:
        L += ["", f"Start-up (`python benchmarks/startup.py`, {_load(startup)}; each pair alternating, "
              f"median of {len(startup['pairs'][0]['runs'])}):", "",
              "| command | time | CPU | baseline | time | CPU | ratio (time) | ratio (CPU) |",
              "|---|---|---|---|---|---|---|---|"]
        for p in startup["pairs"]:
            L.append(f"| `{p['command']}` | {_s(p['median_s'])} | {_s(p['median_cpu_s'])} | `{p['baseline']}` | "
                     f"{_s(p['baseline_median_s'])} | {_s(p['baseline_median_cpu_s'])} | {p['ratio']:.2f}x | "
                     f"{p['cpu_ratio']:.2f}x |")
    notes = Path(__file__).with_name("notes_round3.md")
    if notes.exists():
        L += ["", notes.read_text().rstrip()]
    L += ["", END]
    return "\n".join(L) + "\n"


def write_section(out: Path, res: dict, startup: dict | None) -> None:
    """Replace the ``round3`` section of ``out`` (or add it after the targets of run.py's page)."""
    text = out.read_text()
    new = section(res, startup)
    pat = re.compile(re.escape(START) + r".*?" + re.escape(END) + r"\n?", re.S)
    if pat.search(text):
        text = pat.sub(lambda _m: new, text)
    else:
        anchor = "\n## Input: "
        i = text.find(anchor)
        text = text[:i] + "\n" + new + text[i:] if i >= 0 else text.rstrip("\n") + "\n\n" + new
    out.write_text(text)
