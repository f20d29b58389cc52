-- kernel_summary: GPU time per kernel name, as `nsys stats --report gpukernsum` (summed over grid/block).
--
-- One row per run and kernel name (the demangled name `nsys stats` shows). Every kernel execution
-- counts, whatever its device or stream; durations are end_ns - start_ns. time_pct is this name's
-- share of the summed kernel time of its run (not of wall time). Sorted by total time, descending.
--
-- @param top BIGINT 0  Keep only the N names with the most total time in each run (0 = all).
-- @column run_id     id     Run folder the row comes from.
-- @column name       text   Kernel name (demangled).
-- @column instances  count  Number of executions.
-- @column total_ns   ns     Sum of execution times.
-- @column avg_ns     ns     Mean execution time.
-- @column med_ns     ns     Median execution time (mean of the two middle values for an even count).
-- @column min_ns     ns     Shortest execution.
-- @column max_ns     ns     Longest execution.
-- @column stddev_ns  ns     Sample standard deviation (n - 1); 0 for a single execution, as nsys stats prints.
-- @column time_pct   %      total_ns as a percentage of all kernel time in the run.
WITH per_name AS (
    SELECT
        run_id,
        name,
        count(*) AS instances,
        sum(duration_ns) AS total_ns,
        avg(duration_ns) AS avg_ns,
        median(duration_ns) AS med_ns,
        min(duration_ns) AS min_ns,
        max(duration_ns) AS max_ns,
        stddev_samp(duration_ns) AS stddev_ns
    FROM kernels
    GROUP BY run_id, name
),
ranked AS (
    SELECT
        *,
        100.0 * total_ns / sum(total_ns) OVER (PARTITION BY run_id) AS time_pct,
        row_number() OVER (PARTITION BY run_id ORDER BY total_ns DESC, name) AS rank_in_run
    FROM per_name
)
SELECT run_id, name, instances, total_ns::BIGINT AS total_ns, avg_ns, med_ns::DOUBLE AS med_ns,
       min_ns, max_ns, coalesce(stddev_ns, 0.0) AS stddev_ns, time_pct
FROM ranked
WHERE getvariable('top') = 0 OR rank_in_run <= getvariable('top')
ORDER BY run_id, total_ns DESC, name;
