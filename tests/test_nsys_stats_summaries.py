"""The summaries nsys stats users expect (issue 28), checked against `nsys stats` (2022.4) on
every shared nsys export: nvtx_kernel_summary = nvtxkernsum, kernel_summary -p by=grid =
gpukernsum row for row (grid and block), nvtx_gpu_projection -p by=name = nvtxgpuproj's rows
summed per range name.

Counts, totals, minima and maxima equal; averages, medians and standard deviations, printed
rounded to 0.1, round to the printed value. A report nsys skips (no such data) must be empty
here too; one nsys fails on is asserted failed and skipped with its message.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from conftest import FIXTURES, NSYS_FIXTURES, requires_nsys
from nsys_oracle import close_rounded, run_reports

from tracekit.query.engine import Engine

pytestmark = [requires_nsys, pytest.mark.nsys]

STEMS = [p.stem for p in NSYS_FIXTURES]
REPORTS = ("gpukernsum", "nvtxkernsum", "nvtxgpuproj")
STYLE = {"push/pop": "PushPop", "start/end": "StartEnd", None: "None"}


@pytest.fixture(scope="session")
def stats(tmp_path_factory):
    base = tmp_path_factory.mktemp("nsys_stats_summaries")
    cache = {}

    def get(stem: str, report: str):
        if stem not in cache:
            cache[stem] = run_reports(FIXTURES / "nsys" / f"{stem}.sqlite", REPORTS, base / stem)
        return cache[stem][report]

    return get


def _run(nsys_run, stem, query, params=None):
    with Engine([nsys_run(stem)]) as eng:
        return eng.query(query, params).to_pylist()


def _report(stats, stem, report, mine):
    rep = stats(stem, report)
    if rep.status == "skipped":
        assert mine == [], f"nsys stats has no {report} data ({rep.message}) but tracekit has rows"
        return None
    if rep.status == "failed":
        assert rep.rows == []
        pytest.skip(f"nsys stats 2022.4 fails on this export: {rep.message}")
    return rep


def _stats_bad(key, r, t, count_col):
    bad = []
    exact = {"total_ns": "Total Time (ns)", "min_ns": "Min (ns)", "max_ns": "Max (ns)"}
    for mine, col in exact.items():
        if r[mine] != int(t[col]):
            bad.append(f"{key}: {mine}={r[mine]} but nsys {col}={t[col]}")
    if r["instances"] != int(t[count_col]):
        bad.append(f"{key}: instances={r['instances']} but nsys {count_col}={t[count_col]}")
    for mine, col in {"avg_ns": "Avg (ns)", "med_ns": "Med (ns)", "stddev_ns": "StdDev (ns)"}.items():
        if not close_rounded(r[mine], t[col]):
            bad.append(f"{key}: {mine}={r[mine]} but nsys {col}={t[col]}")
    return bad


def _dims(text: str) -> str:
    return "x".join(text.split())


@pytest.mark.parametrize("stem", STEMS)
def test_kernel_summary_by_grid_equals_gpukernsum(stats, nsys_run, stem):
    mine = _run(nsys_run, stem, "kernel_summary", {"by": "grid"})
    rep = _report(stats, stem, "gpukernsum", mine)
    if rep is None:
        return
    theirs = {(t["Name"], _dims(t["GridXYZ"]), _dims(t["BlockXYZ"])): t for t in rep.rows}
    ours = {(r["name"], r["grid"], r["block"]): r for r in mine}
    assert set(ours) == set(theirs)
    assert len(mine) == len(rep.rows)  # one row per (name, grid, block), as nsys
    bad = []
    for key, t in theirs.items():
        bad += _stats_bad(key, ours[key], t, "Instances")
        if not close_rounded(ours[key]["time_pct"], t["Time (%)"]):
            bad.append(f"{key}: time_pct={ours[key]['time_pct']} but nsys {t['Time (%)']}")
    assert not bad, "\n".join(bad[:20])


def test_jacobi_grids_split_as_nsys(nsys_run):
    """The 2xV100 Jacobi solver launches its kernel with two grids: two rows by grid, one by name."""
    stem = "nsys2020.5_2xv100_p2p_nvlink"
    rows = [(r["name"][:13], r["grid"], r["block"], r["instances"], r["total_ns"])
            for r in _run(nsys_run, stem, "kernel_summary", {"by": "grid"})]
    assert rows[:2] == [("jacobi_kernel", "512x512x1", "32x32x1", 1000, 4651646617),
                        ("jacobi_kernel", "512x256x1", "32x32x1", 2000, 4642364999)]
    by_name = _run(nsys_run, stem, "kernel_summary")
    assert (by_name[0]["instances"], by_name[0]["total_ns"], by_name[0]["grid"]) == (3000, 9294011616, None)


def _range_tag(r) -> str:
    if r["range_name"] is None:
        return "None"
    return r["range_name"]


@pytest.mark.parametrize("stem", STEMS)
def test_nvtx_kernel_summary_equals_nvtxkernsum(stats, nsys_run, stem):
    mine = _run(nsys_run, stem, "nvtx_kernel_summary")
    rep = _report(stats, stem, "nvtxkernsum", mine)
    if rep is None:
        return
    def num_or_none(v):
        return None if v in ("None", "") else int(v)
    theirs = {(t["NVTX Range"], t["Style"], num_or_none(t["PID"]), num_or_none(t["TID"]),
               t["Kernel Name"]): t for t in rep.rows}
    ours = {(_range_tag(r), STYLE[r["style"]], r["pid"], r["tid"], r["kernel_name"]): r for r in mine}
    only_ours, only_theirs = set(ours) - set(theirs), set(theirs) - set(ours)
    assert not only_ours and not only_theirs, (sorted(only_ours)[:3], sorted(only_theirs)[:3])
    bad = []
    for key, t in theirs.items():
        bad += _stats_bad(key, ours[key], t, "Kern Inst")
        if ours[key]["ranges"] != int(t["NVTX Inst"]):
            bad.append(f"{key}: ranges={ours[key]['ranges']} but nsys NVTX Inst={t['NVTX Inst']}")
    assert not bad, "\n".join(bad[:20])


_SUFFIX = re.compile(r"(, (seq|op_id) = \d+|, (sizes|input_op_ids) = \[).*$", re.DOTALL)


@pytest.mark.parametrize("stem", STEMS)
def test_nvtx_gpu_projection_by_name_sums_nvtxgpuproj(stats, nsys_run, stem):
    mine = _run(nsys_run, stem, "nvtx_gpu_projection", {"by": "name"})
    rep = _report(stats, stem, "nvtxgpuproj", mine)
    if rep is None:
        return
    groups = defaultdict(lambda: [0, 0, 0, 0])  # ranges, duration, projected duration, launches
    for t in rep.rows:
        name = t["Name"]
        g = groups[(_SUFFIX.sub("", name), t["Style"], int(t["PID"]))]
        g[0] += 1
        g[1] += int(t["Orig Duration (ns)"])
        g[2] += int(t["Projected Duration (ns)"])
        g[3] += int(t["NumGPUOps"])
    ours = {}
    for r in mine:
        tag = f"{r['domain']}:{r['name']}" if r["domain"] else r["name"]
        ours[(tag, STYLE[r["style"]], r["pid"])] = [r["ranges"], r["duration_ns"],
                                                    r["proj_duration_ns"], r["launches"]]
    assert ours == dict(groups)
