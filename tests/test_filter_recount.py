"""Every named query under every filter against a recount (issue 36, item 1): a filter keeps
exactly the rows it names. The recount is the documented meaning of the filter done by hand,
in pyarrow, on a 2-rank job from tests/jobgen.py: a copy of the run folder whose Parquet
tables hold only the kept rows (--rank: the rows of the rank's processes; --step: the events
that start inside the step of their own process; --window: the events that start inside the
window after the run's first event; --device: the GPU activities of the device; --nvtx: the
GPU activities whose launching CUDA API call lies inside the union of the matching NVTX ranges
of its thread, the host events that start inside them, on the same thread where the table
records one, else of the same process; steps are events too, kept when their range starts
inside). Each named query on the filtered job must equal the same query on that copy,
unfiltered. The --nvtx recount is plain Python (re, sorted intervals, bisect) on the rows."""

from __future__ import annotations

import bisect
import json
import math
import re

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from conftest import make_run
from jobgen import make_job

from tracekit.convert import convert
from tracekit.query import all_queries
from tracekit.query.engine import Engine
from tracekit.query.filters import GPU_TABLES, HAS_DEVICE, HAS_PID, HAS_TID, TIME_COLUMN, Filters

pytestmark = pytest.mark.slow
# the replay (critical_path*, half the test's time) is recounted under --rank
REPLAYED = ("critical_path", "critical_path_summary")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    d = tmp_path_factory.mktemp("recount")
    j = make_job(d / "src", ranks=2, seed=3, straggler=1, straggler_delay_ns=50_000)
    run = convert(j.paths, d / "job", jobs=1)
    man = json.loads((run / "manifest.json").read_text())
    tables = {name: ds.dataset([str(run / f) for f in t["files"]], format="parquet").to_table()
              for name, t in man["tables"].items() if t["files"]}
    return d, run, man, tables


def _copy(job, name, keep):
    d, _, man, tables = job
    kept = {n: keep(n, t) for n, t in tables.items()}
    return make_run(d / name, kept, {k: man[k] for k in ("job", "ranks", "sources") if k in man})


def _in_windows(t, tcol, windows):
    """Rows of ``t`` whose ``tcol`` lies in [w0, w1) of their process's window (pid None: any)."""
    mask = pa.array([False] * t.num_rows, pa.bool_())
    for pid, (w0, w1) in windows.items():
        m = pc.and_(pc.greater_equal(t[tcol], w0), pc.less(t[tcol], w1))
        if pid is not None and "pid" in t.column_names:
            m = pc.and_(m, pc.equal(t["pid"], pid))
        mask = pc.or_(mask, pc.fill_null(m, False))
    return t.filter(mask)


def _recount(job):
    """(filter, copy of the run folder holding only the rows the filter keeps)."""
    _, _, _, tables = job
    procs = tables["processes"].to_pylist()
    pid1 = [p["pid"] for p in procs if p["rank"] == 1]
    assert len(pid1) == 1 and len(procs) == 2

    def by_rank(n, t):
        return t.filter(pc.is_in(t["pid"], pa.array(pid1, pa.int64()))) if n in HAS_PID else t

    # step 5 of each process: its ProfilerStep#5 range
    steps = {r["pid"]: (r["start_ns"], r["end_ns"])
             for r in tables["nvtx_ranges"].filter(pc.equal(tables["nvtx_ranges"]["name"], "ProfilerStep#5")).to_pylist()}
    assert len(steps) == 2

    def timed(windows):
        def keep(n, t):
            tcol = TIME_COLUMN.get(n)
            return _in_windows(t, tcol, windows) if tcol in t.column_names else t
        return keep

    t0 = min(pc.min(tables[n]["start_ns"]).as_py() for n in ("kernels", "memcpy", "cuda_api", "nvtx_ranges"))
    window = {None: (t0 + 200_000_000, t0 + 450_000_000)}

    def by_device(n, t):
        return t.filter(pc.fill_null(pc.equal(t["device_id"], 0), False)) if n in HAS_DEVICE else t

    return [(Filters.parse(nvtx=NVTX), _copy(job, "nvtx", _by_nvtx(tables, NVTX))),
            (Filters.parse(rank="1"), _copy(job, "rank1", by_rank)),
            (Filters.parse(step="5"), _copy(job, "step5", timed(steps))),
            (Filters.parse(window="200ms:450ms"), _copy(job, "window", timed(window))),
            (Filters.parse(device="0"), _copy(job, "device0", by_device))]


