-- gpu_time_breakdown: GPU time by category (compute kernels, NCCL kernels, memcpy, memset) and by name within it, with each one's share (for `tracekit plot kernels`).
-- @include core
--
-- GPU time is the sum of activity durations (end_ns - start_ns, as kernel_summary and
-- memcpy_summary sum them), over every device and stream of the run: concurrent activities
-- both count, so shares are of summed GPU time, not of wall time. Categories: 'nccl' for
-- kernels tk_is_nccl recognizes (ncclKernel_*, ncclDevKernel_*), 'compute' for every other
-- kernel, 'memcpy' (named 'Memcpy KIND', e.g. Memcpy HtoD) and 'memset'. level 'category' rows
-- give the totals per category; level 'name' rows the top names of the run (kernel names equal
-- kernel_summary's, with the same total_ns).
--
-- @param top BIGINT 15  Keep the N names with the most time per run (0 = all).
-- @column run_id
-- @column level         enum    'category' (one row per category) or 'name' (one row per name).
-- @column category      enum    compute, nccl, memcpy or memset.
-- @column name          text    Kernel name, 'Memcpy KIND' or 'Memset'; null for category rows.
-- @column instances     count   Executions.
-- @column total_ns      ns      Sum of their durations.
-- @column share         value   total_ns / the run's summed GPU time, a fraction 0-1.
-- @column rank_in_run   count   1 = the name with the most time (name rows).
-- @key total_ns share
-- @few_rows
WITH act AS (
    SELECT run_id, CASE WHEN tk_is_nccl(name) THEN 'nccl' ELSE 'compute' END AS category, name,
           end_ns - start_ns AS d
    FROM kernels
    UNION ALL
    SELECT run_id, 'memcpy', 'Memcpy ' || coalesce(kind, 'Unknown'), end_ns - start_ns FROM memcpy
    UNION ALL
    SELECT run_id, 'memset', 'Memset', end_ns - start_ns FROM memset
),
tot AS (SELECT run_id, sum(d) AS t FROM act GROUP BY run_id),
by_name AS (
    SELECT run_id, category, name, count(*) AS instances, sum(d) AS total_ns,
           row_number() OVER (PARTITION BY run_id ORDER BY sum(d) DESC, name, category) AS rank_in_run
    FROM act GROUP BY run_id, category, name
)
SELECT c.run_id, 'category' AS level, c.category, CAST(NULL AS VARCHAR) AS name, c.instances,
       CAST(c.total_ns AS BIGINT) AS total_ns, c.total_ns / nullif(t.t, 0) AS share, CAST(NULL AS BIGINT) AS rank_in_run
FROM (SELECT run_id, category, sum(instances) AS instances, sum(total_ns) AS total_ns FROM by_name GROUP BY ALL) c
JOIN tot t ON t.run_id = c.run_id
UNION ALL
SELECT n.run_id, 'name', n.category, n.name, n.instances, CAST(n.total_ns AS BIGINT), n.total_ns / nullif(t.t, 0), n.rank_in_run
FROM by_name n JOIN tot t ON t.run_id = n.run_id
WHERE coalesce(getvariable('top'), 0) <= 0 OR n.rank_in_run <= getvariable('top')
ORDER BY run_id, level, total_ns DESC, category, name;
