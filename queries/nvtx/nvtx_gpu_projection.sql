-- nvtx_gpu_projection: GPU work launched inside each NVTX range (kernel time, projected GPU span), as `nsys stats --report nvtxgpuproj`.
-- @include nvtx
--
-- A GPU operation (kernel, memcpy or memset) belongs to a range when the CUDA API call that
-- launched it (cuda_api row with the same run, pid and correlation_id) lies inside the range on
-- the range's own thread: range start_ns <= call start_ns and call end_ns <= range end_ns, same
-- pid and tid. This is nsys's rule. Nested ranges each count the work of their children. Like
-- nsys, only ranges that end on the thread that opened them are projected (all push/pop ranges;
-- start/end ranges whose end_tid is NULL or equal to tid), a range never closed ends at the last
-- NVTX timestamp of its run (see nvtx_summary), and only ranges containing at least one launch
-- are listed. GPU work whose launching call is not in cuda_api is attributed to no range.
-- The projected span runs from the first start to the last end of the range's GPU operations
-- (kernels, copies and memsets, on any device or stream); kernel_ns adds up kernel durations only
-- (overlapping kernels on several streams add up, so it can exceed the span).
-- Computed with sort-based joins on (thread, time) keys: an ASOF join keeps the ranges in which
-- a launching call starts, then one interval (IE) join pairs them with the calls inside them.
-- Memory grows with the number of ranges and launches, not with their product. (The CTEs are
-- NOT MATERIALIZED: DuckDB 2.0 plans a piecewise merge join, quadratic in time, when the join's
-- inputs come from materialized CTEs; tests/test_summary_queries.py checks the plan.) Sorted as
-- nsys stats: by projected start, then longest projected duration first.
--
-- With -p by=name the ranges are rolled up per run, domain, name (PyTorch's `, seq = N`,
-- `, op_id = N`, `, sizes = [...]` suffixes removed, as nvtx_summary), style and process: ranges
-- counts them, duration_ns, launches, gpu_ops, kernels, kernel_ns and proj_duration_ns are sums
-- over them (a range nested in one of the same name counts in both), start_ns / proj_start_ns
-- the first and proj_end_ns the last; range_id, tid, depth and parent_range_id are NULL. Sorted
-- by summed projected duration, longest first.
--
-- @param by VARCHAR range [range|name]  One row per range (as nsys stats nvtxgpuproj) or per range name.
-- @column run_id
-- @column range_id from nvtx_ranges
-- @column domain            text   NVTX domain; '' for the default domain.
-- @column name              text   Range name.
-- @column style from nvtx_ranges
-- @column pid               id     Process of the range and of the launching calls.
-- @column tid               id     Thread of the range and of the launching calls.
-- @column depth from nvtx_ranges
-- @column parent_range_id from nvtx_ranges
-- @column start_ns          ns     Range start.
-- @column duration_ns       ns     Range duration (to the last NVTX timestamp of the run when never closed).
-- @column ranges            count  Ranges in the row (1 per range; with by=name, the ranges of that name).
-- @column launches          count  API calls inside the range that launched GPU work (distinct correlation IDs; nvtxgpuproj's NumGPUOps).
-- @column gpu_ops           count  GPU operations they launched (kernels, memcpys, memsets; a graph launch counts each of its operations).
-- @column kernels           count  Kernel executions among them.
-- @column kernel_ns         ns     Sum of the durations of those kernels.
-- @column proj_start_ns     ns     Start of the first GPU operation launched inside the range.
-- @column proj_end_ns       ns     End of the last one.
-- @column proj_duration_ns  ns     proj_end_ns - proj_start_ns.
-- @key proj_duration_ns kernel_ns
-- @optional range_id tid depth parent_range_id
-- @requires nvtx_ranges cuda_api
-- @empty no NVTX range holds a CUDA call that launched GPU work (kernels, copies, memsets linked by correlation ID) on its thread
WITH last_ts AS NOT MATERIALIZED (SELECT * FROM tk_nvtx_last_ns()),  -- queries/nvtx/_macros.sql
-- closed ranges as they are; only the (few) open ones look up their run's last timestamp
ranges AS NOT MATERIALIZED (
    SELECT r.run_id, r.range_id, coalesce(r.domain, '') AS domain, r.name, r.style, r.pid, r.tid,
           r.depth, r.parent_range_id, r.start_ns, r.end_ns
    FROM nvtx_ranges AS r
    WHERE r.end_ns IS NOT NULL AND (r.end_tid IS NULL OR r.end_tid = r.tid)
    UNION ALL
    SELECT r.run_id, r.range_id, coalesce(r.domain, '') AS domain, r.name, r.style, r.pid, r.tid,
           r.depth, r.parent_range_id, r.start_ns, l.last_ns AS end_ns
    FROM nvtx_ranges AS r
    JOIN last_ts AS l USING (run_id)
    WHERE r.end_ns IS NULL AND (r.end_tid IS NULL OR r.end_tid = r.tid)
),
ops AS NOT MATERIALIZED (
    SELECT run_id, pid, correlation_id, start_ns, end_ns, 1 AS is_kernel, end_ns - start_ns AS kernel_ns
    FROM kernels
    UNION ALL
    SELECT run_id, pid, correlation_id, start_ns, end_ns, 0, 0 FROM memcpy
    UNION ALL
    SELECT run_id, pid, correlation_id, start_ns, end_ns, 0, 0 FROM memset
),
-- one row per API call that launched GPU work
calls AS NOT MATERIALIZED (
    SELECT c.run_id, c.pid, c.tid, c.start_ns, c.end_ns,
           count(*) AS gpu_ops, sum(o.is_kernel) AS kernels, sum(o.kernel_ns) AS kernel_ns,
           min(o.start_ns) AS op_start_ns, max(o.end_ns) AS op_end_ns
    FROM ops AS o
    JOIN cuda_api AS c
      ON c.run_id = o.run_id AND c.pid = o.pid AND c.correlation_id = o.correlation_id
    GROUP BY c.run_id, c.pid, c.correlation_id, c.tid, c.start_ns, c.end_ns
),
-- every thread with ranges, numbered: (thread number, time) is one ordered key with the thread in
-- the high 64 bits, so "on the same thread and inside" is two inequalities (an IE join)
threads_n AS NOT MATERIALIZED (
    SELECT run_id, pid, tid, (row_number() OVER (ORDER BY run_id, pid, tid))::HUGEINT << 64 AS thread_key
    FROM (SELECT DISTINCT run_id, pid, tid FROM ranges)
),
call_keys AS NOT MATERIALIZED (
    SELECT t.thread_key + c.start_ns AS k_start, t.thread_key + c.end_ns AS k_end,
           c.gpu_ops, c.kernels, c.kernel_ns, c.op_start_ns, c.op_end_ns
    FROM calls AS c
    JOIN threads_n AS t
      ON c.run_id = t.run_id AND c.pid IS NOT DISTINCT FROM t.pid AND c.tid IS NOT DISTINCT FROM t.tid
),
-- only ranges in which some call starts can contain one: the first call starting at or after the
-- range start (an ASOF join, sort-based) must start before the range ends. This keeps the IE
-- join's inputs to the ranges that will be projected (on a 5 M-range export, a fifth of them).
range_keys AS NOT MATERIALIZED (
    SELECT r.*
    FROM (
        SELECT r.run_id, t.thread_key, r.range_id, t.thread_key + r.start_ns AS k_start, t.thread_key + r.end_ns AS k_end
        FROM ranges AS r
        JOIN threads_n AS t
          ON r.run_id = t.run_id AND r.pid IS NOT DISTINCT FROM t.pid AND r.tid IS NOT DISTINCT FROM t.tid
    ) AS r
    ASOF JOIN (SELECT k_start FROM call_keys) AS c ON r.k_start <= c.k_start
    WHERE c.k_start <= r.k_end
),
-- run_id is carried in the group key (not joined back from threads_n by thread_key): with many
-- runs, whose range IDs repeat, a join back let DuckDB join ranges on range_id alone first
-- (runs x rows; 300 run folders: 20 GB and 236 s instead of 25 s)
projected AS NOT MATERIALIZED (
    SELECT r.run_id, r.range_id,
           count(*) AS launches, sum(c.gpu_ops) AS gpu_ops, sum(c.kernels) AS kernels,
           sum(c.kernel_ns) AS kernel_ns, min(c.op_start_ns) AS proj_start_ns,
           max(c.op_end_ns) AS proj_end_ns
    FROM range_keys AS r
    JOIN call_keys AS c
      ON r.k_start <= c.k_start AND c.k_end <= r.k_end
    GROUP BY r.run_id, r.thread_key, r.range_id
),
per_range AS NOT MATERIALIZED (
    SELECT r.run_id, r.range_id, r.domain, r.name, r.style, r.pid, r.tid, r.depth, r.parent_range_id,
           r.start_ns, r.end_ns - r.start_ns AS duration_ns,
           p.launches, p.gpu_ops::BIGINT AS gpu_ops, p.kernels::BIGINT AS kernels,
           p.kernel_ns::BIGINT AS kernel_ns, p.proj_start_ns, p.proj_end_ns,
           p.proj_end_ns - p.proj_start_ns AS proj_duration_ns
    FROM projected AS p
    JOIN ranges AS r USING (run_id, range_id)
),
by_name AS NOT MATERIALIZED (
    SELECT run_id, CAST(NULL AS BIGINT) AS range_id, domain,
           regexp_replace(name, '(, (seq|op_id) = \d+|, (sizes|input_op_ids) = \[).*$', '', 's') AS name,
           style, pid, CAST(NULL AS BIGINT) AS tid, CAST(NULL AS INTEGER) AS depth,
           CAST(NULL AS BIGINT) AS parent_range_id, min(start_ns) AS start_ns,
           sum(duration_ns)::BIGINT AS duration_ns, count(*) AS ranges, sum(launches)::BIGINT AS launches,
           sum(gpu_ops)::BIGINT AS gpu_ops, sum(kernels)::BIGINT AS kernels,
           sum(kernel_ns)::BIGINT AS kernel_ns, min(proj_start_ns) AS proj_start_ns,
           max(proj_end_ns) AS proj_end_ns, sum(proj_duration_ns)::BIGINT AS proj_duration_ns
    FROM per_range
    WHERE getvariable('by') = 'name'
    GROUP BY ALL
)
SELECT run_id, range_id, domain, name, style, pid, tid, depth, parent_range_id, start_ns, duration_ns,
       1::BIGINT AS ranges, launches, gpu_ops, kernels, kernel_ns, proj_start_ns, proj_end_ns, proj_duration_ns
FROM per_range
WHERE getvariable('by') = 'range'
UNION ALL
SELECT run_id, range_id, domain, name, style, pid, tid, depth, parent_range_id, start_ns, duration_ns,
       ranges, launches, gpu_ops, kernels, kernel_ns, proj_start_ns, proj_end_ns, proj_duration_ns
FROM by_name
ORDER BY run_id, CASE WHEN getvariable('by') = 'name' THEN -proj_duration_ns END NULLS LAST,
         proj_start_ns, proj_duration_ns DESC, range_id, name;
