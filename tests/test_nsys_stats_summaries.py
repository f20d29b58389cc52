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
from conftest import NSYS_FIXTURES, requires_nsys
from nsys_oracle import expect_report, mismatches

pytestmark = [requires_nsys, pytest.mark.nsys]

STEMS = [p.stem for p in NSYS_FIXTURES]
STYLE = {"push/pop": "PushPop", "start/end": "StartEnd", None: "None"}


def _dims(text: str) -> str:
    return "x".join(text.split())


def _range_tag(r) -> str:
    if r["range_name"] is None:
        return "None"
    return r["range_name"]


def _num_or_none(v):
    return None if v in ("None", "") else int(v)


_EXACT = {"total_ns": "Total Time (ns)", "min_ns": "Min (ns)", "max_ns": "Max (ns)"}
_ROUNDED = {"avg_ns": "Avg (ns)", "med_ns": "Med (ns)", "stddev_ns": "StdDev (ns)"}
# report -> (query, its parameters, nsys row key, tracekit row key, more exact and rounded columns)
_ROW_FOR_ROW = {
    "gpukernsum": ("kernel_summary", {"by": "grid"},
                   lambda t: (t["Name"], _dims(t["GridXYZ"]), _dims(t["BlockXYZ"])),
                   lambda r: (r["name"], r["grid"], r["block"]),
                   {"instances": "Instances"}, {"time_pct": "Time (%)"}),
    "nvtxkernsum": ("nvtx_kernel_summary", {},
                    lambda t: (t["NVTX Range"], t["Style"], _num_or_none(t["PID"]), _num_or_none(t["TID"]),
                               t["Kernel Name"]),
                    lambda r: (_range_tag(r), STYLE[r["style"]], r["pid"], r["tid"], r["kernel_name"]),
                    {"instances": "Kern Inst", "ranges": "NVTX Inst"}, {}),
}


@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("report", list(_ROW_FOR_ROW))
def test_summary_equals_nsys_row_for_row(nsys_stats, nsys_rows, report, stem):
    """kernel_summary -p by=grid = gpukernsum (grid and block), nvtx_kernel_summary =
    nvtxkernsum: one row per nsys row, by the same key."""
    query, params, their_key, our_key, exact, rounded = _ROW_FOR_ROW[report]
    mine = nsys_rows(stem, query, **params)
    rep = expect_report(nsys_stats(stem, report), mine)
    if rep is None:
        return
    theirs = {their_key(t): t for t in rep.rows}
    ours = {our_key(r): r for r in mine}
    only_ours, only_theirs = set(ours) - set(theirs), set(theirs) - set(ours)
    assert not only_ours and not only_theirs, (sorted(only_ours)[:3], sorted(only_theirs)[:3])
    assert len(mine) == len(rep.rows)  # one row per key, as nsys
    bad = []
    for key, t in theirs.items():
        bad += mismatches(key, ours[key], t, {**_EXACT, **exact}, {**_ROUNDED, **rounded})
    assert not bad, "\n".join(bad[:20])


def test_jacobi_grids_split_as_nsys(nsys_rows):
    """The 2xV100 Jacobi solver launches its kernel with two grids: two rows by grid, one by name."""
    stem = "nsys2020.5_2xv100_p2p_nvlink"
    rows = [(r["name"][:13], r["grid"], r["block"], r["instances"], r["total_ns"])
            for r in nsys_rows(stem, "kernel_summary", by="grid")]
    assert rows[:2] == [("jacobi_kernel", "512x512x1", "32x32x1", 1000, 4651646617),
                        ("jacobi_kernel", "512x256x1", "32x32x1", 2000, 4642364999)]
    by_name = nsys_rows(stem, "kernel_summary")
    assert (by_name[0]["instances"], by_name[0]["total_ns"], by_name[0]["grid"]) == (3000, 9294011616, None)


_SUFFIX = re.compile(r"(, (seq|op_id) = \d+|, (sizes|input_op_ids) = \[).*$", re.DOTALL)


@pytest.mark.parametrize("stem", STEMS)
def test_nvtx_gpu_projection_by_name_sums_nvtxgpuproj(nsys_stats, nsys_rows, stem):
    mine = nsys_rows(stem, "nvtx_gpu_projection", by="name")
    rep = expect_report(nsys_stats(stem, "nvtxgpuproj"), mine)
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
