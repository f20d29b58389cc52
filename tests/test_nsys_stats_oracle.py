"""tracekit's summary queries against NVIDIA's own `nsys stats` (2022.4) on the same exports.

For every fixture export and every summary report, `nsys stats --report R --format csv:noconv`
is run on the SQLite file (once per session) and tracekit's named query is run on the converted
run folder. Counts, totals, minima and maxima must be equal; averages, medians, standard
deviations and percentages, which nsys prints rounded to one decimal, must round to the printed
value. When nsys stats skips a report because the export has no such data, tracekit must return
no rows either. When nsys stats fails on an export, the test asserts the failure and is skipped
with nsys's own message (it never passes silently).

Report -> query: gpukernsum -> kernel_summary (nsys splits a kernel name by grid/block: rows are
summed per name first), cudaapisum -> cuda_api_summary, gpumemtimesum/gpumemsizesum ->
memcpy_summary (memsets are its 'memset' row, '[CUDA memset]' in nsys), nvtxsum -> nvtx_summary,
osrtsum -> osrt_summary, kernexecsum -> launch_overhead(split=true), nvtxgpuproj ->
nvtx_gpu_projection.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NSYS_FIXTURES, requires_nsys
from nsys_oracle import expect_report, merge_groups, mismatches, num, run_reports

from tracekit.query.engine import Engine

pytestmark = [requires_nsys, pytest.mark.nsys]

STEMS = [p.stem for p in NSYS_FIXTURES]

STATS = ("Avg (ns)", "Med (ns)", "StdDev (ns)")


def _compare_time_summary(rep_rows, our_rows, key_of, our_key, count_col, our_count):
    """Common check of *sum reports: time per key, with nsys rows summed per key first."""
    groups = merge_groups(rep_rows, "_key", count_col)
    mine = {our_key(r): r for r in our_rows}
    assert set(mine) == set(groups), (
        f"keys only in tracekit: {sorted(set(mine) - set(groups))[:5]}; "
        f"only in nsys: {sorted(set(groups) - set(mine))[:5]}"
    )
    bad = []
    for k, g in groups.items():
        r = mine[k]
        if r[our_count] != g["count"] or r["total_ns"] != g["total"] or r["min_ns"] != g["min"] \
                or r["max_ns"] != g["max"]:
            bad.append(f"{k}: {our_count}/total/min/max = {r[our_count]}/{r['total_ns']}/{r['min_ns']}/"
                       f"{r['max_ns']} but nsys {g['count']}/{g['total']}/{g['min']}/{g['max']}")
        # each nsys row's percentage is rounded to 0.1: the sum is within 0.05 per row
        if abs(r["time_pct"] - g["pct"]) > 0.05 * len(g["rows"]) + 1e-9:
            bad.append(f"{k}: time_pct={r['time_pct']} but nsys {g['pct']}")
        if len(g["rows"]) == 1:
            bad += mismatches(k, r, g["rows"][0], {},
                              {"avg_ns": "Avg (ns)", "med_ns": "Med (ns)", "stddev_ns": "StdDev (ns)"})
        elif abs(r["avg_ns"] - g["total"] / g["count"]) > 1e-6 * max(1.0, abs(r["avg_ns"])):
            bad.append(f"{k}: avg_ns={r['avg_ns']} but nsys total/count = {g['total'] / g['count']}")
    assert not bad, "\n".join(bad[:20])
    return groups


def api_name(name: str) -> str:
    """An API name as tracekit stores it: CUPTI's version suffix removed (cudaLaunchKernel_v7000
    -> cudaLaunchKernel). nsys 2022.4 removes only 4-digit suffixes (its SQL looks for '_v' six
    characters from the end), so newer exports show e.g. cudaGraphLaunch_v10000 there; both
    spellings are the same function, and the rows of one name are summed before comparing."""
    return re.sub(r"_v\d{4,5}$", "", name)


def _keyed(rows, key_fn):
    for r in rows:
        r["_key"] = key_fn(r)
    return rows


def nvtx_tag(r) -> tuple[str, str]:
    """nvtxsum's key of a tracekit nvtx_summary row: (style, 'domain:name' or 'name')."""
    style = {"push/pop": "PushPop", "start/end": "StartEnd"}[r["style"]]
    return style, f"{r['domain']}:{r['name']}" if r["domain"] else r["name"]