# step 5's ProfilerStep range (all its work), the backward pass of every step (on the autograd
# thread) and the convolutions (nested, many small ranges) of every step
NVTX = r"^ProfilerStep#5$|^## backward ##$|cudnn_convolution"
INF = 2**63 - 1


def _union(spans):
    """Sorted disjoint [lo, hi) intervals covering ``spans`` (overlapping or touching merged)."""
    out = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [x[0] for x in out], [x[1] for x in out]


def _inside(windows, key, start, end=None):
    """Whether [start, end] (end None: the point start) lies inside one of ``windows[key]``."""
    if key not in windows or start is None:
        return False
    los, his = windows[key]
    i = bisect.bisect_right(los, start) - 1
    return i >= 0 and start < his[i] and (end is None or end <= his[i])


def _by_nvtx(tables, regex):
    """keep(name, table) of --nvtx ``regex``: the recount of its documented meaning."""
    pat = re.compile(regex)
    ranges = [r for r in tables["nvtx_ranges"].to_pylist() if r["name"] is not None and pat.search(r["name"])]
    assert 10 < len(ranges) < tables["nvtx_ranges"].num_rows // 10
    spans: dict[str, dict] = {"thread": {}, "proc": {}}
    for r in ranges:
        w = (r["start_ns"], INF if r["end_ns"] is None else r["end_ns"])
        spans["thread"].setdefault((r["pid"], r["tid"]), []).append(w)
        spans["proc"].setdefault(r["pid"], []).append(w)
    win = {k: {key: _union(v) for key, v in d.items()} for k, d in spans.items()}
    launches = {(c["pid"], c["correlation_id"]) for c in tables["cuda_api"].to_pylist()
                if c["correlation_id"] is not None and c["end_ns"] is not None and c["tid"] is not None
                and _inside(win["thread"], (c["pid"], c["tid"]), c["start_ns"], c["end_ns"])}

    def keep(n, t):
        tcol = TIME_COLUMN.get(n)
        if tcol not in t.column_names:
            return t
        rows = t.to_pylist()
        if n in GPU_TABLES:
            mask = [(r["pid"], r["correlation_id"]) in launches for r in rows]
        elif "pid" in t.column_names and "tid" in t.column_names and n in HAS_TID:
            mask = [_inside(win["thread"], (r["pid"], r["tid"]), r[tcol]) for r in rows]
        elif "pid" in t.column_names:
            mask = [_inside(win["proc"], r["pid"], r[tcol]) for r in rows]
        else:
            mask = [any(_inside(win["proc"], p, r[tcol]) for p in win["proc"]) for r in rows]
        return t.filter(pa.array(mask, pa.bool_()))
    return keep


class _Near(float):
    """A float equal to another within 1e-9 relative (a sum taken in another order)."""

    def __eq__(self, other):
        return isinstance(other, float) and (math.isclose(self, other, rel_tol=1e-9)
                                             or math.isnan(self) and math.isnan(other))

    __hash__ = float.__hash__


def _rows(table):
    return [{k: _Near(v) if isinstance(v, float) else v
             for k, v in r.items() if k != "run_id"} for r in table.to_pylist()]


def test_every_query_under_every_filter_equals_its_recount(job):
    _, run, _, _ = job
    queries = all_queries()
    bad = []
    for filters, copy in _recount(job):
        with Engine([run], filters=filters) as got, Engine([copy]) as want:
            for name, q in queries.items():
                if name in REPLAYED and not filters.ranks:
                    continue
                a, b = _rows(got.query(q, {})), _rows(want.query(q, {}))
                if a != b:
                    bad.append(f"{name} [{filters.describe()}]: {len(a)} rows, recount {len(b)}")
    assert not bad, "\n".join(bad)
