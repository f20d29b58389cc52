"""NVIDIA's `nsys stats` as an independent oracle for tracekit's summary queries.

``run_reports(sqlite, reports, workdir)`` runs ``nsys stats`` once on an export for several
reports (``--format csv:noconv``: raw nanoseconds and bytes, no unit conversion) and returns, per
report, whether it was processed, skipped (nsys says the export lacks the data) or failed (the
report script raised, e.g. on an export schema it does not know), with the CSV rows.

The comparison helpers check tracekit's numbers against the printed ones: counts, totals,
minima and maxima exactly; values nsys rounds to one decimal (averages, medians, standard
deviations, percentages) to within that rounding.
"""

from __future__ import annotations

import csv
import math
import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SUMMARY_REPORTS = ("gpukernsum", "cudaapisum", "nvtxsum", "osrtsum", "gpumemtimesum",
                   "gpumemsizesum", "kernexecsum", "nvtxgpuproj")
# every report the tests compare with (one `nsys stats` call per export: conftest's nsys_stats)
STATS_REPORTS = SUMMARY_REPORTS + ("nvtxkernsum",)

_LINE = re.compile(r"^Processing \[.*\] with \[.*/(\w+)\.py\](?: to \[(.*)\])?\.\.\. ?(.*)$")
_ERROR = re.compile(r"ERROR: Report '(\w+)\.py' (.*)")


@dataclass
class StatsReport:
    name: str
    status: str  # "ok", "skipped" or "failed"
    message: str = ""
    rows: list[dict[str, str]] = field(default_factory=list)


def run_reports(sqlite: Path, reports: tuple[str, ...], workdir: Path,
                timeout: float = 300) -> dict[str, StatsReport]:
    """Run ``nsys stats`` for ``reports`` on ``sqlite``; CSV files are written under ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    base = workdir / "r"
    cmd = ["nsys", "stats", "--report", ",".join(reports), "--format", "csv:noconv",
           "--output", str(base), "--force-overwrite", "true", str(sqlite)]
    proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    errors = {}
    for line in proc.stderr.splitlines():
        m = _ERROR.search(line)
        if m:
            errors[m.group(1)] = m.group(2)
    out: dict[str, StatsReport] = {}
    for line in proc.stdout.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        name, path, tail = m.groups()
        if tail.startswith("PROCESSED"):
            with open(path, newline="", encoding="utf-8", errors="replace") as f:
                rows = list(csv.DictReader(f))
            out[name] = StatsReport(name, "ok", rows=rows)
        elif tail.startswith("SKIPPED"):
            out[name] = StatsReport(name, "skipped", tail.partition(":")[2].strip())
        else:
            out[name] = StatsReport(name, "failed", errors.get(name, tail or proc.stderr.strip()))
    for name in reports:
        if name not in out:
            msg = errors.get(name) or f"no output (exit {proc.returncode}): {proc.stderr.strip()[:300]}"
            out[name] = StatsReport(name, "failed", msg)
    return out


def expect_report(rep: StatsReport, our_rows: list) -> StatsReport | None:
    """``rep`` when nsys processed it; None when nsys skipped it (no such data), after asserting
    that tracekit has no rows either; a pytest skip with nsys's message when nsys failed."""
    if rep.status == "skipped":
        assert our_rows == [], f"nsys stats has no {rep.name} data ({rep.message}) but tracekit has rows"
        return None
    if rep.status == "failed":
        assert rep.rows == []
        pytest.skip(f"nsys stats 2022.4 fails on this export: {rep.message}")
    return rep


# -- comparison -------------------------------------------------------------------------------

def num(text: str) -> float:
    return float(text) if text not in ("", None) else math.nan


def close_rounded(ours: float | None, printed: str, decimals: int = 1, rel: float = 1e-9) -> bool:
    """True when ``ours`` rounds to the printed value: |ours - printed| <= half a unit of the last
    printed decimal (plus a relative float slack for huge values)."""
    p = num(printed)
    if ours is None:
        return math.isnan(p)
    return abs(ours - p) <= 0.5 * 10.0 ** -decimals + 1e-9 + rel * abs(p)


def mismatches(key, ours: dict, theirs: dict[str, str], exact: dict[str, str],
               rounded: dict[str, str], rel: float = 1e-9) -> list[str]:
    """Differences between one tracekit row (``ours``) and one nsys stats row (``theirs``).
    ``exact`` / ``rounded`` map tracekit column -> nsys CSV column."""
    bad = []
    for mine, col in exact.items():
        if ours[mine] is None or int(ours[mine]) != int(num(theirs[col])):
            bad.append(f"{key}: {mine}={ours[mine]} but nsys {col}={theirs[col]}")
    for mine, col in rounded.items():
        if not close_rounded(ours[mine], theirs[col], rel=rel):
            bad.append(f"{key}: {mine}={ours[mine]} but nsys {col}={theirs[col]}")
    return bad


def merge_groups(rows: list[dict[str, str]], key: str, count: str, total: str = "Total Time (ns)"):
    """nsys rows grouped by ``key`` (e.g. gpukernsum's per grid/block rows per kernel name):
    {key: {"rows": [...], count, total, min, max, pct}} with the exactly combinable fields summed."""
    groups: dict[str, dict] = defaultdict(lambda: {"rows": []})
    for r in rows:
        groups[r[key]]["rows"].append(r)
    for g in groups.values():
        rs = g["rows"]
        g["count"] = sum(int(r[count]) for r in rs)
        g["total"] = sum(int(r[total]) for r in rs)
        g["min"] = min(int(r["Min (ns)"]) for r in rs)
        g["max"] = max(int(r["Max (ns)"]) for r in rs)
        g["pct"] = sum(num(r["Time (%)"]) for r in rs)
    return groups