# report -> (query, its parameters, nsys row key, tracekit row key, nsys count column, ours)
_TIME_SUMMARIES = {
    "gpukernsum": ("kernel_summary", {}, lambda r: r["Name"], lambda r: r["name"], "Instances", "instances"),
    "cudaapisum": ("cuda_api_summary", {}, lambda r: api_name(r["Name"]), lambda r: r["name"], "Num Calls",
                   "calls"),
    "osrtsum": ("osrt_summary", {}, lambda r: r["Name"], lambda r: r["name"], "Num Calls", "calls"),
    # nvtxsum keys every full range text
    "nvtxsum": ("nvtx_summary", {"raw": "true"}, lambda r: (r["Style"], r["Range"]), nvtx_tag, "Instances",
                "instances"),
    "gpumemtimesum": ("memcpy_summary", {}, lambda r: r["Operation"], lambda r: r["operation"], "Count", "count"),
}


@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("report", list(_TIME_SUMMARIES))
def test_time_summary(nsys_stats, nsys_rows, report, stem):
    query, params, their_key, our_key, count_col, our_count = _TIME_SUMMARIES[report]
    mine = nsys_rows(stem, query, **params)
    rep = expect_report(nsys_stats(stem, report), mine)
    if rep is None:
        return
    rows = _keyed(rep.rows, their_key)
    _compare_time_summary(rows, mine, None, our_key, count_col, our_count)


@pytest.mark.parametrize("stem", STEMS)
def test_gpumemsizesum(nsys_stats, nsys_rows, stem):
    mine = nsys_rows(stem, "memcpy_summary")
    rep = expect_report(nsys_stats(stem, "gpumemsizesum"), mine)
    if rep is None:
        return
    theirs = {r["Operation"]: r for r in rep.rows}
    by_op = {r["operation"]: r for r in mine}
    assert set(by_op) == set(theirs)
    bad = []
    for op, t in theirs.items():
        bad += mismatches(op, by_op[op], t,
                          {"total_bytes": "Total (B)", "count": "Count", "min_bytes": "Min (B)",
                           "max_bytes": "Max (B)"}, {})
        # csv:noconv prints sizes unrounded: equal up to float formatting
        for mine_col, col in (("avg_bytes", "Avg (B)"), ("med_bytes", "Med (B)"), ("stddev_bytes", "StdDev (B)")):
            if abs(by_op[op][mine_col] - num(t[col])) > 1e-9 * max(1.0, abs(num(t[col]))):
                bad.append(f"{op}: {mine_col}={by_op[op][mine_col]} but nsys {col}={t[col]}")
    assert not bad, "\n".join(bad)


_KERNEXEC_EXACT = {"launches": "Count", "queued": "QCount"}
_KERNEXEC_ROUNDED = {}
for _mine, _theirs in (("total", "T"), ("api", "A"), ("queue", "Q"), ("kernel", "K")):
    _KERNEXEC_EXACT[f"{_mine}_min_ns"] = f"{_theirs}Min (ns)"
    _KERNEXEC_EXACT[f"{_mine}_max_ns"] = f"{_theirs}Max (ns)"
    _KERNEXEC_ROUNDED[f"{_mine}_avg_ns"] = f"{_theirs}Avg (ns)"
    _KERNEXEC_ROUNDED[f"{_mine}_med_ns"] = f"{_theirs}Med (ns)"
    _KERNEXEC_ROUNDED[f"{_mine}_stddev_ns"] = f"{_theirs}StdDev (ns)"


