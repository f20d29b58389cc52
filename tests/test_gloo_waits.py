"""The CPU-rank graph's inferred Gloo waits on a real job's trace (issue 35): steps 4 and 5 of a
2-rank Gloo DDP job (benchmarks/gloo_ddp.py, rank 1 doing 20 ms of extra work per step; job
n2_x20_r0 of the sweep of 2026-12-07), cut from its Kineto JSON (tests/data/gloo_ddp/README.md).

After backward, each rank's main thread waits for its four gradient buckets' all-reduces in the
order it issued them (DDP's finalize: per bucket a group of ``aten::as_strided``, then a
``copy_bucket_to_grad`` per parameter); the k-th ``c10d::allreduce_`` call of a rank hands over
its k-th ``gloo:all_reduce`` range (on Gloo's two worker threads). Recounted here from the JSON
with ``json`` (ms; "closed late": the range's recorded end comes after the thread woke):

| rank | step | bucket | thread idle before the range's end | woke after it | gloo wait |
|---|---|---|---|---|---|
| 0 | 4 | 0 | 22.115 | 0.088 | yes |
| 0 | 4 | 1 | gap 2.500 | closed late by 0.148 | yes (closed late, within the gap) |
| 0 | 4 | 2 | 0.785 | 4.256 | no: woke later than it had idled; not told from a coincidence |
| 0 | 4 | 3 | gap 1.092 | closed late by 5.143 | yes: rank 1's range of it ended 0.978 into the gap |
| 0 | 5 | 0, 1, 2 | 19.078, 4.184, 1.248 | 0.317, 0.068, 0.017 | yes |
| 0 | 5 | 3 | the range had ended 0.193 before the thread got there | | no wait |
| 1 | 4 | 0, 2, 3 | 0.657, 0.964, 6.261 | 0.291, 0.026, 0.033 | yes |
| 1 | 4 | 1 | gap 0.253 | closed late by 0.086 | yes (closed late) |
| 1 | 5 | 0, 2 | the ranges had ended 2.176, 0.611 before | | no wait |
| 1 | 5 | 1, 3 | 2.234, 2.954 | 0.020, 0.031 | yes |

12 gloo waits, 3 of them closed late. The rule before (the latest end of another thread before the
wake, which must come after that end) found 9: not the three that closed late."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tracekit.convert import convert
from tracekit.query import Engine
from tracekit.whatif import load_graph, whatif
from tracekit.whatif.parts import load_in_parts

DATA = Path(__file__).resolve().parent / "data" / "gloo_ddp"
# (rank, step, bucket) the main thread waited for and the rule finds (the table above)
FOUND = {(0, 4, 0), (0, 4, 1), (0, 4, 3), (0, 5, 0), (0, 5, 1), (0, 5, 2),
         (1, 4, 0), (1, 4, 1), (1, 4, 2), (1, 4, 3), (1, 5, 1), (1, 5, 3)}
CLOSED_LATE = {(0, 4, 1), (0, 4, 3), (1, 4, 1)}
NO_WAIT = {(0, 5, 3), (1, 5, 0), (1, 5, 2)}


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    return convert([DATA / "rank0.json.gz", DATA / "rank1.json.gz"], tmp_path_factory.mktemp("gloo") / "run")


def _events(rank: int) -> list[dict]:
    with gzip.open(DATA / f"rank{rank}.json.gz", "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _buckets(rank: int) -> dict:
    """(step, bucket) -> (the bucket group's first operator's start, the end of the operator
    before it, the bucket's Gloo range end), us, from the JSON."""
    ev = _events(rank)
    gloo = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in ev if e["name"] == "gloo:all_reduce")
    calls = sorted(float(e["ts"]) for e in ev if e["name"] == "c10d::allreduce_")
    main = {e["tid"] for e in ev if e["name"].startswith("step ")}
    ops, reach = [], float("-inf")  # the main thread's top operators
    for e in sorted((e for e in ev if e.get("cat") == "cpu_op" and e["tid"] in main),
                    key=lambda e: (float(e["ts"]), -float(e["dur"]))):
        a, b = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        if a >= reach:
            ops.append((a, b, e["name"]))
        reach = max(reach, b)
    out = {}
    for s in sorted((e for e in ev if e["name"].startswith("step ")), key=lambda e: float(e["ts"])):
        s0, s1 = float(s["ts"]), float(s["ts"]) + float(s["dur"])
        k = [i for i, c in enumerate(calls) if s0 <= c < s1]
        after = [o for o in ops if o[1] > calls[k[-1]] and o[0] < s1]
        heads = [i for i in range(1, len(after))
                 if after[i][2] == "aten::as_strided" and after[i - 1][2] != "aten::as_strided"]
        assert len(heads) == len(k) == 4
        for b, (i, ki) in enumerate(zip(heads, k)):
            out[(int(s["name"].split()[1]), b)] = (after[i][0], after[i - 1][1], gloo[ki][1])
    return out


def test_the_table_is_the_json():
    for rank in (0, 1):
        for (step, b), (wake, idle_from, end) in _buckets(rank).items():
            key = (rank, step, b)
            assert (end <= idle_from) == (key in NO_WAIT), key  # no wait: ended before the thread got there
            assert (end > wake) == (key in CLOSED_LATE), key
    w, p, e = _buckets(0)[(4, 2)]
    assert w - e > e - p  # the one wait the rule leaves: woke 4.256 ms after the end, idle 0.785


