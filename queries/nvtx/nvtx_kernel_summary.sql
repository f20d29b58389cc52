-- nvtx_kernel_summary: Kernels per NVTX range, as `nsys stats --report nvtxkernsum`.
-- @include core
--
-- A kernel belongs to every NVTX range that contains the CUDA API call (runtime or driver) that launched it (the
-- call found by its correlation ID in the same process): a push/pop or start/end range on the
-- call's thread that starts at or before the call starts and ends at or after it ends (a range
-- never closed ends at the last NVTX timestamp (ranges and marks) of the run; start/end ranges closed on another
-- thread are left out, as nsys does). A kernel launched inside nested ranges counts in each of
-- them; its execution may outlast the range. Kernels in no range (or with no launch call) are
-- the rows with a NULL range_name (pid and tid of the call, NULL without one).
--
-- One row per run, range name, style, process, thread and kernel name. ranges counts the range
-- instances, instances the kernel executions; the time statistics are over (range, kernel) pairs,
-- so a kernel inside two ranges of the same name counts twice in total_ns (as in nsys).
-- Range names are 'domain:name' for a named domain, as nsys prints them. Like nsys, a run without
-- NVTX ranges or without CUDA API calls has no rows (there is nothing to attribute kernels to).
--
-- @column run_id
-- @column range_name   text   NVTX range ('domain:name' in a named domain); NULL: launched in no range.
-- @column style        enum   'push/pop' or 'start/end'; NULL with range_name.
-- @column pid          id     Process of the launch call.
-- @column tid          id     Thread of the launch call.
-- @column ranges       count  Range instances that contain a launch of this kernel name.
-- @column instances    count  Kernel executions.
-- @column total_ns     ns     Sum of the executions' durations (per range and kernel pair).
-- @column avg_ns       ns     Mean execution time.
-- @column med_ns       ns     Median execution time.
-- @column min_ns       ns     Shortest execution.
-- @column max_ns       ns     Longest execution.
-- @column stddev_ns    ns     Sample standard deviation (n - 1); 0 for one execution, as nsys prints.
-- @column kernel_name  text   Kernel name (demangled).
-- @key total_ns instances
-- @requires kernels nvtx_ranges cuda_api
WITH last AS (
    SELECT run_id, max(ts) AS m
    FROM (SELECT run_id, greatest(max(start_ns), max(end_ns)) AS ts FROM nvtx_ranges GROUP BY run_id
          UNION ALL
          SELECT run_id, max(timestamp_ns) AS ts FROM nvtx_marks GROUP BY run_id)
    GROUP BY run_id
),
r AS (
    SELECT n.run_id, n.range_id, n.pid, n.tid, n.start_ns, coalesce(n.end_ns, l.m) AS end_ns, n.style,
           CASE WHEN coalesce(n.domain, '') <> '' THEN n.domain || ':' || n.name ELSE n.name END AS range_name
    FROM nvtx_ranges n JOIN last l ON l.run_id = n.run_id
    WHERE n.style IN ('push/pop', 'start/end') AND n.end_tid IS NULL
),
k AS (
    SELECT k.run_id, row_number() OVER () AS kid, k.duration_ns, k.name,
           c.pid, c.tid, c.start_ns AS c_start, c.end_ns AS c_end
    FROM kernels k
    LEFT JOIN (SELECT run_id, pid, tid, correlation_id, start_ns, end_ns FROM cuda_api
               WHERE correlation_id IS NOT NULL) c
      ON c.run_id = k.run_id AND c.pid = k.pid AND c.correlation_id = k.correlation_id
),
combo AS (
    SELECT k.run_id, k.kid, k.duration_ns, k.name, k.pid, k.tid, r.range_id, r.range_name, r.style
    FROM k LEFT JOIN r
      ON r.run_id = k.run_id AND r.pid = k.pid AND r.tid = k.tid
     AND r.start_ns <= k.c_start AND r.end_ns >= k.c_end
)
SELECT run_id, range_name, style, pid, tid, count(DISTINCT range_id) AS ranges,
       count(DISTINCT kid) AS instances, sum(duration_ns)::BIGINT AS total_ns,
       unnest(tk_ns_stats(duration_ns)), name AS kernel_name
FROM combo
WHERE run_id IN (SELECT run_id FROM nvtx_ranges) AND run_id IN (SELECT run_id FROM cuda_api)
GROUP BY run_id, range_name, style, pid, tid, name
ORDER BY run_id, range_name NULLS FIRST, pid, tid, total_ns DESC, kernel_name