@pytest.mark.parametrize("stem", STEMS)
def test_kernexecsum(nsys_stats, nsys_rows, stem):
    mine = nsys_rows(stem, "launch_overhead", split="true")
    rep = expect_report(nsys_stats(stem, "kernexecsum"), mine)
    if rep is None:
        return
    key = ("PID", "TID", "DevId", "API Name", "Kernel Name")
    theirs = {tuple(api_name(r[k]) if k == "API Name" else r[k] for k in key): r for r in rep.rows}
    assert len(theirs) == len(rep.rows)
    by_key = {(str(r["pid"]), str(r["tid"]), str(r["device_id"]), r["api_name"], r["name"]): r for r in mine}
    assert set(by_key) == set(theirs)
    bad = []
    for k, t in theirs.items():
        r = by_key[k]
        if r["queued"] == 0:
            # no queued launch: nsys prints None for the queue statistics (and 0.0 for the
            # standard deviation); tracekit has NULL for all of them
            exact = {m: c for m, c in _KERNEXEC_EXACT.items() if not m.startswith("queue")}
            rounded = {m: c for m, c in _KERNEXEC_ROUNDED.items() if not m.startswith("queue")}
            queue = [m for m in {**_KERNEXEC_EXACT, **_KERNEXEC_ROUNDED} if m.startswith("queue_")]
            assert all(r[m] is None for m in queue), k
            assert [t[c] for c in ("QAvg (ns)", "QMed (ns)", "QMin (ns)", "QMax (ns)")] == ["None"] * 4
        else:
            exact, rounded = _KERNEXEC_EXACT, _KERNEXEC_ROUNDED
        bad += mismatches(k[3:], r, t, exact, rounded)
    assert not bad, "\n".join(bad[:20])



@pytest.mark.parametrize("stem", STEMS)
def test_nvtxgpuproj(nsys_stats, nsys_rows, stem):
    # every projected range, matched by ID (tracekit's range_id is the NVTX_EVENTS rowid, nsys's
    # RangeId): same name, style, thread, original and projected start and duration, and number
    # of launching calls. (nsys's Lvl/ParentId are not compared: nsys finds parents through an
    # R*Tree index that stores 32-bit floats, so nearly coincident ranges lose their parent
    # there; tracekit's depth/parent_range_id come from exact push/pop nesting.)
    mine = nsys_rows(stem, "nvtx_gpu_projection")
    rep = expect_report(nsys_stats(stem, "nvtxgpuproj"), mine)
    if rep is None:
        return
    theirs = {int(r["RangeId"]): r for r in rep.rows}
    by_id = {r["range_id"]: r for r in mine}
    assert set(by_id) == set(theirs)
    bad = []
    for k, t in theirs.items():
        r = by_id[k]
        style, tag = nvtx_tag(r)
        got = (tag, style, r["pid"], r["tid"], r["start_ns"], r["duration_ns"], r["proj_start_ns"],
               r["proj_duration_ns"], r["launches"])
        want = (t["Name"], t["Style"], int(t["PID"]), int(t["TID"]), int(t["Orig Start (ns)"]),
                int(t["Orig Duration (ns)"]), int(t["Projected Start (ns)"]),
                int(t["Projected Duration (ns)"]), int(t["NumGPUOps"]))
        if got != want:
            bad.append(f"range {k}: tracekit {got} nsys {want}")
    assert not bad, "\n".join(bad[:20])
    # (row order is not compared: nvtxgpuproj's ORDER BY names "Projected Start", which its
    # SELECT calls "Projected Start:ts_ns", so SQLite sorts by a constant string)

# -- exports tracekit has not seen: profiled here, now ---------------------------------------------

