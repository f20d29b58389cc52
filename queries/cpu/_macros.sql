-- Interval macros shared by the named queries of queries/cpu/ (cpu_overhead,
-- host_cpu_utilization) and by queries/comm/nccl.sql (tk_interval_islands, its kernel unions);
-- loaded like queries/_macros.sql, created on a connection before the first statement that
-- calls them. Linear in their inputs: sorts, window functions, ASOF joins.
--
-- Both macros take the NAME of a table or CTE (query_table) whose rows are intervals keyed by
-- (run_id, pid, tid, cls): pid and tid a thread, cls the class of interval the caller sweeps
-- separately (e.g. 'all', 'sync', 'launch' CUDA API calls; 'sched' or 'osrt' host time).

-- tk_interval_islands(tbl, merge_touching): the union of each key's intervals [start_ns, end_ns)
-- as disjoint "islands", by sort and sweep (order by start, then end; an interval opens a new
-- island when it starts at or after -- merge_touching = false -- or strictly after --
-- merge_touching = true -- the running maximum of the ends before it). Nested and overlapping
-- intervals are always one island. merge_touching decides only whether two intervals that touch
-- (one ends at the nanosecond the next starts) are one island or two:
--   false: touching intervals are separate islands -- the right choice when an island is COUNTED
--          (cpu_overhead: two back-to-back launch calls on a thread are two launches; a driver
--          launch nested in a runtime launch is one);
--   true:  touching intervals are one island -- enough when only the union's LENGTH is used
--          (host_cpu_utilization: busy time), and fewer islands.
-- The union length, and every tk_union_between() result, is the same either way.
-- Input columns: run_id, pid, tid, cls, start_ns, end_ns (end_ns > start_ns; the caller filters).
-- Output: run_id, pid, tid, cls, start_ns, end_ns, cum_before_ns (union time of the key's earlier
-- islands, for union-time-before-t lookups).
CREATE OR REPLACE TEMP MACRO tk_interval_islands(tbl, merge_touching) AS TABLE
WITH swept AS (
    SELECT run_id, pid, tid, cls, start_ns, end_ns,
           max(end_ns) OVER (PARTITION BY run_id, pid, tid, cls ORDER BY start_ns, end_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max_end
    FROM query_table(tbl)
),
numbered AS (
    SELECT *, sum(CASE WHEN prev_max_end IS NULL OR start_ns > prev_max_end
                            OR (NOT merge_touching AND start_ns = prev_max_end) THEN 1 ELSE 0 END)
                  OVER (PARTITION BY run_id, pid, tid, cls ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS island
    FROM swept
),
islands AS (
    SELECT run_id, pid, tid, cls, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM numbered GROUP BY run_id, pid, tid, cls, island
)
SELECT *, coalesce(CAST(sum(end_ns - start_ns) OVER (PARTITION BY run_id, pid, tid, cls ORDER BY start_ns
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS BIGINT), 0) AS cum_before_ns
FROM islands;

-- tk_union_between(windows, islands): the ASOF window probe. For every row of the table `windows`
-- (any columns, among them run_id, pid, tid, cls, w0, w1), union_ns = U(w1) - U(w0), the time of
-- the key's islands (a tk_interval_islands result, named by `islands`) inside [w0, w1), where
-- U(t) = cum_before_ns + (min(t, end_ns) - start_ns) of the key's last island starting at or
-- before t, 0 before the first. Exact (an island cut by a window edge counts for its part
-- inside); two ASOF joins, linear in windows + islands. pid and tid match null to null.
-- Output: the windows' columns, then union_ns (BIGINT).
CREATE OR REPLACE TEMP MACRO tk_union_between(windows, islands) AS TABLE
WITH at_end AS (
    SELECT w.*, coalesce(i.cum_before_ns + least(w.w1, i.end_ns) - i.start_ns, 0) AS tk_u1
    FROM query_table(windows) w ASOF LEFT JOIN query_table(islands) i
      ON w.run_id = i.run_id AND w.pid IS NOT DISTINCT FROM i.pid AND w.tid IS NOT DISTINCT FROM i.tid
     AND w.cls = i.cls AND w.w1 >= i.start_ns
)
SELECT e.* EXCLUDE (tk_u1),
       CAST(e.tk_u1 - coalesce(i.cum_before_ns + least(e.w0, i.end_ns) - i.start_ns, 0) AS BIGINT) AS union_ns
FROM at_end e ASOF LEFT JOIN query_table(islands) i
  ON e.run_id = i.run_id AND e.pid IS NOT DISTINCT FROM i.pid AND e.tid IS NOT DISTINCT FROM i.tid
 AND e.cls = i.cls AND e.w0 >= i.start_ns;
