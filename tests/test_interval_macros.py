"""The shared host-interval macros of queries/cpu/_macros.sql (issue 23, "data where it is data"):
tk_interval_islands (the island sweep cpu_overhead and host_cpu_utilization shared as copies, one
with ``>=`` and one with ``>``) and tk_union_between (their ASOF window probe), on hand-built rows.
All times in ns; every expected value is worked out in the comment beside it."""

from __future__ import annotations

from tracekit.query.engine import Engine

# one thread, class 'x': [0,10) with [2,8) nested in it, [10,15) touching it, [20,30) apart
ROWS = "(VALUES (1, 1, 'x', 0, 10), (1, 1, 'x', 2, 8), (1, 1, 'x', 10, 15), (1, 1, 'x', 20, 30))"
TAGGED = f"tagged AS (SELECT 'r' AS run_id, * FROM {ROWS} t(pid, tid, cls, start_ns, end_ns))"


def _sql(run, sql):
    with Engine([run]) as eng:
        return eng.sql(sql).to_pylist()


def test_touching_intervals_are_two_islands_unless_merged(run_factory):
    run = run_factory({"cuda_api": {"start_ns": [0], "end_ns": [1], "pid": [1], "tid": [1],
                                    "correlation_id": [1], "name": ["cudaFree"], "duration_ns": [1]}})
    isl = {m: _sql(run, f"WITH {TAGGED} SELECT start_ns, end_ns, cum_before_ns "
                        f"FROM tk_interval_islands('tagged', {m}) ORDER BY start_ns")
           for m in ("false", "true")}
    # merge_touching = false: [0,10) (the nested call inside), [10,15), [20,30): 3 islands
    assert [tuple(r.values()) for r in isl["false"]] == [(0, 10, 0), (10, 15, 10), (20, 30, 15)]
    # merge_touching = true: [0,15) and [20,30): 2 islands, the same 25 ns of union
    assert [tuple(r.values()) for r in isl["true"]] == [(0, 15, 0), (20, 30, 15)]
    # the window probe gives the same union either way: [5,25) holds 5+5 (the first two) + 5 = 15;
    # [10,12) 2 (cut by both edges); [15,20) 0 (a gap); [0,100) all 25
    for m in ("false", "true"):
        got = _sql(run, f"WITH {TAGGED}, isl AS (SELECT * FROM tk_interval_islands('tagged', {m})), "
                        "w AS (SELECT 'r' AS run_id, 1 AS pid, 1 AS tid, 'x' AS cls, * "
                        "      FROM (VALUES (5, 25), (10, 12), (15, 20), (0, 100)) v(w0, w1)) "
                        "SELECT w0, w1, union_ns FROM tk_union_between('w', 'isl') ORDER BY w0, w1")
        assert [tuple(r.values()) for r in got] == [(0, 100, 25), (5, 25, 15), (10, 12, 2), (15, 20, 0)]


def test_what_each_query_counts_at_a_touching_boundary(run_factory):
    # cpu_overhead counts islands of launch calls: [0,5) and [5,9) touch on one thread -> two
    # launches (with `>` they would merge into one); API time 9 either way
    run = run_factory({"cuda_api": {"start_ns": [0, 5], "end_ns": [5, 9], "pid": [1, 1], "tid": [1, 1],
                                    "correlation_id": [1, 2], "name": ["cudaLaunchKernel"] * 2,
                                    "duration_ns": [5, 4]}})
    with Engine([run]) as eng:
        [r] = eng.query("cpu_overhead").to_pylist()
    assert (r["api_ns"], r["launch_api_ns"], r["launches"], r["launch_call_avg_ns"]) == (9, 9, 2, 4.5)
    # host_cpu_utilization only sums union length: a thread switched from core 0 to core 1 at t=40
    # ([0,40) then [40,100)) is busy 100 ns, merged into one island or not
    run = run_factory({"cpu_thread_state": {"start_ns": [0, 40], "end_ns": [40, 100], "cpu": [0, 1],
                                            "pid": [1, 1], "tid": [1, 1]}})
    with Engine([run]) as eng:
        rows = eng.query("host_cpu_utilization").to_pylist()
    [t] = [r for r in rows if r["level"] == "thread"]
    assert (t["wall_ns"], t["busy_ns"], t["cores_busy"]) == (100, 100, 1.0)