def test_gloo_wait_edges_are_the_hand_counted_ones(job):
    with Engine([job]) as eng:
        g = load_graph(eng)
        con = eng.con
        con.execute("CREATE OR REPLACE TEMP TABLE tk_wi_n AS SELECT * FROM tk_wi_nodes()")
        rows = con.sql("""
            WITH r AS (SELECT pid, row_number() OVER (ORDER BY pid) - 1 AS rank FROM (SELECT DISTINCT pid FROM tk_wi_n)),
            c AS (SELECT node_id, row_number() OVER (PARTITION BY pid ORDER BY start_ns) - 1 AS k
                  FROM tk_wi_n WHERE category = 'collective'),
            s4 AS (SELECT pid, start_ns FROM nvtx_ranges WHERE name = 'step 4')
            SELECT r.rank, c.k, d.start_ns - s4.start_ns AS wake_ns
            FROM tk_cpu_edges('tk_wi_n') e JOIN c ON c.node_id = e.src JOIN tk_wi_n d ON d.node_id = e.dst
            JOIN r ON r.pid = d.pid JOIN s4 ON s4.pid = d.pid WHERE e.rule = 'gloo wait'""").fetchall()
    assert g.counts["wait:gloo wait"] == len(FOUND) == 12
    assert g.counts["wait:gloo closed late"] == len(CLOSED_LATE) == 3
    assert g.counts["wait:gloo start"] == g.counts["collective_calls"] == 16 and g.counts["instances"] == 8
    assert "wait:thread wait" not in g.counts  # PyTorch runs backward on the calling thread on CPUs
    # built a rank at a time (the other rank's first end from the job's arrivals): the same
    with Engine([job]) as eng:
        parts = load_in_parts(eng, part_rows=100)
    assert parts.counts == g.counts and (parts.end == g.end).all()
    got = {}
    for rank, k, wake_ns in rows:
        step, b = 4 + k // 4, k % 4  # the k-th range of a rank is its k-th call's: bucket k % 4
        got[(rank, step, b)] = wake_ns
    assert set(got) == FOUND  # each from the bucket's own range, to the operator that ended the wait
    for rank in (0, 1):
        step4 = next(float(e["ts"]) for e in _events(rank) if e["name"] == "step 4")
        for (step, b), (wake, _, _) in _buckets(rank).items():
            if (rank, step, b) in got:
                assert got[(rank, step, b)] == pytest.approx((wake - step4) * 1e3, abs=2)


def test_no_straggler_gives_back_the_extra_work_in_every_step(job):
    """Rank 0's range of bucket 3 of step 4 closed 3.9 ms after rank 0's step 4 ended, after its
    first range of step 5 had started: overlapping, it joined the two steps' collective groups and
    the interval between them (rank 1's extra work of step 5) stayed (step 5 saved 0 on both
    ranks). A Gloo collective now ends, for the groups, when it first ended on any rank."""
    ev = _events(0)
    gloo = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in ev if e["name"] == "gloo:all_reduce")
    end4 = next(float(e["ts"]) + float(e["dur"]) for e in ev if e["name"] == "step 4")
    assert gloo[3][1] > gloo[4][0] and gloo[3][1] - end4 == pytest.approx(3890, abs=10)
    extra = {}
    for e in _events(1):
        if e["name"] == "extra_work":
            step = next(s["name"] for s in _events(1) if s["name"].startswith("step ")
                        and float(s["ts"]) <= float(e["ts"]) < float(s["ts"]) + float(s["dur"]))
            extra[int(step.split()[1])] = float(e["dur"]) * 1e3
    assert sorted(extra) == [4, 5] and all(20.1e6 <= x <= 20.2e6 for x in extra.values())
    with Engine([job]) as eng:
        out = whatif(eng, ["baseline", "no-straggler"]).to_pylist()
    # the baseline is still exact with the late-closing ranges' nodes ended at the wake
    assert [r["baseline_ns"] - r["measured_ns"] for r in out] == [0] * 8
    rows = [r for r in out if r["scenario"] == "no-straggler"]
    assert len(rows) == 4
    for r in rows:  # ranks 0, 1 steps 4, 5: saved 20.9, 20.0, 21.7, 19.0 ms (before: 20.6, 0.3, 20.9, 0.0)
        assert 0.9 * extra[r["step"]] <= r["saved_ns"] <= 1.1 * extra[r["step"]], r


def test_critical_path_never_goes_forward_in_time(job):
    """Rank 0's call of bucket 3 in step 4 (and rank 1's of bucket 1 in step 5) closed before the
    collective's transfer ended, which the graph keeps as a negative post-wait so the baseline
    stays exact. The walk took the transfer's end as the point before the call's end: segments of
    -1.05 ms and -0.58 ms, made up by others, so each step still added to its wall time. The walk
    now enters the transfer where the call ended: every segment is positive, the steps still add
    up, and collective transfers stay on the path."""
    with Engine([job]) as eng:
        segs = eng.query("critical_path").to_pylist()
    assert segs and min(s["dur_ns"] for s in segs) > 0
    walls: dict = {}
    for s in segs:
        walls.setdefault(s["step"], [0, s["wall_ns"]])[0] += s["dur_ns"]
    assert sorted(walls) == [4, 5] and all(total == wall for total, wall in walls.values())
    for step in (4, 5):  # in time order, one after the other
        path = sorted((s for s in segs if s["step"] == step), key=lambda s: s["seq"])
        assert all(a["start_ns"] + a["dur_ns"] == b["start_ns"] for a, b in zip(path, path[1:]))
    assert any(s["category"] == "collective transfer" for s in segs)