# One program, profiled with `nsys profile --trace=nvtx,osrt`: NVTX from Python (nvtx 0.2.10, the
# version nsys 2022.4 records) with nested push/pop ranges in named domains with categories,
# default-domain ranges, start/end ranges ended on the same and on another thread, a mark, a
# range left open at exit; three threads using the same range names; a child process that creates
# its domains in the other order (the same domain ID names different domains in the two
# processes: names must be resolved per process, as nsys does); OS runtime calls (sleep, pipe,
# select, file reads, thread and process creation).
PROGRAM = """
import os, select, subprocess, sys, threading, time
import nvtx

CHILD = '''
import time, nvtx
with nvtx.annotate("child only", domain="zeta"):
    time.sleep(0.001)
with nvtx.annotate("shared", domain="alpha"):
    time.sleep(0.001)
'''

def work(n):
    s = 0
    for i in range(n):
        s += i
    return s

def worker(i):
    for j in range(4):
        with nvtx.annotate(f"worker {i}", domain="alpha"):
            with nvtx.annotate("read", domain="beta"):
                with open(__file__, "rb") as f:
                    f.read()
            time.sleep(0.0005 * (i + 1))

with nvtx.annotate("shared", domain="alpha"):
    time.sleep(0.001)
for step in range(3):
    with nvtx.annotate(f"step {step}", domain="train", category="loop", color="blue"):
        with nvtx.annotate("forward", domain="train", category="compute"):
            work(20000)
            time.sleep(0.002)
        with nvtx.annotate("backward", domain="train"):
            work(30000)
nvtx.push_range("outer")
nvtx.push_range("inner", category="io")
r, w = os.pipe()
os.write(w, b"x")
select.select([r], [], [], 0.01)
os.read(r, 1)
nvtx.pop_range()
nvtx.pop_range()
h = nvtx.start_range("async", domain="io")
def other():
    time.sleep(0.003)
    nvtx.end_range(h)
t = threading.Thread(target=other)
t.start()
t.join()
h2 = nvtx.start_range("same thread")
time.sleep(0.001)
nvtx.end_range(h2)
nvtx.mark("done")
threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
subprocess.run([sys.executable, "-c", CHILD], check=True)
nvtx.push_range("never closed")
"""

FRESH_REPORTS = ("nvtxsum", "osrtsum", "cudaapisum", "gpukernsum")
PROFILE_TIMEOUT_S = 120


def _run_nsys(cmd, cwd, timeout):
    """Run an nsys command; on timeout kill it and the profiling agent it started (nsys starts
    the agent in its own session, named after the profiling process), then fail."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # the agent's command line has --session-name=profile-<program>-<pid of nsys profile>
        tag = f"-{proc.pid}\0".encode()
        for d in Path("/proc").glob("[0-9]*"):
            try:
                cmdline = (d / "cmdline").read_bytes()
                if b"--start-agent" in cmdline and b"--session-name=profile-" in cmdline and tag in cmdline:
                    os.kill(int(d.name), signal.SIGKILL)
            except OSError:
                pass
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(map(str, cmd[:2]))} did not finish in {timeout} s:\n{out[-2000:]}")
    return proc.returncode, out


@pytest.fixture(scope="session")
def fresh(tmp_path_factory):
    """Profile PROGRAM with nsys (--trace=nvtx,osrt), export to SQLite, convert with tracekit
    and run nsys stats: once per session. Returns (run folder, {report: StatsReport})."""
    pytest.importorskip("nvtx", reason="the nvtx package (tracekit's collect extra) is needed to profile")
    from tracekit.convert import convert

    base = tmp_path_factory.mktemp("fresh_exports")
    cache = {}

    def profile():
        d = base
        (d / "prog.py").write_text(PROGRAM)
        # no CPU sampling or context-switch tracing: not needed here, and it makes nsys 2022.4
        # take seconds instead of tens of seconds (and not hang when several profile at once)
        rc, out = _run_nsys(["nsys", "profile", "--trace=nvtx,osrt", "--sample=none", "--cpuctxsw=none",
                             "-o", str(d / "prog"),
                             "--force-overwrite", "true", sys.executable, str(d / "prog.py")],
                            d, PROFILE_TIMEOUT_S)
        rep = d / "prog.nsys-rep"
        assert rc == 0 and rep.exists(), f"nsys profile failed:\n{out[-3000:]}"
        rc, out = _run_nsys(["nsys", "export", "--type", "sqlite", "-o", str(d / "prog.sqlite"),
                             "--force-overwrite", "true", str(rep)], d, 120)
        assert rc == 0, f"nsys export failed:\n{out[-3000:]}"
        return d / "prog.sqlite", run_reports(d / "prog.sqlite", FRESH_REPORTS, d / "stats")

    def get():
        # each stage runs once per session, failures included (re-raised, not re-run)
        for stage, fn in (("export", profile), ("run", lambda: convert([cache["export"][0]], base / "run"))):
            if stage not in cache:
                try:
                    cache[stage] = fn()
                except BaseException as exc:  # noqa: BLE001 - remembered and re-raised
                    cache[stage] = exc
            if isinstance(cache[stage], BaseException):
                raise cache[stage]
        return cache["run"], cache["export"][1]

    return get


def _fresh_ours(run, query):
    params = {"raw": "true"} if query == "nvtx_summary" else {}  # nvtxsum keys every full text
    with Engine([run]) as eng:
        return eng.query(query, params).to_pylist()


@pytest.mark.slow
def test_fresh_export_nvtxsum(fresh):
    run, reps = fresh()
    rep = reps["nvtxsum"]
    assert rep.status == "ok", rep.message
    tags = {(r["Style"], r["Range"]): int(r["Instances"]) for r in rep.rows}
    # the capture holds what the program did (else the comparison below would prove little)
    assert tags[("PushPop", "train:forward")] == 3 and tags[("StartEnd", "io:async")] == 1
    assert tags[("PushPop", "inner")] == 1 and tags[("StartEnd", "same thread")] == 1
    assert tags[("PushPop", "alpha:shared")] == 2 and tags[("PushPop", "zeta:child only")] == 1
    assert tags[("PushPop", "beta:read")] == 12
    rows = _keyed(rep.rows, lambda r: (r["Style"], r["Range"]))
    _compare_time_summary(rows, _fresh_ours(run, "nvtx_summary"), None, nvtx_tag, "Instances", "instances")


@pytest.mark.slow
def test_fresh_export_osrtsum(fresh):
    run, reps = fresh()
    rep = reps["osrtsum"]
    assert rep.status == "ok", rep.message
    assert {"clock_nanosleep", "read", "pthread_create"} <= {r["Name"] for r in rep.rows}
    rows = _keyed(rep.rows, lambda r: r["Name"])
    _compare_time_summary(rows, _fresh_ours(run, "osrt_summary"), None, lambda r: r["name"], "Num Calls", "calls")


@pytest.mark.slow
def test_fresh_export_without_cuda(fresh):
    # a CPU-only capture: nsys stats skips the CUDA reports, tracekit has no CUDA rows
    run, reps = fresh()
    for report, query in (("cudaapisum", "cuda_api_summary"), ("gpukernsum", "kernel_summary")):
        assert reps[report].status == "skipped", (report, reps[report].message)
        assert _fresh_ours(run, query) == []


@pytest.mark.slow
def test_fresh_export_open_range(fresh, tmp_path):
    # A range never closed: nsys stats ends it at the last NVTX timestamp of the export, as
    # nvtx_summary does. Edited copy of the fresh export: the start/end range "same thread" loses
    # its end (the last NVTX timestamp is then the end of "never closed", which nsys closed at exit).
    import shutil
    import sqlite3

    from tracekit.convert import convert

    _run, _reps = fresh()
    src = next(Path(str(_run)).parent.glob("prog.sqlite"))
    edited = tmp_path / "open.sqlite"
    shutil.copy(src, edited)
    con = sqlite3.connect(edited)
    n = con.execute("""UPDATE NVTX_EVENTS SET "end" = NULL WHERE eventType = 60 AND textId IN
                       (SELECT id FROM StringIds WHERE value = 'same thread')""").rowcount
    con.commit()
    con.close()
    assert n == 1
    rep = run_reports(edited, ("nvtxsum",), tmp_path / "stats")["nvtxsum"]
    assert rep.status == "ok", rep.message
    run = convert([edited], tmp_path / "run")
    mine = _fresh_ours(run, "nvtx_summary")
    assert [r["instances"] for r in mine if r["name"] == "same thread"] == [1]
    rows = _keyed(rep.rows, lambda r: (r["Style"], r["Range"]))
    _compare_time_summary(rows, mine, None, nvtx_tag, "Instances", "instances")
